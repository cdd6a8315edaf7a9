"""Forget leaves no copy of the text on disk; pinned rows survive upstream's trim."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dsh_mnemo.memory import store as storage
from dsh_mnemo.memory import targets
from dsh_mnemo.workspace.context import resolve_memory_context
from tests.conftest import bind_repo, configure
from tests.memory.conftest import age_rows, query

SECRETISH = "Quintessa"
TEXT = f"Zorblax the deployment codename is {SECRETISH} at Ferncliff datacenter"


def raw_bytes(data_dir: Path) -> bytes:
    """Every byte of every file under the data dir (databases, WAL, journals)."""
    return b"".join(p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file())


def kept_and_gone(make_repo, data_dir: Path) -> tuple[object, Path, str, str]:
    """A workspace with two memories: (its context, its bank, the one kept, the one
    to forget)."""
    settings = configure()
    repo = bind_repo(make_repo("app"))
    ctx = resolve_memory_context(repo.path, None, settings)
    keep = storage.remember(ctx, "We deploy with make release from the main branch").id
    gone = storage.remember(ctx, TEXT).id
    return ctx, repo.db(data_dir), keep, gone


def test_forget_removes_every_copy_from_the_files(make_repo, data_dir: Path) -> None:
    ctx, db, keep, gone = kept_and_gone(make_repo, data_dir)
    # upstream copied the text into its extraction tables too
    assert query(db, "SELECT COUNT(*) FROM gists WHERE memory_id = ?", gone)[0][0] == 1
    assert query(db, "SELECT COUNT(*) FROM facts WHERE source_msg_id = ?", gone)[0][0] >= 1
    assert SECRETISH.encode() in raw_bytes(data_dir)

    result = storage.forget(ctx, gone)
    assert result.deleted["working_memory"] == 1
    assert {"gists", "facts"} <= set(result.copies)
    for table, column in (("working_memory", "content"), ("gists", "text"),
                          ("facts", "object"), ("consolidated_facts", "object"),
                          ("fts_working", "content")):
        assert not query(db, f"SELECT 1 FROM {table} WHERE {column} LIKE ?",
                         f"%{SECRETISH}%"), table
    from dsh_mnemo.memory import driver

    driver.reset_cache()  # close upstream's connection, as the process end would
    assert SECRETISH.encode() not in raw_bytes(data_dir)
    assert SECRETISH.lower().encode() not in raw_bytes(data_dir)
    # the other memory is untouched and still recalled
    assert [m.id for m in storage.recall(ctx, "make release")] == [keep]


def test_pinned_rows_survive_the_trim_of_a_later_write(make_repo, data_dir: Path) -> None:
    settings = configure()
    repo = bind_repo(make_repo("app"))
    ctx = resolve_memory_context(repo.path, None, settings)
    target = targets.write_target(ctx)
    pinned = [storage.remember_at(target, f"pinned rule number {i}: ask before rm").id
              for i in range(3)]
    db = repo.db(data_dir)
    conn = sqlite3.connect(db)
    conn.execute(f"UPDATE working_memory SET pinned = 1 WHERE id IN ({','.join('?' * 3)})",
                 pinned)
    conn.commit()
    conn.close()
    age_rows(db, repo.namespace, hours=24 * 30, ids=pinned)  # far past the TTL

    storage.remember_at(target, "a later write, which runs upstream's trim")
    left = {r[0] for r in query(db, "SELECT id FROM working_memory WHERE pinned = 1")}
    assert left == set(pinned)
    found = {m.id for m in storage.recall(ctx, "pinned rule ask before rm", top_k=10)}
    assert set(pinned) <= found


def test_a_row_aged_past_the_ttl_after_the_guard_is_not_trimmed(make_repo, data_dir: Path
                                                                 ) -> None:
    """The guard consolidates what is due, but a row may cross the TTL right after it
    (another process, a clock change): upstream's trim must not delete it then."""
    from dsh_mnemo.memory import driver

    settings = configure()
    repo = bind_repo(make_repo("app"))
    target = targets.write_target(resolve_memory_context(repo.path, None, settings))
    first = storage.remember_at(target, "an early memory about the parser").id
    age_rows(repo.db(data_dir), repo.namespace, hours=24 * 30, ids=[first])
    # straight to upstream's write, as if the row aged between guard and write
    driver.remember(target, "a later memory about the lexer", source="user", importance=0.5)
    assert query(repo.db(data_dir), "SELECT id FROM working_memory WHERE id = ?", first)


def test_forget_deletes_the_sleep_summaries_that_folded_the_memory_in(make_repo,
                                                                     data_dir: Path) -> None:
    """A sleep summary repeats the text of every row it summarises: forgetting one of
    them deletes the summary (and its gist, facts and vector), so no prompt can be
    given what was forgotten; the other rows it summarised stay, whole."""
    from dsh_mnemo.memory import consolidate, driver

    ctx, db, keep, gone = kept_and_gone(make_repo, data_dir)
    assert consolidate.sleep_context(ctx, force=True).items_consolidated == 2
    (summary,) = query(db, "SELECT id, summary_of, content FROM episodic_memory")
    assert gone in summary[1] and SECRETISH in summary[2]

    result = storage.forget(ctx, gone)
    assert result.copies.get("summaries") == 1
    assert not query(db, "SELECT 1 FROM episodic_memory")
    for table, column in (("gists", "memory_id"), ("facts", "source_msg_id"),
                          ("mnemo_vectors", "memory_id")):
        assert not query(db, f"SELECT 1 FROM {table} WHERE {column} = ?", summary[0]), table
    driver.reset_cache()
    assert SECRETISH.encode() not in raw_bytes(data_dir)
    assert SECRETISH.lower().encode() not in raw_bytes(data_dir)
    assert [m.id for m in storage.recall(ctx, "make release main branch")][:1] == [keep]


def test_a_forget_during_a_sleep_leaves_no_summary_of_the_forgotten_text(
        make_repo, data_dir: Path, monkeypatch) -> None:
    """A sleep claims its rows, commits, builds the summary (seconds with an LLM), then
    writes it.  A forget in between found no summary to delete, and the summary
    written after it kept the forgotten text for every later prompt.  A forget now
    waits for the namespace's sleep, then deletes the summary with the row."""
    import threading

    from dsh_mnemo.memory import consolidate, driver

    ctx, db, keep, gone = kept_and_gone(make_repo, data_dir)
    summarising, forgotten = threading.Event(), threading.Event()
    sleeper: dict[str, object] = {}
    real_connect = sqlite3.connect

    def connect(database, *args, **kwargs):  # type: ignore[no-untyped-def]
        if threading.get_ident() != sleeper.get("thread") or str(database) != str(db):
            return real_connect(database, *args, **kwargs)

        class Cursor(sqlite3.Cursor):
            def execute(self, sql, *params):  # type: ignore[no-untyped-def]
                if "INSERT INTO episodic_memory" in sql and not summarising.is_set():
                    summarising.set()  # the rows are claimed, the summary is built
                    forgotten.wait(3)  # a forget that waits for this sleep times out here
                return super().execute(sql, *params)

        class Connection(kwargs.pop("factory", sqlite3.Connection)):  # type: ignore[misc]
            def cursor(self, factory=Cursor):  # type: ignore[no-untyped-def]
                return super().cursor(factory)

        return real_connect(database, *args, factory=Connection, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)

    def sleep() -> None:
        sleeper["thread"] = threading.get_ident()
        sleeper["result"] = consolidate.sleep_context(ctx, force=True)

    thread = threading.Thread(target=sleep)
    thread.start()
    assert summarising.wait(30)
    result = storage.forget(ctx, gone)
    forgotten.set()
    thread.join(30)
    assert result.deleted["working_memory"] == 1
    assert sleeper["result"].items_consolidated == 2  # type: ignore[attr-defined]
    assert not query(db, "SELECT 1 FROM episodic_memory WHERE content LIKE ?",
                     f"%{SECRETISH}%")
    driver.reset_cache()
    assert SECRETISH.encode() not in raw_bytes(data_dir)
    assert SECRETISH.lower().encode() not in raw_bytes(data_dir)
    assert [m.id for m in storage.recall(ctx, "make release main branch")][:1] == [keep]
