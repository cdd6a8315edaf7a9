"""`mnemo mcp install|uninstall|status` against each client's real config layout."""

from __future__ import annotations

import json
import os
import sys

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_mnemo.cli import app
from dsh_mnemo.harnesses import jsonc
from dsh_mnemo.mcp import CLIENT_NAMES, clients

runner = CliRunner()

JSON_CLIENTS = ("claude-code", "gemini", "qwen", "cursor", "claude-desktop")


def mnemo(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    document = json.loads(result.stdout)
    document["exit_code"] = result.exit_code
    return document


def default_path(home: Path, client: str) -> Path:
    return {"claude-code": home / ".claude.json", "codex": home / ".codex" / "config.toml",
            "gemini": home / ".gemini" / "settings.json",
            "qwen": home / ".qwen" / "settings.json", "cursor": home / ".cursor" / "mcp.json",
            "claude-desktop": home / ".config" / "Claude" / "claude_desktop_config.json"
            }[client]


@pytest.fixture
def home(isolated_env: Path) -> Path:
    return isolated_env / "home"


@pytest.mark.parametrize("client", JSON_CLIENTS)
def test_json_clients_keep_everything_else_back_up_and_are_idempotent(
        client: str, home: Path, data_dir: Path) -> None:
    if client == "claude-desktop" and sys.platform != "linux":
        pytest.skip("the Linux location is tested here")
    path = default_path(home, client)
    path.parent.mkdir(parents=True, exist_ok=True)
    foreign = {"theme": "dark", "mcpServers": {"other": {"command": "other-server",
                                                         "args": ["--flag"]}}}
    path.write_text(json.dumps(foreign), encoding="utf-8")
    first = mnemo("mcp", "install", "--client", client)
    assert first["action"] == "installed" and first["config_path"] == str(path)
    assert Path(first["backup_path"]).read_text() == json.dumps(foreign)
    written = json.loads(path.read_text())
    assert written["theme"] == "dark" and written["mcpServers"]["other"] == \
        foreign["mcpServers"]["other"]
    entry = written["mcpServers"]["mnemo"]
    assert entry["args"] == ["mcp"] and Path(entry["command"]).name == "mnemo"
    assert entry["env"]["MNEMO_DATA_DIR"] == str(data_dir)
    assert (entry.get("type") == "stdio") == (client == "claude-code")
    again = mnemo("mcp", "install", "--client", client)
    assert again["action"] == "unchanged" and again["backup_path"] is None
    assert mnemo("mcp", "status", "--client", client)["ok"] is True
    removed = mnemo("mcp", "uninstall", "--client", client)
    assert removed["action"] == "removed"
    assert json.loads(path.read_text()) == foreign
    assert mnemo("mcp", "uninstall", "--client", client)["action"] == "absent"
    status = mnemo("mcp", "status", "--client", client)
    assert status["installed"] is False and status["exit_code"] == 0


@pytest.mark.parametrize(("client", "variable", "relative"), [
    ("claude-code", "CLAUDE_CONFIG_DIR", ".claude.json"),
    ("codex", "CODEX_HOME", "config.toml"),
    ("gemini", "GEMINI_CLI_HOME", ".gemini/settings.json"),
    ("qwen", "QWEN_HOME", "settings.json"),
])
def test_each_clients_config_dir_variable_is_honoured(
        client: str, variable: str, relative: str, home: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    moved = tmp_path / "moved"
    monkeypatch.setenv(variable, str(moved))
    result = mnemo("mcp", "install", "--client", client)
    assert result["config_path"] == str(moved / relative)
    assert (moved / relative).exists() and not default_path(home, client).exists()


def test_codex_toml_is_edited_as_text_and_checked(home: Path) -> None:
    path = default_path(home, "codex")
    path.parent.mkdir(parents=True)
    original = ('# my Codex settings\nmodel = "gpt-5.5"  # keep\n\n'
                '[mcp_servers.docs]\ncommand = "docs-server"\nargs = ["--port", "1"]\n\n'
                '[features]\nplugins = false\n')
    path.write_text(original, encoding="utf-8")
    assert mnemo("mcp", "install", "--client", "codex")["action"] == "installed"
    text = path.read_text()
    assert text.startswith(original)  # everything before stays byte for byte
    parsed = tomllib.loads(text)
    assert parsed["mcp_servers"]["docs"] == {"command": "docs-server", "args": ["--port", "1"]}
    assert parsed["mcp_servers"]["mnemo"]["args"] == ["mcp"]
    assert parsed["features"] == {"plugins": False} and parsed["model"] == "gpt-5.5"
    assert mnemo("mcp", "install", "--client", "codex")["action"] == "unchanged"
    assert mnemo("mcp", "uninstall", "--client", "codex")["action"] == "removed"
    assert path.read_text().rstrip("\n") == original.rstrip("\n")


def test_codex_entry_in_a_shape_mnemo_cannot_edit_is_refused(home: Path) -> None:
    path = default_path(home, "codex")
    path.parent.mkdir(parents=True)
    mnemo_bin = clients.server_entry("codex")["command"]
    inline = f'[mcp_servers]\nmnemo = {{ command = "{mnemo_bin}", args = ["mcp", "-v"] }}\n'
    path.write_text(inline, encoding="utf-8")
    result = mnemo("mcp", "install", "--client", "codex")
    assert result["kind"] == "error" and "left untouched" in result["error"]
    assert path.read_text() == inline


@pytest.mark.parametrize("client", ["claude-code", "codex"])
def test_broken_files_and_foreign_mnemo_entries_are_left_untouched(client: str,
                                                                  home: Path) -> None:
    path = default_path(home, client)
    path.parent.mkdir(parents=True, exist_ok=True)
    broken = "{not json" if client != "codex" else "model = \n"
    path.write_text(broken, encoding="utf-8")
    result = mnemo("mcp", "install", "--client", client)
    assert result["kind"] == "error" and result["exit_code"] == 9
    assert path.read_text() == broken
    foreign = (json.dumps({"mcpServers": {"mnemo": {"command": "/opt/mnemonic/bin/serve"}}})
               if client != "codex" else '[mcp_servers.mnemo]\ncommand = "/opt/x/serve"\n')
    path.write_text(foreign, encoding="utf-8")
    result = mnemo("mcp", "install", "--client", client)
    assert result["kind"] == "error" and result["exit_code"] == 5
    assert mnemo("mcp", "uninstall", "--client", client)["action"] == "absent"
    assert path.read_text() == foreign


OURS_TEXT = '{"command": "/x/bin/mnemo", "args": ["mcp"]}'


@pytest.mark.parametrize(("where", "text"), [
    ("mcpServers", '{"mcpServers": {"docs": {"command": "d"}}, "mcpServers": {}}'),
    ("mcpServers.mnemo", '{"mcpServers": {"mnemo": {"command": "/opt/other/serve"}, '
                         f'"mnemo": {OURS_TEXT}}}}}'),
])
def test_a_key_written_twice_is_refused_untouched(where: str, text: str, home: Path) -> None:
    """The client reads the last one only: install would fill it, and uninstall would
    bring the other back (an internal error) or delete it with mnemo's entry."""
    path = default_path(home, "cursor")
    path.parent.mkdir(parents=True)
    path.write_text(text)
    result = mnemo("mcp", "install", "--client", "cursor")
    assert result["exit_code"] == 9 and f"has `{where}` twice" in result["error"]
    assert path.read_text() == text
    result = mnemo("mcp", "uninstall", "--client", "cursor")  # absent, or refused
    assert result["exit_code"] == (9 if "mnemo" in text else 0)
    assert path.read_text() == text


def test_uninstall_refuses_clearly_once_mcp_servers_is_written_twice(home: Path) -> None:
    path = default_path(home, "cursor")
    path.parent.mkdir(parents=True)
    path.write_text('{"theme": "dark"}')
    mnemo("mcp", "install", "--client", "cursor")
    installed = path.read_text()
    doubled = '{"mcpServers": {"docs": {"command": "d"}}, ' + installed.removeprefix("{")
    path.write_text(doubled)
    result = mnemo("mcp", "uninstall", "--client", "cursor")
    assert result["exit_code"] == 9 and "internal error" not in result["error"]
    assert path.read_text() == doubled
    path.write_text(installed)
    assert mnemo("mcp", "uninstall", "--client", "cursor")["exit_code"] == 0
    assert path.read_text() == '{"theme": "dark"}'


def test_unknown_client_is_refused() -> None:
    result = mnemo("mcp", "install", "--client", "vim")
    assert result["kind"] == "error" and "claude-desktop" in result["error"]
    assert result["exit_code"] == 2


def test_a_symlinked_config_stays_a_symlink_and_the_backup_is_private(
        home: Path, tmp_path: Path) -> None:
    """Dotfile managers link ~/.claude.json from a repository: install edits the file
    the link points at, and the copy it keeps first is readable by the user alone."""
    import stat

    real = tmp_path / "dotfiles" / "claude.json"
    real.parent.mkdir()
    real.write_text(json.dumps({"theme": "dark"}), encoding="utf-8")
    real.chmod(0o644)
    link = default_path(home, "claude-code")
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(real)
    done = mnemo("mcp", "install", "--client", "claude-code")
    assert done["action"] == "installed"
    assert link.is_symlink() and link.resolve() == real
    assert "mnemo" in json.loads(real.read_text())["mcpServers"]
    assert stat.S_IMODE(real.stat().st_mode) == 0o644
    backup = Path(done["backup_path"])
    assert json.loads(backup.read_text()) == {"theme": "dark"}
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600



def test_a_dangling_symlink_stays_and_only_the_file_created_through_it_goes(
        home: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "claude.json"
    real.parent.mkdir()
    link = default_path(home, "claude-code")
    link.symlink_to(real)
    assert mnemo("mcp", "install", "--client", "claude-code")["action"] == "installed"
    assert link.is_symlink() and "mnemo" in json.loads(real.read_text())["mcpServers"]
    removed = runner.invoke(app, ["mcp", "uninstall", "--client", "claude-code"])
    assert removed.exit_code == 0 and "removed it (the link stays)" in removed.stdout
    assert link.is_symlink() and os.readlink(link) == str(real) and not real.exists()


# Each client's file as users have it before `mcp install` (None: no file at all).
JSON_LAYOUTS = {
    "no file": None,
    "one line": '{"numStartups": 3, "theme": "dark"}\n',
    "one line, no final newline": '{"numStartups": 3, "theme": "dark"}',
    "indented, other keys and servers": json.dumps(
        {"theme": "dark", "mcpServers": {"docs": {"command": "docs-server", "args": ["-v"]}},
         "projects": {"/src/app": {"allowedTools": []}}}, indent=4) + "\n",
    "indented, other keys, no mcpServers": json.dumps(
        {"numStartups": 12, "tipsHistory": {"new-user-warmup": 1}, "autoUpdates": False},
        indent=2) + "\n",
    "an empty mcpServers (as Cursor writes it)": '{\n  "mcpServers": {}\n}\n',
    "a null mcpServers": '{\n  "mcpServers": null,\n  "theme": "dark"\n}\n',
    "CRLF line ends": ('{\r\n    "mcpServers": {\r\n        "docs": {"command": "d"}\r\n'
                       '    }\r\n}\r\n'),
    "an empty file": "",
}
TOML_LAYOUTS = {
    "no file": None,
    "comments and other tables": (
        '# my Codex settings\nmodel = "gpt-5.5"  # keep\n\n[mcp_servers.docs]\n'
        'command = "docs-server"\nargs = ["--port", "1"]\n\n[features]\nplugins = false\n'),
    "a blank line at the end": 'model = "gpt-5.5"\n\n',
    "no final newline": 'model = "gpt-5.5"',
    "CRLF line ends": 'model = "gpt-5.5"\r\n\r\n[features]\r\nplugins = false\r\n',
    "projects and trust records": (
        '[projects."/src/app"]\ntrust_level = "trusted"\n\n'
        '[hooks.state."/home/u/.codex/hooks.json:stop:0:0"]\ntrusted_hash = "sha256:0"\n'),
    "an empty file": "",
}
ROUND_TRIPS = [(c, name) for c in JSON_CLIENTS for name in JSON_LAYOUTS] + \
    [("codex", name) for name in TOML_LAYOUTS]


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) under `root`."""
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize(("client", "layout"), ROUND_TRIPS)
def test_uninstall_after_install_gives_back_every_file_byte_for_byte(
        client: str, layout: str, home: Path) -> None:
    if client == "claude-desktop" and sys.platform != "linux":
        pytest.skip("the Linux location is tested here")
    original = (TOML_LAYOUTS if client == "codex" else JSON_LAYOUTS)[layout]
    path = default_path(home, client)
    if original is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(original.encode())
    before = snapshot(home)
    assert mnemo("mcp", "install", "--client", client)["action"] == "installed"
    assert mnemo("mcp", "status", "--client", client)["installed"] is True
    removed = mnemo("mcp", "uninstall", "--client", client)
    assert removed["action"] == "removed" and removed["exit_code"] == 0
    assert snapshot(home) == before  # no byte, file or folder more or less
    assert mnemo("mcp", "uninstall", "--client", client)["action"] == "absent"


def test_a_one_line_file_stays_on_one_line_while_installed(home: Path) -> None:
    path = default_path(home, "claude-code")
    path.write_text('{"numStartups": 3, "theme": "dark"}\n')
    mnemo("mcp", "install", "--client", "claude-code")
    text = path.read_text()
    assert text.startswith('{"numStartups": 3, "theme": "dark", "mcpServers": {"mnemo": ')
    assert text.count("\n") == 1


def test_a_created_file_goes_unless_something_else_came_into_it(home: Path) -> None:
    path = default_path(home, "cursor")
    mnemo("mcp", "install", "--client", "cursor")
    removed = runner.invoke(app, ["mcp", "uninstall", "--client", "cursor"])
    assert "mnemo had created that file" in removed.output
    assert not path.exists() and not path.parent.exists()
    mnemo("mcp", "install", "--client", "cursor")
    document = json.loads(path.read_text())
    document["mcpServers"]["docs"] = {"command": "docs-server"}
    path.write_text(json.dumps(document, indent=2) + "\n")
    assert mnemo("mcp", "uninstall", "--client", "cursor")["action"] == "removed"
    assert json.loads(path.read_text()) == {"mcpServers": {"docs": {"command": "docs-server"}}}


@pytest.mark.parametrize("first", ["mcp", "hooks"])
@pytest.mark.parametrize("client", ["gemini", "qwen", "codex"])
def test_a_file_mcp_and_hooks_both_wrote_goes_with_the_last_uninstall(
        client: str, first: str, home: Path) -> None:
    """Gemini's and Qwen's settings.json hold hooks and servers; Codex's config.toml holds
    the server and the hooks' trust records: one record of what mnemo created serves both."""
    runs = {"mcp": ("mcp", "--client", client),
            "hooks": ("hooks", "--harness", client) + (("--trust",) if client == "codex" else ())}
    path = default_path(home, client)
    second = "hooks" if first == "mcp" else "mcp"
    for command in (first, second):
        name, *rest = runs[command]
        result = mnemo(name, "install", *rest)
        assert result["action"] == "installed", result
    assert path.exists()
    for command in (first, second):
        name, flag, value = runs[command][:3]
        assert mnemo(name, "uninstall", flag, value)["action"] == "removed"
        assert path.exists() == (command == first)
    assert snapshot(home) == {}


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_a_second_install_has_nothing_still_to_do(client: str, home: Path) -> None:
    first = mnemo("mcp", "install", "--client", client)
    assert first["action"] == "installed" and first["next_steps"]
    again = mnemo("mcp", "install", "--client", client)
    assert again["action"] == "unchanged" and again["next_steps"] == []
    output = runner.invoke(app, ["mcp", "install", "--client", client]).output
    assert "nothing changed" in output and "Still to do" not in output


# ─── Gemini's and Qwen's settings.json: JSON with comments ────────────────

# Gemini CLI and Qwen Code strip `//` and `/* */` comments, then JSON.parse, so their
# users keep comments in settings.json; `mcp install` must take such a file as it is.
COMMENTED_LAYOUTS = {
    "comments around other keys": (
        '// my settings\n{\n  "theme": "dark", /* keep */\n'
        '  "general": {"vimMode": true} // vim\n}\n'),
    "a server and comments in mcpServers": (
        '{\n    "mcpServers": {\n        // my servers\n'
        '        "docs": {"command": "docs-server"} // docs\n    }\n}\n'),
    "an mcpServers holding only a comment": '{\n  "mcpServers": {\n    // none yet\n  }\n}\n',
    "a comment on the opening line": '{ // nothing yet\n}\n',
    "a block comment in an inline object": '{"mcpServers": {/* none */}}\n',
    "a block comment after the last member": '{"theme": "dark" /* c */}',
    "CRLF line ends": '{\r\n  // mine\r\n  "theme": "dark" // t\r\n}\r\n',
    "a byte order mark": '\ufeff{\n  /* mine */\n  "theme": "dark"\n}\n',
}


@pytest.mark.parametrize("layout", COMMENTED_LAYOUTS)
@pytest.mark.parametrize("client", ["gemini", "qwen"])
def test_a_settings_file_with_comments_is_edited_and_given_back_byte_for_byte(
        client: str, layout: str, home: Path) -> None:
    original = COMMENTED_LAYOUTS[layout]
    path = default_path(home, client)
    path.parent.mkdir(parents=True)
    path.write_bytes(original.encode())
    before = snapshot(home)
    installed = mnemo("mcp", "install", "--client", client)
    assert installed["action"] == "installed", installed
    text = path.read_text(encoding="utf-8")
    for comment in ("// my settings", "/* keep */", "// vim", "// none yet", "/* none */",
                    "// nothing yet", "/* c */", "// mine", "// t", "/* mine */"):
        assert (comment in text) == (comment in original), comment
    assert clients.is_ours(jsonc.loads(text)["mcpServers"]["mnemo"])
    assert mnemo("mcp", "status", "--client", client)["ok"] is True
    assert mnemo("mcp", "install", "--client", client)["action"] == "unchanged"
    removed = mnemo("mcp", "uninstall", "--client", client)
    assert removed["action"] == "removed" and removed["exit_code"] == 0
    assert snapshot(home) == before


@pytest.mark.parametrize("first", ["mcp", "hooks"])
@pytest.mark.parametrize("client", ["gemini", "qwen"])
def test_hooks_and_mcp_share_a_settings_file_with_comments(client: str, first: str,
                                                           home: Path) -> None:
    """Either installed first, the other uninstalled first: the same bytes come back."""
    original = COMMENTED_LAYOUTS["comments around other keys"]
    path = default_path(home, client)
    path.parent.mkdir(parents=True)
    path.write_text(original, encoding="utf-8")
    runs = {"mcp": ("mcp", "--client", client), "hooks": ("hooks", "--harness", client)}
    order = [first, "hooks" if first == "mcp" else "mcp"]
    for command in order:
        name, flag, value = runs[command]
        assert mnemo(name, "install", flag, value)["action"] == "installed"
    document = jsonc.loads(path.read_text(encoding="utf-8"))
    assert "mnemo" in document["mcpServers"] and document["hooks"]
    for command in reversed(order):
        name, flag, value = runs[command]
        assert mnemo(name, "uninstall", flag, value)["action"] == "removed"
    assert path.read_text(encoding="utf-8") == original


def test_each_client_takes_a_comment_exactly_when_it_reads_one(home: Path) -> None:
    """Claude Code's .claude.json, Cursor's mcp.json and Claude Desktop's file are strict
    JSON: a comment there is refused, the file untouched; Gemini and Qwen take it."""
    commented = '{\n  // mine\n  "theme": "dark"\n}\n'
    for client in JSON_CLIENTS:
        if client == "claude-desktop" and sys.platform != "linux":
            continue
        path = default_path(home, client)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(commented, encoding="utf-8")
        result = mnemo("mcp", "install", "--client", client)
        if client in ("gemini", "qwen"):
            assert result["action"] == "installed", (client, result)
            assert "// mine" in path.read_text(encoding="utf-8")
        else:
            assert result["kind"] == "error" and result["exit_code"] == 9, (client, result)
            assert "comments are not allowed" in result["error"]
            assert path.read_text(encoding="utf-8") == commented


@pytest.mark.parametrize("client", ["gemini", "qwen"])
def test_a_file_that_is_not_even_json_with_comments_is_refused_untouched(
        client: str, home: Path) -> None:
    path = default_path(home, client)
    path.parent.mkdir(parents=True)
    broken = '{\n  // mine\n  "theme": "dark",\n}\n'  # a trailing comma: JSON.parse refuses
    path.write_text(broken, encoding="utf-8")
    for command in ("install", "uninstall"):
        result = mnemo("mcp", command, "--client", client)
        assert result["kind"] == "error" and result["exit_code"] == 9, result
        assert "trailing comma at line 4, column 1" in result["error"]
        assert "is not JSON (with comments)" in result["error"]
        assert "left untouched" in result["error"]
    people = runner.invoke(app, ["mcp", "install", "--client", client])
    assert people.exit_code == 9 and "Traceback" not in people.output
    assert people.output.splitlines()[0] == (
        f"mnemo: {path} is not JSON (with comments) (trailing comma at line 4, column 1); "
        "it was left untouched")
    assert path.read_text(encoding="utf-8") == broken
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]


@pytest.mark.parametrize("client", ["gemini", "codex"])
def test_status_exits_8_when_the_config_cannot_be_read_or_the_entry_cannot_work(
        client: str, home: Path) -> None:
    path = default_path(home, client)
    path.parent.mkdir(parents=True, exist_ok=True)
    assert mnemo("mcp", "status", "--client", client)["exit_code"] == 0  # no file: not installed
    path.write_text('{"mcpServers": {"mnemo": 5' if client == "gemini" else "[mcp_servers\n",
                    encoding="utf-8")
    broken = mnemo("mcp", "status", "--client", client)
    assert broken["exit_code"] == 8 and broken["config_exists"] is False
    assert broken["problems"] and str(path) in broken["problems"][0]
    path.unlink()
    path.mkdir()  # not even a file
    assert mnemo("mcp", "status", "--client", client)["exit_code"] == 8
    path.rmdir()
    assert mnemo("mcp", "install", "--client", client)["exit_code"] == 0
    assert mnemo("mcp", "status", "--client", client)["exit_code"] == 0
    moved = home / "uninstalled" / "mnemo"
    text = path.read_text(encoding="utf-8")
    entry = clients.status(client).mnemo_path
    assert entry
    path.write_text(text.replace(entry, str(moved)), encoding="utf-8")
    gone = mnemo("mcp", "status", "--client", client)
    assert gone["installed"] is True and gone["ok"] is False and gone["exit_code"] == 8
