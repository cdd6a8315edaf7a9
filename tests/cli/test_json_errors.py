"""With `--json`, every command's failure is the `error` document and its exit code.

Run against a broken config file, which every command meets first: each
command given `--json` must print exactly one JSON document on stdout —
the `error` document with the config error's code, or (for the commands
that are meant to work on a broken config) their own report.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from dsh_mnemo.cli import app
from dsh_mnemo.errors import ExitCode

runner = CliRunner()

BROKEN = {
    # Not YAML at all: only doctor (which reports it) and `config path` work.
    "not-yaml": ("prefetch:\n  top_k: [this is not a number\n",
                 {("doctor",), ("config", "path")}),
    # A bad value: `config set` and `unset` of that key are how it is repaired.
    "bad-value": ("prefetch:\n  top_k: many\n",
                  {("doctor",), ("config", "path"), ("config", "set"), ("config", "unset")}),
}

ARGS = {
    ("adopt",): ["dsh_v2_workspace_" + "0" * 64],
    ("remember",): ["a fact"],
    ("recall",): ["a fact"],
    ("forget",): ["some-id"],
    ("config", "get"): ["prefetch.top_k"],
    ("config", "set"): ["prefetch.top_k", "3"],
    ("config", "unset"): ["prefetch.top_k"],
    ("hooks", "install"): ["--harness", "claude-code"],
    ("hooks", "uninstall"): ["--harness", "claude-code"],
    ("hooks", "status"): ["--harness", "claude-code"],
    ("mcp", "install"): ["--client", "claude-code"],
    ("mcp", "uninstall"): ["--client", "claude-code"],
    ("mcp", "status"): ["--client", "claude-code"],
    ("hooks", "test"): ["--harness", "claude-code"],
    ("standing", "remove"): ["some-id"],
    ("candidates", "accept"): ["c0000"],
    ("candidates", "reject"): ["c0000"],
    ("migrate", "run"): ["--yes"],
    ("migrate", "revert"): ["--yes"],
}


def json_commands() -> list[tuple[str, ...]]:
    """Every command of the app that takes --json, found from the app itself."""
    root = typer.main.get_command(app)
    found: list[tuple[str, ...]] = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        if hasattr(command, "commands"):  # a group (Typer's vendored Click)
            for name, child in command.commands.items():
                walk(child, (*path, name))
        elif any("--json" in p.opts for p in command.params):
            found.append(path)

    walk(root, ())
    return sorted(found)


COMMANDS = json_commands()


def test_the_commands_are_found() -> None:
    assert {("recall",), ("status",), ("migrate", "plan"), ("config", "show")} <= set(COMMANDS)


@pytest.mark.parametrize("broken", sorted(BROKEN))
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_broken_config_is_a_json_error(command: tuple[str, ...], broken: str,
                                         isolated_env: Path) -> None:
    text, tolerant = BROKEN[broken]
    config = Path(os.environ["MNEMO_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text, encoding="utf-8")
    result = runner.invoke(app, [*command, *ARGS.get(command, []), "--json"])
    document = json.loads(result.stdout)  # exactly one document, nothing else on stdout
    assert isinstance(document, dict) and document["schema_version"] == 1
    if command in tolerant:
        assert document["kind"] != "error", result.stdout
        return
    assert document["kind"] == "error", result.stdout
    assert document["exit_code"] == result.exit_code == ExitCode.CONFIG
    assert str(config) in document["error"]


# A bad command line, whichever check finds it (Click's for a choice or a range,
# the command's for an empty text, options that exclude each other, an id too
# short to be a prefix): exit 2, `mnemo: <what>` and a hint, no traceback; with
# --json, the `error` document.  None of these reach a row: "not found" is 5.
BAD_COMMAND_LINES = [
    ("remember", "x y z", "--scope", "team"),
    ("remember", "x y z", "--importance", "2"),
    ("remember", "x y z", "--importance", "nan"),  # passes every range check
    ("recall", "x", "--top-k", "0"),
    ("remember", "x y z", "--no-such-option"),
    ("no-such-command",),
    ("hooks", "install", "--harness", "bogus"),
    ("hooks", "install", "--harness", "gemini", "--trust"),
    ("hooks", "status", "--harness", "bogus"),
    ("hooks", "test", "--harness", "bogus"),
    ("mcp", "install", "--client", "bogus"),
    ("mcp", "uninstall", "--client", "bogus"),
    ("candidates", "accept", "c0000", "--scope", "bogus"),
    ("remember", "--standing", "--scope", "session", "Always answer in English"),
    ("remember", ""),
    ("remember", "   "),
    ("recall", " "),
    ("forget", "abc"),
    ("forget", " "),
    ("standing", "remove", "abc"),
    ("candidates", "reject", "c00"),
    ("adopt", "not-a-namespace"),
    ("rebind",),
    ("migrate", "plan", "--legacy-dsh", "--default-to-global"),
    ("migrate", "plan", "--default-to-global", "--to", "."),
    ("migrate", "--legacy-dsh", "run"),
    ("import", "--from", "."),
    ("import", "codex", "qwen", "--from", "."),
    ("import", "chatgpt", "--into", "global"),
    ("import", "codex", "--into", "global"),
    ("import", "codex", "chatgpt"),
    ("serve", "--foreground", "--stop"),
    # An empty path (an unset variable) is not the current directory.
    ("--data-dir", "", "status"),
    ("bind", ""),
    ("status", ""),
    ("doctor", ""),
    ("adopt", "dsh_v2_workspace_" + "0" * 64, ""),
    ("rebind", "", "--from", "id:nope"),
    ("migrate", "plan", "--to", ""),
    ("hooks", "install", "--harness", "generic", "--project", ""),
    ("import", "codex", "--from", ""),
    # Bytes that are not UTF-8 (lone surrogates once decoded) are no id.
    ("forget", "\udcff" * 4),
    ("standing", "remove", "\udcff" * 4),
    ("candidates", "reject", "\udcff" * 4),
    ("status", "--session", "\udcff"),
    ("migrate", "plan", "--session", "\udcff"),
]


@pytest.fixture
def bound(make_repo, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = make_repo("app")
    monkeypatch.chdir(repo)
    assert runner.invoke(app, ["bind"]).exit_code == 0
    return repo


@pytest.mark.parametrize("argv", BAD_COMMAND_LINES, ids=" ".join)
def test_a_bad_command_line_exits_2_with_a_message_and_a_hint(argv: tuple[str, ...],
                                                              bound: Path) -> None:
    result = runner.invoke(app, list(argv))
    assert result.exit_code == ExitCode.USAGE, result.output
    assert result.stdout == ""
    message, hint = result.stderr.rstrip("\n").split("\n")  # one line each, no box
    assert message.startswith("mnemo: ") and hint.startswith("  ") and hint.strip()
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)

    as_json = runner.invoke(app, [*argv, "--json"])
    document = json.loads(as_json.stdout)  # exactly one document
    assert document["kind"] == "error" and document["schema_version"] == 1
    assert document["exit_code"] == as_json.exit_code == ExitCode.USAGE
    assert f"mnemo: {document['error']}" == message and document["hint"] == hint.strip()


@pytest.mark.parametrize("argv", [["candidates"], ["candidates", "list"],
                                  ["candidates", "reject", "c0000"],
                                  ["candidates", "accept", "c0000", "--scope", "global"]],
                         ids=" ".join)
def test_candidates_in_an_unbound_directory_say_they_are_per_workspace(
        argv: list[str], tmp_path: Path) -> None:
    # They said "nothing was written … or use --scope global", an option
    # `list` and `reject` lack, and that does not reach a workspace's candidates.
    result = runner.invoke(app, argv)
    assert result.exit_code == ExitCode.UNBOUND, result.output
    assert "candidates are kept per workspace" in result.stderr
    assert "--scope" not in result.stderr and "nothing was written" not in result.stderr


def test_bind_of_an_empty_path_binds_nothing(make_repo, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo("app")
    monkeypatch.chdir(repo)
    result = runner.invoke(app, ["bind", ""])
    assert result.exit_code == ExitCode.USAGE
    assert "the path is empty" in result.stderr
    assert not (repo / ".mnemosyne-id").exists()


def test_an_id_or_session_that_is_not_utf8_is_a_usage_error_not_a_traceback(
        bound: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # With a row to compare it with, the id reached SQLite: UnicodeEncodeError.
    assert runner.invoke(app, ["remember", "We deploy with make release"]).exit_code == 0
    for argv in (["forget", "\udcff" * 4], ["forget", "\udcff" * 16]):
        result = runner.invoke(app, argv)
        assert result.exit_code == ExitCode.USAGE, result.output
        assert "not UTF-8" in result.stderr and isinstance(result.exception, SystemExit)
    for key, value in (("recall_mode", "session"), ("auto_write_scope", "session")):
        assert runner.invoke(app, ["config", "set", key, value]).exit_code == 0
    result = runner.invoke(app, ["remember", "--session", "\udcff\udcff", "--scope", "session",
                                 "text", "--json"])
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "'--session'" in json.loads(result.stdout)["error"]
    monkeypatch.setenv("MNEMO_SESSION_ID", "\udcff")
    for argv in (["remember", "--scope", "session", "text"], ["recall", "text"]):
        result = runner.invoke(app, argv)
        assert result.exit_code == ExitCode.USAGE, result.output
        assert "MNEMO_SESSION_ID" in result.stderr and "not UTF-8" in result.stderr


def test_an_id_too_short_for_a_prefix_says_how_long_one_must_be(bound: Path) -> None:
    remembered = json.loads(runner.invoke(app, ["remember", "We deploy with make release",
                                                "--json"]).stdout)["id"]
    result = runner.invoke(app, ["forget", remembered[:3]])
    assert result.exit_code == ExitCode.USAGE
    assert f"{remembered[:3]} is too short for an id prefix" in result.stderr
    assert "4 or more characters" in result.stderr and "no memory" not in result.stderr
    # A well-formed id (or prefix) that names nothing here is no usage error: 5.
    for argv in (["forget", "ffffffffffffffff"], ["forget", "ffff"],
                 ["standing", "remove", "ffff"], ["candidates", "reject", "c0000"],
                 ["rebind", "--from", "id:nope"]):
        refused = runner.invoke(app, argv)
        assert refused.exit_code == ExitCode.REFUSED, (argv, refused.output)
    assert runner.invoke(app, ["forget", remembered[:4]]).exit_code == 0  # 4 are enough


def test_forget_and_sleep_on_a_damaged_bank_say_so_without_a_traceback(
        bound: Path, data_dir: Path) -> None:
    # forget's ownership lookup and sleep's count of due rows read the bank
    # outside the translation of SQLite's errors: DatabaseError was a traceback.
    from dsh_mnemo.memory import banks, driver
    from tests.mcp.test_mcp_hostile import damage

    assert runner.invoke(app, ["remember", "We deploy with make release"]).exit_code == 0
    banks.close_readers()  # as a new process would, nothing holds the bank open
    driver.reset_cache()
    (db,) = (data_dir / "banks").glob("ws-*/mnemosyne.db")
    damaged = damage(db)
    for argv in (["forget", "abcd1234"], ["forget", "abcd"], ["sleep", "--force"]):
        result = runner.invoke(app, argv)
        assert result.exit_code == ExitCode.DATA, (argv, result.output)
        assert isinstance(result.exception, SystemExit), argv
        assert f"the database {db} is damaged" in result.stderr
        assert "mnemo doctor" in result.stderr
    assert db.read_bytes() == damaged
