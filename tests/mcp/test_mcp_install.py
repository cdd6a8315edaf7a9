"""`mnemo mcp install|uninstall|status` against each client's real config layout."""

from __future__ import annotations

import json
import sys

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_mnemo.cli import app
from dsh_mnemo.mcp import clients

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


def test_unknown_client_is_refused() -> None:
    result = mnemo("mcp", "install", "--client", "vim")
    assert result["kind"] == "error" and "claude-desktop" in result["hint"]


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

