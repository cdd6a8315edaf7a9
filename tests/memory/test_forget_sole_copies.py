"""Forget never silently destroys the only copy of other memories.

Forgetting a memory deletes the sleep summaries that fold it in (a summary
repeats its text).  mnemo's sleep keeps the rows it summarises, so usually
nothing else goes; but upstream's own tools can delete those rows later (its
older sleep did), leaving a summary as the only copy of them.  Forgetting a
sibling that is still there then refuses, says how many memories would be
lost and how to go ahead: forget the summary itself first.
"""

from __future__ import annotations

from pathlib import Path

from dsh_mnemo.errors import ExitCode
from dsh_mnemo.memory import driver
from dsh_mnemo.memory import store as storage
from dsh_mnemo.memory.consolidate import sleep_context
from dsh_mnemo.workspace.context import resolve_memory_context
from tests.conftest import bind_repo, configure
from tests.memory.conftest import db_digest, mnemo, query
from tests.memory.test_forget_and_pins import raw_bytes

FORGOTTEN = "Vexmoor"
KEPT_ONLY_IN_SUMMARY = ("The falcon staging database listens on port 6543 behind pgbouncer.",
                        "Falcon release notes are written by Priya in the CHANGES file.")
TEXT = f"The falcon uploader writes its archives to the {FORGOTTEN} bucket nightly."
WHOLE = ("We deploy the falcon service with make release from main.",
         "The falcon CI runs on GitHub Actions with a nightly schedule.")


def summaries(db: Path) -> dict[str, set[str]]:
    return {i: set(ids.split(",")) for i, ids in query(
        db, "SELECT id, summary_of FROM episodic_memory WHERE summary_of <> ''")}


def workspace(make_repo, data_dir: Path):
    """A workspace whose first summary is the only copy of two memories upstream deleted,
    and whose second summary's memories are all there: (context, bank, namespace, ids)."""
    settings = configure()
    repo = bind_repo(make_repo("app"))
    ctx = resolve_memory_context(repo.path, None, settings)
    db = repo.db(data_dir)
    first = [storage.remember(ctx, t).id for t in (TEXT, *KEPT_ONLY_IN_SUMMARY)]
    sleep_context(ctx, force=True)
    second = [storage.remember(ctx, t).id for t in WHOLE]
    sleep_context(ctx, force=True)
    assert sorted(map(sorted, summaries(db).values())) == sorted([sorted(first),
                                                                  sorted(second)])
    # upstream's own forget deletes them (its older sleep did, and left the summary)
    from mnemosyne.core.memory import Mnemosyne

    upstream = Mnemosyne(session_id=repo.namespace, db_path=db)
    for memory_id in first[1:]:
        assert upstream.forget(memory_id)
    upstream.conn.close()
    driver.reset_cache()
    return ctx, db, first, second


def test_forget_refuses_to_destroy_the_only_copy_of_other_memories(
        make_repo, data_dir: Path) -> None:
    ctx, db, first, second = workspace(make_repo, data_dir)
    (sole,) = [i for i, ids in summaries(db).items() if ids == set(first)]
    (whole,) = [i for i, ids in summaries(db).items() if ids == set(second)]

    # a summary whose memories are all still there goes with the forgotten one, silently
    done = mnemo("forget", second[0], cwd=Path(ctx.root))
    assert done.exit_code == 0, done.output
    assert whole not in summaries(db) and query(db, "SELECT 1 FROM working_memory "
                                                    "WHERE id = ?", second[1])

    # the only copy of two memories: refused, nothing deleted, the way out said
    before = db_digest(db)
    refused = mnemo("forget", first[0], cwd=Path(ctx.root))
    assert refused.exit_code == ExitCode.REFUSED, refused.output
    said = " ".join(refused.output.split())
    assert f"would also delete the sleep summary {sole}, the only recallable copy of 2 " \
           "other memories" in said, said
    assert "nothing was deleted" in said
    assert f"`mnemo forget {sole}`, then `mnemo forget {first[0]}`" in said
    assert "Traceback" not in refused.output
    driver.reset_cache()
    assert db_digest(db) == before

    # going ahead, explicitly: the summary first, then the memory; no copy stays
    for memory_id in (sole, first[0]):
        done = mnemo("forget", memory_id, cwd=Path(ctx.root))
        assert done.exit_code == 0, done.output
    driver.reset_cache()
    assert not summaries(db)
    assert FORGOTTEN.encode() not in raw_bytes(data_dir)
    assert FORGOTTEN.lower().encode() not in raw_bytes(data_dir)


def test_the_library_call_can_go_ahead_in_one_step(make_repo, data_dir: Path) -> None:
    """`driver.delete(..., drop_sole_copies=True)`: the memory and the summary go at once."""
    from dsh_mnemo.memory.targets import read_target

    ctx, db, first, _ = workspace(make_repo, data_dir)
    target = read_target(ctx)
    deleted = driver.delete(target, first[0], allow_global=False, drop_sole_copies=True)
    assert deleted["working_memory"] == 1 and deleted["summaries"] == 1
    driver.reset_cache()
    assert all(ids != set(first) for ids in summaries(db).values())
    assert FORGOTTEN.encode() not in raw_bytes(data_dir)
    assert FORGOTTEN.lower().encode() not in raw_bytes(data_dir)
