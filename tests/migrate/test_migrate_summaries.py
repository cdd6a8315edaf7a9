"""Legacy sleep summaries that outlived their memories arrive as ordinary memories.

mnemo's sleep keeps the rows it summarises, so mnemo treats a summary
(`banks.SUMMARY_SOURCE`) as a copy: the prompt hook never injects one.  An old
store's upstream could delete a summary's rows afterwards (its older sleep
did), leaving the summary as their only copy; a migration finds such a
summary and copies it as a memory (`engine.SOLE_COPY_SOURCE`), so prompts
recall it, while a summary whose rows all arrive with it stays a summary.
Forgetting a sibling that is still there refuses rather than take the only
copy of the others along (`memory.driver.delete`).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from dsh_mnemo import paths
from dsh_mnemo.errors import ExitCode
from dsh_mnemo.memory.banks import SUMMARY_SOURCE
from dsh_mnemo.migrate.engine import SOLE_COPY_SOURCE
from tests.conftest import bind_repo, configure
from tests.hook.conftest import injected_text, payload, run_inprocess
from tests.migrate.test_migrate_secrets import mnemo

pytestmark = pytest.mark.e2e

FIRST = ("The falcon uploader writes its archives to the Vexmoor bucket nightly.",
         "The falcon staging database listens on port 6543 behind pgbouncer.",
         "Falcon release notes are written by Priya in the CHANGES file.")
SECOND = ("We deploy the falcon service with make release from main.",
          "The falcon CI runs on GitHub Actions with a nightly schedule.")


def summaries(db: Path) -> dict[str, tuple[str, frozenset[str]]]:
    """summary id -> (source, the ids it lists)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {i: (source, frozenset(ids.split(","))) for i, source, ids in conn.execute(
            "SELECT id, source, summary_of FROM episodic_memory WHERE summary_of <> ''")}
    finally:
        conn.close()


@pytest.fixture
def legacy(data_dir: Path, projects: Path) -> tuple[Path, list[str], list[str]]:
    """An old store whose first summary is the only copy of two of its three memories
    (upstream deleted them after its sleep), and whose second summary's are all there."""
    from mnemosyne.core.memory import Mnemosyne

    source = paths.default_db_path(data_dir)
    source.parent.mkdir(parents=True, exist_ok=True)
    mem = Mnemosyne(session_id="dsh_s1", db_path=source)
    first = [mem.remember(t, source="conversation", importance=0.5) for t in FIRST]
    assert mem.sleep(force=True).get("status") == "consolidated"
    second = [mem.remember(t, source="conversation", importance=0.5) for t in SECOND]
    assert mem.sleep(force=True).get("status") == "consolidated"
    for memory_id in first[1:]:
        assert mem.forget(memory_id)
    mem.conn.close()
    return bind_repo(projects / "app").path, first, second


def ask(repo: Path, prompt: str) -> str:
    out = run_inprocess("prompt", "claude-code", payload("claude-code", "prompt", cwd=repo,
                                                         session="ask", prompt=prompt))
    return injected_text("claude-code", out)


def test_a_summary_that_is_the_only_copy_arrives_as_a_memory(
        legacy: tuple[Path, list[str], list[str]], data_dir: Path) -> None:
    repo, first, second = legacy
    configure()
    plan = json.loads(mnemo("migrate", "plan", "--legacy-dsh", "--json", cwd=repo).stdout)
    note = ("1 sleep summary is the only remaining copy of memories the old store deleted: "
            f"they will be copied as ordinary memories (source {SOLE_COPY_SOURCE}), which "
            "prompts recall.")
    assert note in plan["notes"], plan["notes"]
    run = mnemo("migrate", "run", "--legacy-dsh", "--yes", "--json", cwd=repo)
    ran = json.loads(run.stdout)
    assert ran["status"] == "moved"
    assert note.replace("they will be", "they were") in ran["plan"]["notes"]
    # and the user reading the run, not its JSON, is told too
    assert note.replace("they will be", "they were") in " ".join(run.stderr.split())
    bank = sorted((data_dir / "banks").glob("ws-*/mnemosyne.db"))[0]
    by_rows = {ids: source for source, ids in summaries(bank).values()}
    # still listing its memories, for forget; a summary whose memories came along stays one
    assert by_rows == {frozenset(first): SOLE_COPY_SOURCE, frozenset(second): SUMMARY_SOURCE}

    # the prompt hook recalls what only the summary still holds
    context = ask(repo, "which port does the falcon staging database behind pgbouncer use?")
    assert "6543" in context, context

    # forgetting the sibling that is still there would take the others along: refused
    refused = mnemo("forget", first[0], cwd=repo, code=ExitCode.REFUSED)
    said = " ".join(refused.stderr.split())
    assert "the only recallable copy of 2 other memories" in said, said
    assert frozenset(first) in {ids for _, ids in summaries(bank).values()}
    conn = sqlite3.connect(f"file:{bank}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT 1 FROM working_memory WHERE id = ?", (first[0],)).fetchone()
    finally:
        conn.close()
