"""A data directory whose path has `#`, `?` and spaces works like any other.

Every read-only SQLite opener builds a `file:` URI; an unquoted `#` or `?`
there cuts the path short and the reader silently sees no database.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_mnemo.cli import app
from dsh_mnemo.hook.entry import run_hook
from tests.conftest import bind_repo, configure


@pytest.fixture
def odd_data_dir(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = isolated_env / "odd #1 dir?x=y" / "data #2"
    monkeypatch.setenv("MNEMO_DATA_DIR", str(path))
    monkeypatch.setenv("MNEMOSYNE_DATA_DIR", str(path))
    return path


def cli(cwd: Path, *args: str) -> dict:
    import os

    old = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, [*args, "--json"])
    finally:
        os.chdir(old)
    assert result.exit_code in (0, 8), result.output
    return json.loads(result.stdout)


def test_every_reader_sees_the_memories(odd_data_dir: Path, make_repo) -> None:
    configure()
    repo = bind_repo(make_repo("app"))
    stored = cli(repo.path, "remember", "We deploy with make release from the main branch.")
    assert repo.db(odd_data_dir).is_file()

    recalled = cli(repo.path, "recall", "make release")
    assert [m["id"] for m in recalled["results"]] == [stored["id"]]

    stats = cli(repo.path, "stats")
    assert stats["totals"]["working"] == 1
    everything = cli(repo.path, "stats", "--all")
    assert sum(n["working"] for n in everything["namespaces"]) == 1

    listing = cli(repo.path, "workspaces")
    assert [w["db_exists"] for w in listing["workspaces"]] == [True]

    doctor = cli(repo.path, "doctor")
    bank_checks = [c for c in doctor["checks"] if c["name"].startswith("bank:")]
    assert bank_checks and all(c["status"] == "ok" for c in bank_checks), bank_checks

    plan = cli(repo.path, "migrate", "plan")
    assert plan["pending"] == 0

    out = io.StringIO()
    event = {"session_id": "s1", "cwd": str(repo.path), "hook_event_name": "UserPromptSubmit",
             "prompt": "how does make release deploy from main?"}
    run_hook(["prompt", "--harness", "claude-code"],
             stdin=io.BytesIO(json.dumps(event).encode()), stdout=out)
    context = json.loads(out.getvalue())["hookSpecificOutput"]["additionalContext"]
    assert "make release" in context
