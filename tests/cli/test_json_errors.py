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
