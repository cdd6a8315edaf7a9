"""The only module that drives the `mnemosyne` package.

Everything that needs upstream's own code — its write path (with the write
filter), its recall, its per-session sleep, its forget — calls in here, one
cached `Mnemosyne` instance per (bank file, namespace).  Everything that
only reads a bank uses `banks` instead, with plain SQLite.

`mnemosyne.core.memory` creates a database when it is imported, so it is
imported lazily and only after `config.apply_environment` has pointed
`MNEMOSYNE_DATA_DIR` at mnemo's data dir (docs/upstream.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import paths
from .banks import count, translate_sqlite_errors
from .targets import Target

if TYPE_CHECKING:  # pragma: no cover
    from mnemosyne.core.memory import Mnemosyne

# Upstream logs expected events (e.g. "LLM summarization failed ... falling
# back to AAAK" on every offline sleep) as warnings; with no handler they reach
# stderr through logging's last resort, which cron would mail on every run.
# A NullHandler keeps them quiet unless the application configures logging.
logging.getLogger("mnemosyne").addHandler(logging.NullHandler())

_instances: dict[tuple[str, str, int], Mnemosyne] = {}


def _ensure_environment() -> None:
    if not os.environ.get("MNEMOSYNE_DATA_DIR"):
        # Safety net: never let an import create ~/.hermes.
        paths.prepare_mnemosyne_environment()


def instance(target: Target, base: Path | None = None) -> Mnemosyne:
    """Upstream's memory object for `target` (created once per process)."""
    db_path = target.db_path(base)
    # One per thread: a connection belongs to the thread that opened it.
    key = (str(db_path), target.namespace, threading.get_ident())
    memory = _instances.get(key)
    if memory is None:
        _ensure_environment()
        with translate_sqlite_errors(db_path):
            from mnemosyne.core.memory import Mnemosyne

            db_path.parent.mkdir(parents=True, exist_ok=True)
            memory = Mnemosyne(session_id=target.namespace, db_path=db_path)
        disarm_trim(memory)
        _instances[key] = memory
    return memory


def disarm_trim(memory: Mnemosyne) -> None:
    """Stop upstream's working-memory trim from deleting rows through mnemo.

    Every upstream write ends by deleting the session's unconsolidated rows
    older than its TTL (and beyond its item cap).  mnemo consolidates what is
    due before each write, but a row can still cross the TTL between that
    check and upstream's trim (another process aging it, a clock change), and
    the trim deletes it for good.  Consolidated rows are exempt from the trim
    anyway, and mnemo keeps the unconsolidated backlog bounded itself
    (`store.protect_before_write`), so through mnemo the trim only ever
    destroys: it does not run.  Upstream's own tools still trim when they
    write; `protect_pinned` and the due-check keep that from costing rows.
    """
    beam = getattr(memory, "beam", None)
    if beam is None or not callable(getattr(beam, "_trim_working_memory", None)):
        raise RuntimeError("mnemosyne's working-memory trim moved: re-check docs/upstream.md "
                           "before using this mnemosyne release")
    beam._trim_working_memory = lambda: None


def open_banks() -> int:
    """Distinct bank files with an upstream instance open in this process."""
    return len({key[0] for key in list(_instances)})


def end_open_transactions() -> list[str]:
    """Roll back whatever transaction this thread's upstream connections left open.

    A process that lives on (the resident server) keeps each thread's
    connections between requests; a transaction left open on one of them
    (an upstream path that writes without committing, an error between a
    write and its commit) would hold the bank's write lock for good and every
    later store would find the database busy.  Returns the banks whose
    connection had one (the caller logs them).
    """
    ident = threading.get_ident()
    ended: list[str] = []
    for key, memory in list(_instances.items()):
        if key[2] != ident:
            continue
        seen: set[int] = set()
        for conn in (getattr(memory, "conn", None), getattr(getattr(memory, "beam", None),
                                                              "conn", None)):
            conn = getattr(conn, "_conn", conn)  # through a _DeferredTracking proxy
            if not isinstance(conn, sqlite3.Connection) or id(conn) in seen:
                continue
            seen.add(id(conn))
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.rollback()
                ended.append(Path(key[0]).parent.name)
    return ended


def reset_cache() -> None:
    """Forget cached upstream instances (tests switch data dirs between cases)."""
    _instances.clear()


def init_bank(db_path: Path) -> None:
    """Create Mnemosyne's full schema in `db_path` (idempotent)."""
    _ensure_environment()
    with translate_sqlite_errors(db_path):
        from mnemosyne.core.memory import init_db

        db_path.parent.mkdir(parents=True, exist_ok=True)
        init_db(db_path)


def remember(target: Target, text: str, *, source: str, importance: float,
             base: Path | None = None) -> str | None:
    """Upstream's write (its write filter applies); None when the filter rejected it."""
    memory = instance(target, base)
    with translate_sqlite_errors(target.db_path(base)):
        return memory.remember(text, source=source, importance=importance, scope=target.scope)


def protect_pinned(target: Target, base: Path | None = None) -> int:
    """Shield pinned rows from upstream's trim; how many were shielded.

    Upstream's trim deletes every unconsolidated row past the TTL, pinned or
    not, while its sleep never consolidates a pinned row.  Marking them
    consolidated (with no summary claim, so sleep's orphan reclaim leaves
    them alone) is what the trim spares; recall still finds them, verbatim.
    """
    from datetime import datetime

    memory = instance(target, base)
    with translate_sqlite_errors(target.db_path(base)):
        cur = memory.conn.execute(
            "UPDATE working_memory SET consolidated_at = ?, consolidation_claimed_at = NULL "
            "WHERE session_id = ? AND pinned = 1 AND consolidated_at IS NULL",
            (datetime.now().isoformat(), target.namespace))
        memory.conn.commit()
        return cur.rowcount


def recall(target: Target, query: str, *, top_k: int, base: Path | None = None,
           tracking: list[Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    """Upstream's recall in `target`'s session (its rows plus scope-global rows).

    Upstream's recall ends by bumping `recall_count` of what it returned and
    committing: a write, and an fsync, on the prompt's path, and a write lock
    a resident server's stores would contend with.  Given a `tracking` list,
    the recall only reads: the bump statements are kept in the list, and
    `record_recalls` applies them later, off the prompt's path.
    """
    memory = instance(target, base)
    with translate_sqlite_errors(target.db_path(base)):
        if tracking is None:
            return list(memory.recall(query, top_k=top_k, **kwargs))
        beam = memory.beam
        real = beam.conn
        bumps: list[tuple[str, tuple[Any, ...]]] = []
        beam.conn = _DeferredTracking(real, bumps)
        try:
            return list(memory.recall(query, top_k=top_k, **kwargs))
        finally:
            beam.conn = real
            tracking.extend((target, sql, params) for sql, params in bumps)


def record_recalls(tracking: list[Any], base: Path | None = None) -> int:
    """Apply the recall-count bumps `recall(tracking=...)` kept; how many statements ran.

    Best effort: a count is not a memory, so a busy database drops them.
    """
    done = 0
    for target, sql, params in tracking:
        memory = instance(target, base)
        try:
            memory.beam.conn.execute(sql, params)
            memory.beam.conn.commit()
            done += 1
        except sqlite3.Error:
            with contextlib.suppress(sqlite3.Error):
                memory.beam.conn.rollback()
    return done


def _is_recall_bump(sql: str) -> bool:
    text = " ".join(sql.split())
    return text.startswith("UPDATE ") and "SET recall_count = recall_count + 1" in text


class _DeferredCursor:
    """A cursor whose recall-count bumps are kept, not run (reads pass through)."""

    def __init__(self, cursor: sqlite3.Cursor, bumps: list[tuple[str, tuple[Any, ...]]]):
        self._cursor = cursor
        self._bumps = bumps

    def execute(self, sql: str, params: Any = ()) -> Any:
        if _is_recall_bump(sql):
            self._bumps.append((sql, tuple(params)))
            return self
        self._cursor.execute(sql, params)
        return self

    def __iter__(self) -> Any:
        return iter(self._cursor)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _DeferredTracking:
    """Upstream's connection during a read-only recall (see `recall`)."""

    def __init__(self, conn: sqlite3.Connection, bumps: list[tuple[str, tuple[Any, ...]]]):
        self._conn = conn
        self._bumps = bumps

    def cursor(self, *args: Any, **kwargs: Any) -> _DeferredCursor:
        return _DeferredCursor(self._conn.cursor(*args, **kwargs), self._bumps)

    def execute(self, sql: str, params: Any = ()) -> Any:
        if _is_recall_bump(sql):
            self._bumps.append((sql, tuple(params)))
            return self._conn.execute("SELECT 1 WHERE 0")
        return self._conn.execute(sql, params)

    def commit(self) -> None:
        if self._conn.in_transaction:  # something else was written: never leave it open
            self._conn.commit()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def sleep(target: Target, *, dry_run: bool, force: bool,
          base: Path | None = None) -> dict[str, Any]:
    """Upstream's per-session sleep for one namespace (never `sleep_all_sessions`)."""
    memory = instance(target, base)
    with translate_sqlite_errors(target.db_path(base)):
        return dict(memory.sleep(dry_run=dry_run, force=force))


# Tables that copy a memory's text or hang off it, by the column naming the
# memory (upstream's extraction writes gists and facts for every memory).
_CHILD_TABLES = (("annotations", "memory_id"), ("memory_embeddings", "memory_id"),
                 ("memory_events", "memory_id"), ("memory_validations", "memory_id"),
                 ("mnemo_vectors", "memory_id"))


def delete(target: Target, memory_id: str, *, allow_global: bool,
           base: Path | None = None) -> dict[str, int]:
    """Delete one row of `target`'s namespace (or a global row), and every copy of its text.

    Besides the row in each tier: the gists, facts and consolidated facts
    upstream extracted from it, its graph edges, annotations, events and
    vectors.  With `secure_delete` the freed pages are overwritten, the
    full-text indexes are merged so no stale entry keeps its words, and the
    WAL is checkpointed: the text is gone from the files, not just unlinked.
    """
    db_path = target.db_path(base)
    clause = "(session_id = ? OR scope = 'global')" if allow_global else "session_id = ?"
    memory = instance(target, base)
    deleted: dict[str, int] = {}
    with translate_sqlite_errors(db_path):
        conn = memory.conn
        conn.execute("PRAGMA secure_delete = ON")
        before = count(conn, f"SELECT COUNT(*) FROM working_memory WHERE id = ? AND {clause}",
                       (memory_id, target.namespace))
        if before:
            # Upstream's forget cascades to vectors and annotations for working rows.
            memory.beam.forget_working(memory_id)
        deleted["working_memory"] = before
        episode = conn.execute(f"SELECT rowid FROM episodic_memory WHERE id = ? AND {clause}",
                               (memory_id, target.namespace)).fetchone()
        cur = conn.execute(f"DELETE FROM episodic_memory WHERE id = ? AND {clause}",
                           (memory_id, target.namespace))
        deleted["episodic_memory"] = cur.rowcount
        if cur.rowcount and episode is not None:
            _delete_episode_vector(conn, int(episode[0]))
        cur = conn.execute("DELETE FROM memories WHERE id = ? AND session_id = ?",
                           (memory_id, target.namespace))
        deleted["memories"] = cur.rowcount
        if any(deleted.values()):
            deleted.update(_delete_copies(conn, memory_id))
        conn.commit()
        if any(deleted.values()):
            _purge_freed_text(conn)
    return deleted


def _delete_copies(conn: sqlite3.Connection, memory_id: str) -> dict[str, int]:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    deleted: dict[str, int] = {}

    def run(table: str, sql: str, args: tuple[Any, ...]) -> None:
        if table in tables:
            deleted[table] = deleted.get(table, 0) + conn.execute(sql, args).rowcount

    derived = [r[0] for r in conn.execute("SELECT id FROM gists WHERE memory_id = ?",
                                          (memory_id,))] if "gists" in tables else []
    if "facts" in tables:
        derived += [r[0] for r in conn.execute("SELECT fact_id FROM facts WHERE "
                                               "source_msg_id = ?", (memory_id,))]
    for table, column in _CHILD_TABLES:
        run(table, f'DELETE FROM "{table}" WHERE "{column}" = ?', (memory_id,))
    run("gists", "DELETE FROM gists WHERE memory_id = ?", (memory_id,))
    run("facts", "DELETE FROM facts WHERE source_msg_id = ?", (memory_id,))  # trigger: fts_facts
    for item in derived:
        run("graph_edges", "DELETE FROM graph_edges WHERE source = ? OR target = ?",
            (item, item))
    if "consolidated_facts" in tables:
        # A consolidated fact lists the memories it came from: drop this one, and
        # the fact itself once no other memory says it.
        for row_id, sources in conn.execute(
                "SELECT id, sources_json FROM consolidated_facts WHERE instr(sources_json, ?)",
                (memory_id,)).fetchall():
            try:
                left = [s for s in json.loads(sources or "[]") if s != memory_id]
            except ValueError:
                left = []
            if left:
                conn.execute("UPDATE consolidated_facts SET sources_json = ? WHERE id = ?",
                             (json.dumps(left), row_id))
            else:
                run("consolidated_facts", "DELETE FROM consolidated_facts WHERE id = ?",
                    (row_id,))
    return {k: v for k, v in deleted.items() if v}


def _purge_freed_text(conn: sqlite3.Connection) -> None:
    """Merge full-text indexes (dropping deleted entries) and checkpoint the WAL."""
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND "
                                "sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'").fetchall():
        try:
            conn.execute(f'INSERT INTO "{name}"("{name}") VALUES (\'optimize\')')
        except sqlite3.Error:
            continue
    conn.commit()
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error:
        pass  # another connection holds the WAL; its next checkpoint overwrites it


def _delete_episode_vector(conn: sqlite3.Connection, rowid: int) -> None:
    """Drop a forgotten episode's vector (episodic rowids are never reused, so it would linger)."""
    try:
        conn.execute("DELETE FROM vec_episodes WHERE rowid = ?", (rowid,))
    except sqlite3.OperationalError:
        pass  # no vector table, or the sqlite-vec extension is not loaded here
