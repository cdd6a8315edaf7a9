"""`mnemo hooks install|uninstall|status`: merging into real-looking harness configs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_mnemo.cli import app
from dsh_mnemo.harnesses import install as core
from tests.hook.conftest import HARNESSES
from tests.hook.conftest import WRAPPER as WRAPPER_FILE

runner = CliRunner()

# Config files as users really have them: other keys, other hooks on our events.
EXISTING = {
    "claude-code": {
        "model": "opus", "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "~/bin/lint.sh",
                                             "timeout": 5}]}],
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                                                          "command": "guard.sh"}]}],
        }},
    "codex": {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done",
                                             "timeout": 3}]}]}},
    "gemini": {"general": {"vimMode": True}, "hooks": {"BeforeTool": [
        {"matcher": "run_shell_command", "hooks": [{"type": "command", "name": "audit",
                                                    "command": "audit.sh", "timeout": 2000}]}]}},
    "cursor": {"version": 1, "hooks": {"afterFileEdit": [{"command": "./format.sh"}],
                                       "stop": [{"command": "./summary.sh"}]}},
    "qwen": {"ui": {"theme": "dark"}, "hooks": {"SessionEnd": [
        {"hooks": [{"type": "command", "command": "cleanup.sh", "timeout": 1000}]}]}},
}
CONFIGS = {"claude-code": ".claude/settings.json", "codex": ".codex/hooks.json",
           "gemini": ".gemini/settings.json", "cursor": ".cursor/hooks.json",
           "qwen": ".qwen/settings.json"}


def home() -> Path:
    return Path(os.environ["HOME"])


def write(path: Path, document: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=4))


def our_entries(document: dict) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for name, groups in document.get("hooks", {}).items():
        for group in groups:
            for entry in group.get("hooks", [group]):
                if core.is_ours(entry):
                    found.setdefault(name, []).append(entry)
    return found


@pytest.mark.parametrize("harness", sorted(CONFIGS))
def test_install_keeps_everything_else_and_is_idempotent(harness: str, data_dir: Path) -> None:
    path = home() / CONFIGS[harness]
    write(path, EXISTING[harness])
    result = core.install(harness)
    assert result.action == "installed" and result.config_path == str(path)
    assert result.backup_path and json.loads(Path(result.backup_path).read_text()) \
        == EXISTING[harness]
    after = json.loads(path.read_text())
    # every foreign key and hook survives untouched
    spec = core.spec_for(harness)
    assert _without_ours(after, spec) == EXISTING[harness]
    ours = our_entries(after)
    names = spec.event_names
    assert set(ours) == {names[k] for k in spec.installed_events}
    for kind in spec.installed_events:
        (entry,) = ours[names[kind]]
        assert entry["command"].endswith(f" {kind} {harness}")
        wrapper = Path(entry["command"].split(" ")[0])
        assert wrapper.exists() and os.access(wrapper, os.X_OK)
    # a second install changes nothing and takes no backup
    again = core.install(harness)
    assert again.action == "unchanged" and again.backup_path is None
    assert json.loads(path.read_text()) == after


def _without_ours(document: dict, spec: core.Harness) -> dict:
    """The document with mnemo's entries, and what only they filled, taken out."""
    clone = json.loads(json.dumps(document))
    hooks = clone.get("hooks", {})
    for name in list(hooks):
        kept = []
        for group in hooks[name]:
            if "hooks" in group:
                inner = [h for h in group["hooks"] if not core.is_ours(h)]
                if inner:
                    kept.append({**group, "hooks": inner})
            elif not core.is_ours(group):
                kept.append(group)
        if kept:
            hooks[name] = kept
        else:
            del hooks[name]
    if "hooks" in clone and not hooks:
        del clone["hooks"]
    return clone


@pytest.mark.parametrize("harness, unit", [("claude-code", 10), ("codex", 10),
                                           ("gemini", 10_000), ("qwen", 10)])
def test_timeouts_in_each_harness_unit(harness: str, unit: int, data_dir: Path) -> None:
    """Qwen Code 0.24 reads seconds (1000 or more keeps the old millisecond meaning,
    with a warning); Codex clamps SessionEnd to 3 s and warns at every start."""
    core.install(harness)
    document = json.loads((home() / CONFIGS[harness]).read_text())
    for event, entries in our_entries(document).items():
        expected = 3 if (harness, event) == ("codex", "SessionEnd") else unit
        assert [e["timeout"] for e in entries] == [expected], event


def test_codex_gets_session_end_within_its_clamp(data_dir: Path) -> None:
    from dsh_mnemo.harnesses.codex import SESSION_END_MAX_TIMEOUT

    result = core.install("codex")
    assert set(result.commands) == {"session-start", "prompt", "turn-end", "session-end"}
    document = json.loads((home() / CONFIGS["codex"]).read_text())
    (entry,) = our_entries(document)["SessionEnd"]
    assert entry["command"].endswith(" session-end codex")
    assert entry["timeout"] <= SESSION_END_MAX_TIMEOUT


def test_cursor_format_has_version_and_flat_entries(data_dir: Path) -> None:
    core.install("cursor")
    document = json.loads((home() / ".cursor/hooks.json").read_text())
    assert document["version"] == 1
    assert set(document["hooks"]) == {"beforeSubmitPrompt", "stop", "sessionEnd"}
    for entries in document["hooks"].values():
        assert all(set(e) == {"command"} for e in entries)


@pytest.mark.parametrize("harness", sorted(CONFIGS))
def test_uninstall_removes_only_ours(harness: str, data_dir: Path) -> None:
    path = home() / CONFIGS[harness]
    write(path, EXISTING[harness])
    core.install(harness)
    result = core.uninstall(harness)
    assert result.action == "removed" and result.backup_path
    assert json.loads(path.read_text()) == EXISTING[harness]
    assert core.uninstall(harness).action == "absent"


def test_uninstall_of_a_fresh_install_removes_the_file_mnemo_created(data_dir: Path) -> None:
    core.install("claude-code")
    result = core.uninstall("claude-code")
    assert result.removed_file and not (home() / ".claude").exists()


def test_uninstall_project_leaves_nothing_mnemo_created(make_repo, data_dir: Path) -> None:
    """Point 11: no empty `{}` (nor `.gemini/`) left behind in the project."""
    repo = make_repo("proj")
    for harness in ("gemini", "claude-code", "qwen", "codex", "cursor"):
        core.install(harness, repo)
        result = core.uninstall(harness, repo)
        assert result.action == "removed" and result.removed_file, harness
    assert sorted(p.name for p in repo.iterdir()) == [".git"]
    result = runner.invoke(app, ["hooks", "install", "--harness", "gemini", "--project",
                                 str(repo)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["hooks", "uninstall", "--harness", "gemini", "--project",
                                 str(repo)])
    assert result.exit_code == 0 and "removed it" in result.output
    assert not (repo / ".gemini").exists()


def test_uninstall_keeps_a_file_mnemo_did_not_create(make_repo, data_dir: Path) -> None:
    repo = make_repo("proj")
    settings = repo / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{}\n")
    core.install("gemini", repo)
    assert not core.uninstall("gemini", repo).removed_file
    assert settings.read_text() == "{}\n"


def test_uninstall_keeps_a_created_file_the_harness_added_to(make_repo, data_dir: Path) -> None:
    repo = make_repo("proj")
    core.install("gemini", repo)
    settings = repo / ".gemini" / "settings.json"
    document = json.loads(settings.read_text())
    document["general"] = {"vimMode": True}
    settings.write_text(json.dumps(document, indent=2))
    assert not core.uninstall("gemini", repo).removed_file
    assert json.loads(settings.read_text()) == {"general": {"vimMode": True}}


def test_project_level_install(make_repo, data_dir: Path) -> None:
    repo = make_repo("proj")
    result = core.install("gemini", repo)
    assert result.config_path == str(repo.resolve() / ".gemini/settings.json")
    assert not (home() / ".gemini/settings.json").exists()
    status = core.harness_status("gemini", repo)
    assert status.installed and status.ok
    assert not core.harness_status("gemini").installed


def test_invalid_config_is_refused_untouched(data_dir: Path) -> None:
    path = home() / ".claude/settings.json"
    path.parent.mkdir(parents=True)
    path.write_text("{ this is not json")
    from dsh_mnemo.errors import DataError

    with pytest.raises(DataError, match="line 1, column 3"):
        core.install("claude-code")
    assert path.read_text() == "{ this is not json"
    write(path, {"hooks": ["not", "an", "object"]})
    with pytest.raises(DataError):
        core.install("claude-code")
    # Claude Code and Codex read strict JSON: a comment there is refused, untouched.
    path.write_text('{\n  // mine\n  "model": "opus"\n}\n')
    with pytest.raises(DataError, match="comments are not allowed"):
        core.install("claude-code")
    assert path.read_text() == '{\n  // mine\n  "model": "opus"\n}\n'


def test_status_reports_a_missing_mnemo(data_dir: Path) -> None:
    core.install("claude-code")
    status = core.harness_status("claude-code")
    assert status.installed and status.ok and status.mnemo_exists
    assert status.events == {"session-start": True, "prompt": True, "turn-end": True,
                             "session-end": True}
    wrapper = Path(status.wrapper_path or "")
    wrapper.write_text(wrapper.read_text().replace(
        f"installed_bin='{status.mnemo_path}'", "installed_bin='/nonexistent/mnemo'"))
    broken = core.harness_status("claude-code")
    assert broken.installed and not broken.ok and not broken.mnemo_exists
    assert any("mnemo" in p for p in broken.problems)
    wrapper.unlink()
    assert not core.harness_status("claude-code").wrapper_exists


def test_status_when_not_installed(data_dir: Path) -> None:
    status = core.harness_status("qwen")
    assert not status.installed and not status.ok and status.problems


def test_generic_writes_only_the_wrapper(data_dir: Path) -> None:
    result = core.install("generic")
    assert result.config_path is None and Path(result.wrapper_path or "").exists()
    assert set(result.commands) == {"session-start", "prompt", "turn-end", "session-end"}
    assert core.harness_status("generic").ok


def test_installed_wrapper_is_the_shipped_one_filled_in(data_dir: Path) -> None:
    # hooks/mnemo-hook.sh is the packaged wrapper itself (a link to the package data)
    assert WRAPPER_FILE.read_text() == core.wrapper_source()
    assert WRAPPER_FILE.resolve() == (Path(core.__file__).parent / core.WRAPPER_NAME)
    core.install("claude-code")
    text = core.wrapper_path().read_text()
    for placeholder in core.WRAPPER_PLACEHOLDERS:
        assert placeholder not in text
    assert f"installed_data_dir='{os.environ['MNEMO_DATA_DIR']}'" in text


def test_cli_install_status_uninstall(data_dir: Path) -> None:
    path = home() / ".gemini/settings.json"
    write(path, EXISTING["gemini"])
    result = runner.invoke(app, ["hooks", "install", "--harness", "gemini"])
    assert result.exit_code == 0, result.output
    assert "trust" in result.output and str(path) in result.output
    assert "exit 55" in result.output and "fingerprint" not in result.output
    assert "backup" in result.output
    result = runner.invoke(app, ["hooks", "install", "--harness", "gemini"])
    assert "already installed" in result.output
    result = runner.invoke(app, ["hooks", "status", "--harness", "gemini", "--json"])
    document = json.loads(result.stdout)
    assert document["kind"] == "hooks-status" and document["installed"] and document["ok"]
    result = runner.invoke(app, ["hooks", "uninstall", "--harness", "gemini", "--json"])
    assert json.loads(result.stdout)["action"] == "removed"
    assert json.loads(path.read_text()) == EXISTING["gemini"]


def test_cli_codex_prints_the_trust_step(data_dir: Path) -> None:
    result = runner.invoke(app, ["hooks", "install", "--harness", "codex"])
    assert result.exit_code == 0 and "/hooks" in result.output
    assert "--trust" in result.output and "feature flag" not in result.output


def test_cli_unknown_harness_is_a_clear_error(data_dir: Path) -> None:
    result = runner.invoke(app, ["hooks", "install", "--harness", "vim"])
    assert result.exit_code == 2
    assert "'vim' is not one of 'claude-code'" in result.stderr


def test_cli_hook_command_is_listed_and_forwards(data_dir: Path) -> None:
    help_text = runner.invoke(app, ["--help"]).output
    assert " hook " in help_text and " hooks " in help_text
    result = runner.invoke(app, ["hook", "prompt", "--harness", "claude-code"], input="garbage")
    assert result.exit_code == 0


@pytest.mark.parametrize("harness", HARNESSES)
def test_every_harness_has_a_spec(harness: str) -> None:
    assert core.spec_for(harness).name == harness


@pytest.mark.parametrize("harness", sorted(CONFIGS))
def test_config_snippets_in_hooks_dir_match_what_install_writes(harness: str) -> None:
    from tests.conftest import REPO_ROOT as REPO

    document = core.fresh_document(harness, Path("/path/to/mnemo-hook.sh"))
    snippet = json.loads((REPO / "hooks" / f"{harness}.json").read_text())
    assert snippet == document


def test_uninstall_gives_a_blank_settings_file_back_blank(make_repo, data_dir: Path) -> None:
    """A blank file is no document to edit in place: install writes a new one, and
    uninstall, finding nothing else in it, puts the blank text back."""
    repo = make_repo("proj")
    settings = repo / ".qwen" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("\n\n")
    core.install("qwen", repo)
    assert our_entries(json.loads(settings.read_text()))
    result = core.uninstall("qwen", repo)
    assert result.action == "removed" and not result.removed_file
    assert settings.read_text() == "\n\n"


# ─── A second install: nothing to reload ───────────────────────────────────

@pytest.mark.parametrize("harness", ["claude-code", "cursor", "qwen", "gemini", "codex"])
def test_a_second_install_tells_no_one_to_reload(harness: str, data_dir: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_CLI_TRUST_WORKSPACE", "true")  # nothing left to trust
    trust = ["--trust"] if harness == "codex" else []
    first = runner.invoke(app, ["hooks", "install", "--harness", harness, *trust])
    assert first.exit_code == 0, first.output
    assert ("Still to do" in first.output) == (harness != "codex")  # codex: trusted now
    again = runner.invoke(app, ["hooks", "install", "--harness", harness, *trust])
    assert "already installed" in again.output, again.output
    assert "Still to do" not in again.output
    assert core.install(harness).next_steps == []


def test_a_second_install_still_names_what_the_harness_needs_to_run_them(
        data_dir: Path) -> None:
    """Nothing to reload, but Codex still skips untrusted hooks and Gemini CLI still
    runs none in an untrusted folder: those steps stay."""
    core.install("codex")
    (step,) = core.install("codex").next_steps
    assert "--trust" in step and "/hooks" in step
    core.install("gemini")
    (step,) = core.install("gemini").next_steps
    assert "does not trust" in step and "Start" not in step


# ─── Docs and usage name every event install writes ────────────────────────

HEADINGS = {"claude-code": "### Claude Code", "codex": "### Codex CLI",
            "gemini": "### Gemini CLI", "cursor": "### Cursor", "qwen": "### Qwen Code"}


@pytest.mark.parametrize("harness", sorted(HEADINGS))
def test_docs_list_every_event_install_writes(harness: str) -> None:
    import re

    from tests.conftest import REPO_ROOT

    text = (REPO_ROOT / "docs" / "hooks.md").read_text()
    section = text.split(HEADINGS[harness] + "\n", 1)[1].split("\n### ", 1)[0]
    install_bullet = section.split("- **Install:**", 1)[1].split("\n- **", 1)[0]
    listed = set(re.findall(r"`([A-Za-z]+)`", install_bullet.split("Events:", 1)[1]))
    spec = core.spec_for(harness)
    written = set(our_entries(core.fresh_document(harness, Path("/w/mnemo-hook.sh"))))
    assert written == {spec.event_names[k] for k in spec.installed_events}
    assert written <= listed, f"docs/hooks.md omits {sorted(written - listed)} for {harness}"


def test_the_wrapper_usage_and_generic_docs_name_every_event() -> None:
    from dsh_mnemo.harnesses.registry import EVENTS
    from dsh_mnemo.hook.entry import USAGE
    from tests.conftest import REPO_ROOT

    (events_line,) = [line for line in core.wrapper_source().splitlines()
                      if line.startswith("#") and "EVENT:" in line]
    wrapper_events = events_line.split("EVENT:", 1)[1].strip(" )").split(" | ")
    usage_events = USAGE.removeprefix("usage: mnemo hook ").split(" ", 1)[0].split("|")
    generic = (REPO_ROOT / "hooks" / "generic.md").read_text()
    hooks_md = (REPO_ROOT / "docs" / "hooks.md").read_text()
    assert wrapper_events == usage_events == list(EVENTS)
    for event in EVENTS:
        assert f"| `{event}` |" in generic and f"| `{event}` |" in hooks_md, event
    assert "four commands" in hooks_md
    result = runner.invoke(app, ["hooks", "install", "--harness", "generic"])
    assert set(EVENTS) <= {line.split()[0] for line in result.output.splitlines()
                           if line.startswith("  ")}


@pytest.mark.parametrize("harness", ["claude-code", "qwen"])
def test_cli_status_exits_8_when_the_harness_cannot_read_its_config(
        harness: str, data_dir: Path) -> None:
    path = home() / f".{harness.split('-')[0]}/settings.json"
    result = runner.invoke(app, ["hooks", "status", "--harness", harness, "--json"])
    assert result.exit_code == 0  # no file: not installed, nothing to fix
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"hooks": {', encoding="utf-8")
    result = runner.invoke(app, ["hooks", "status", "--harness", harness, "--json"])
    document = json.loads(result.stdout)
    assert result.exit_code == 8 and document["config_exists"] is False
    assert any(str(path) in problem for problem in document["problems"])
    assert path.read_text(encoding="utf-8") == '{"hooks": {'  # left as it was


def test_a_config_that_is_a_symlink_loop_is_not_called_missing(data_dir: Path) -> None:
    # `Path.exists()` is false for a loop: status said "does not exist" (exit 8
    # all the same), and doctor said nothing about the harness at all.
    path = home() / ".claude/settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(path)
    result = runner.invoke(app, ["hooks", "status", "--harness", "claude-code", "--json"])
    document = json.loads(result.stdout)
    assert result.exit_code == 8 and document["config_exists"] is False
    assert document["problems"] == [
        f"cannot read {path}: Too many levels of symbolic links"]
    doctor = json.loads(runner.invoke(app, ["doctor", "--json"]).stdout)
    check = {c["name"]: c for c in doctor["checks"]}["hooks:claude-code"]
    assert check["status"] == "warn" and "symbolic links" in check["summary"]
    assert path.is_symlink()  # left as it was
    path.unlink()  # a symbolic link to nothing yet is a file not there yet
    path.symlink_to(path.with_name("elsewhere.json"))
    document = json.loads(runner.invoke(app, ["hooks", "status", "--harness", "claude-code",
                                              "--json"]).stdout)
    assert document["problems"] == [f"{path} does not exist"]
