"""`hooks uninstall` gives back the file as it was before `hooks install`.

What is the user's stays byte for byte: hooks that only mention mnemo, the
containers (`"hooks": {}`, `"Stop": []`) they wrote, a symlink they made; a
file mnemo cannot edit without doubt is refused with exit 9, untouched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_mnemo.cli import app
from dsh_mnemo.errors import ExitCode
from dsh_mnemo.harnesses import install as core

runner = CliRunner()


def home() -> Path:
    return Path(os.environ["HOME"])


def settings(harness: str) -> Path:
    folder = {"claude-code": ".claude", "gemini": ".gemini", "qwen": ".qwen",
              "codex": ".codex", "cursor": ".cursor"}[harness]
    name = "settings.json" if harness in ("claude-code", "gemini", "qwen") else "hooks.json"
    return home() / folder / name


def put(harness: str, text: str) -> Path:
    path = settings(harness)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ─── Only the commands install writes are mnemo's ──────────────────────────

MENTIONS = """{
  "hooks": {
    "Stop": [ {"hooks": [{"type": "command", "command": "logger 'mnemo hook finished'"}]} ],
    "UserPromptSubmit": [ {"hooks": [{"type": "command",
      "command": "/home/me/tools/old-mnemo-hook.sh.disabled --audit"}]} ]
  }
}
"""


@pytest.mark.parametrize("command", [
    "logger 'mnemo hook finished'",
    "/home/me/tools/old-mnemo-hook.sh.disabled --audit",
    "echo run mnemo hook later",
    "mnemo hook prompt --harness claude-code",
    "/d/hooks/mnemo-hook.sh prompt claude-code --audit",
    "/d/hooks/mnemo-hook.sh prompt claude-code; rm -rf /tmp/x",
    "/d/hooks/mnemo-hook.sh.bak prompt claude-code",
    "hooks/mnemo-hook.sh prompt claude-code",
    "/d/hooks/mnemo-hook.sh lint claude-code",
    "/d/hooks/mnemo-hook.sh prompt vim",
    "sh /d/hooks/mnemo-hook.sh prompt claude-code",
    "'/d/hooks/mnemo-hook.sh' prompt claude-code",  # quoted as shlex.quote never does
    "/d/hooks/mnemo-hook.sh 'prompt unclosed",
])
def test_a_command_that_only_mentions_mnemo_is_not_ours(command: str) -> None:
    assert not core.is_ours({"type": "command", "command": command})


@pytest.mark.parametrize("wrapper", ["/d/hooks/mnemo-hook.sh",
                                     "/home/me/My Data/hooks/mnemo-hook.sh",
                                     "/home/o'brien/.local/share/mnemo/hooks/mnemo-hook.sh"])
@pytest.mark.parametrize("harness", ["claude-code", "codex", "gemini", "cursor", "qwen"])
def test_every_command_install_writes_is_ours(wrapper: str, harness: str) -> None:
    spec = core.spec_for(harness)
    for kind in spec.installed_events:
        assert core.is_ours(core.desired_entry(spec, Path(wrapper), kind))


def test_install_and_uninstall_leave_hooks_that_mention_mnemo_alone(data_dir: Path) -> None:
    path = put("claude-code", MENTIONS)
    result = core.install("claude-code")
    assert result.action == "installed"
    after = json.loads(path.read_text())["hooks"]
    assert after["Stop"][0]["hooks"][0]["command"] == "logger 'mnemo hook finished'"
    assert after["UserPromptSubmit"][0]["hooks"][0]["command"] == \
        "/home/me/tools/old-mnemo-hook.sh.disabled --audit"
    assert [len(after[e]) for e in ("Stop", "UserPromptSubmit")] == [2, 2]
    assert core.uninstall("claude-code").action == "removed"
    assert path.read_text() == MENTIONS


def test_gemini_keeps_an_echo_that_names_mnemo_hook(data_dir: Path) -> None:
    text = ('{\n  // mine\n  "hooks": {"AfterAgent": [{"hooks": [{"type": "command", '
            '"command": "echo run mnemo hook later"}]}]}\n}\n')
    path = put("gemini", text)
    assert core.uninstall("gemini").action == "absent"
    assert not core.harness_status("gemini").installed
    core.install("gemini")
    assert "echo run mnemo hook later" in path.read_text()
    core.uninstall("gemini")
    assert path.read_text() == text


# ─── A symlink stays the user's ────────────────────────────────────────────

@pytest.mark.parametrize("harness", ["claude-code", "gemini"])
def test_a_dangling_symlink_stays_and_only_the_file_created_through_it_goes(
        harness: str, tmp_path: Path, data_dir: Path) -> None:
    """A dotfiles repository not populated yet: install creates the file the link
    points at (and its folder); uninstall removes those, never the link."""
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / harness / "settings.json"
    link = settings(harness)
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    assert core.install(harness).action == "installed"
    assert link.is_symlink() and core.harness_status(harness).installed
    assert "mnemo-hook.sh" in real.read_text()
    result = core.uninstall(harness)
    assert result.action == "removed" and result.removed_file
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert not real.exists() and not real.parent.exists() and dotfiles.is_dir()
    assert core.uninstall(harness).action == "absent"


def test_uninstall_says_the_link_stays(tmp_path: Path, data_dir: Path) -> None:
    link = settings("claude-code")
    link.parent.mkdir(parents=True)
    link.symlink_to(tmp_path / "settings.json")
    core.install("claude-code")
    result = runner.invoke(app, ["hooks", "uninstall", "--harness", "claude-code"])
    assert result.exit_code == 0 and "removed it (the link stays)" in result.stdout


def test_a_symlink_to_a_file_of_the_users_keeps_the_file(tmp_path: Path,
                                                         data_dir: Path) -> None:
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text('{"model": "opus"}\n')
    link = settings("claude-code")
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    core.install("claude-code")
    assert not core.uninstall("claude-code").removed_file
    assert link.is_symlink() and real.read_text() == '{"model": "opus"}\n'


def test_cursor_installs_into_a_file_with_only_its_version(data_dir: Path) -> None:
    """`{"version": 1}` without `hooks` was refused as an internal error."""
    path = put("cursor", '{"version": 1}\n')
    assert core.install("cursor").action == "installed"
    assert core.harness_status("cursor").installed and json.loads(path.read_text())["version"] == 1


# ─── Containers the user wrote stay; those install added go ────────────────

CONTAINERS = [
    ("claude-code", '{"hooks": {}}'),
    ("claude-code", '{"hooks": {"Stop": []}}'),
    ("claude-code", '{\n  "model": "opus",\n  "hooks": {\n    "Stop": [],\n    "PreToolUse": '
                    '[{"hooks": [{"type": "command", "command": "guard.sh"}]}]\n  }\n}\n'),
    ("codex", '{"hooks": {"SessionStart": [], "Stop": []}}\n'),
    ("gemini", '{\n  "hooks": {\n    // nothing yet\n  }\n}'),
    ("gemini", '{"a": 1, /* } ] , */ "hooks": {"AfterAgent": [ /* [ */ ]}}'),
    ("qwen", '{\n  "hooks": {\n    "Stop": [\n      /* later */\n    ]\n  }\n}\n'),
    ("cursor", '{"version": 1}\n'),
    ("cursor", '{\n  "version": 1,\n  "hooks": {}\n}\n'),
]


@pytest.mark.parametrize(("harness", "text"), CONTAINERS)
def test_uninstall_keeps_the_containers_the_user_wrote(harness: str, text: str,
                                                       data_dir: Path) -> None:
    path = put(harness, text)
    core.install(harness)
    assert core.harness_status(harness).installed
    core.install(harness)  # an install with nothing to change keeps what was noted
    assert core.uninstall(harness).action == "removed"
    assert path.read_text() == text


def test_a_reinstall_that_updates_mnemos_entries_keeps_what_was_noted(data_dir: Path) -> None:
    text = '{"hooks": {"Stop": []}}'
    path = put("claude-code", text)
    core.install("claude-code")
    # mnemo's entries as another data dir wrote them: the next install updates them
    path.write_text(path.read_text().replace(str(data_dir), "/elsewhere"))
    assert core.install("claude-code").action == "updated"
    core.uninstall("claude-code")
    assert path.read_text() == text


def test_what_install_added_goes_and_what_the_user_had_stays(data_dir: Path) -> None:
    text = '{\n  "hooks": {\n    "Stop": []\n  }\n}\n'
    path = put("claude-code", text)
    core.install("claude-code")
    # a container the user added after the install, in which mnemo has nothing, stays
    path.write_text(path.read_text().replace('"hooks": {', '"hooks": {\n    "Notification": [],'))
    core.uninstall("claude-code")
    assert json.loads(path.read_text()) == {"hooks": {"Notification": [], "Stop": []}}
    assert core.install("claude-code").action == "installed"


@pytest.mark.parametrize("first", ["hooks", "mcp"])
def test_hooks_and_mcp_keep_their_containers_in_a_shared_file(first: str,
                                                              data_dir: Path) -> None:
    from dsh_mnemo.mcp import clients

    text = '{\n  "mcpServers": {},\n  "hooks": {}\n}\n'
    path = put("gemini", text)
    core.install("gemini")
    clients.install("gemini")
    if first == "hooks":
        core.uninstall("gemini")
        clients.uninstall("gemini")
    else:
        clients.uninstall("gemini")
        core.uninstall("gemini")
    assert path.read_text() == text


def test_a_record_written_before_members_kept_what_they_held(data_dir: Path) -> None:
    """A `created.json` of the earlier format, [file, member]: the member held `{}`."""
    from dsh_mnemo.harnesses import created

    path = put("cursor", '{"mcpServers": {}}')
    created.record_path().parent.mkdir(parents=True)
    created.record_path().write_text(json.dumps(
        {"files": [], "dirs": [], "kept": [[str(path), "mcpServers"]]}))
    assert created.kept(path) == {"mcpServers": "{}"}
    created.note_kept(path, {"hooks": "{}"})
    assert created.kept(path) == {"mcpServers": "{}", "hooks": "{}"}
    created.note_kept(path, {"mcpServers": None})
    assert created.kept(path) == {"hooks": "{}"}


# ─── What mnemo cannot edit without doubt: exit 9, untouched ───────────────

def hooks_cli(action: str, harness: str) -> tuple[int, str]:
    result = runner.invoke(app, ["hooks", action, "--harness", harness])
    return result.exit_code, result.stderr


@pytest.mark.parametrize("harness", ["claude-code", "gemini", "cursor"])
def test_a_null_hooks_is_a_data_error_and_the_file_is_untouched(harness: str,
                                                                 data_dir: Path) -> None:
    text = '{"model": "opus", "hooks": null}\n'
    path = put(harness, text)
    code, stderr = hooks_cli("install", harness)
    assert code == ExitCode.DATA == 9
    assert "`hooks` is not an object (it is null)" in stderr and "internal error" not in stderr
    assert hooks_cli("uninstall", harness)[0] == 0  # nothing of mnemo's there
    assert path.read_text() == text


DOUBLED = {
    "hooks": '{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}, '
             '"hooks": {"Stop": []}}',
    "hooks.Stop": '{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}], '
                  '"Stop": []}}',
    "hooks.Stop[0].hooks": '{"hooks": {"Stop": [{"hooks": [{"type": "command", '
                           '"command": "x"}], "hooks": []}]}}',
}


@pytest.mark.parametrize("where", sorted(DOUBLED))
def test_install_refuses_a_key_it_edits_under_written_twice(where: str,
                                                             data_dir: Path) -> None:
    path = put("claude-code", DOUBLED[where])
    code, stderr = hooks_cli("install", "claude-code")
    assert code == 9 and f"has `{where}` twice" in stderr and "internal error" not in stderr
    assert path.read_text() == DOUBLED[where]


def test_a_key_written_twice_elsewhere_is_no_concern_of_installs(data_dir: Path) -> None:
    text = ('{"model": "a", "model": "b", "hooks": {"PreToolUse": [], "PreToolUse": []}}')
    path = put("claude-code", text)
    assert hooks_cli("install", "claude-code")[0] == 0
    assert hooks_cli("uninstall", "claude-code")[0] == 0
    assert path.read_text() == text


def test_uninstall_refuses_clearly_once_hooks_is_written_twice(data_dir: Path) -> None:
    """The key doubled after the install: uninstall refuses with exit 9 (not an internal
    error to report), and succeeds once the two are merged."""
    path = put("claude-code", '{"model": "opus"}')
    core.install("claude-code")
    installed = path.read_text()
    doubled = ('{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]},'
               + installed.removeprefix("{"))
    path.write_text(doubled)
    code, stderr = hooks_cli("uninstall", "claude-code")
    assert code == 9 and "has `hooks` twice" in stderr and "internal error" not in stderr
    assert path.read_text() == doubled
    path.write_text(installed)
    assert hooks_cli("uninstall", "claude-code")[0] == 0
    assert path.read_text() == '{"model": "opus"}'
