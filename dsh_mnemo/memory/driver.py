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

import logging
import os
import sqlite3
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

_instances: dict[tuple[str, str], Mnemosyne] = {}


def _ensure_environment() -> None:
    if not os.environ.get("MNEMOSYNE_DATA_DIR"):
        # Safety net: never let an import create ~/.hermes.
        paths.prepare_mnemosyne_environment()


def instance(target: Target, base: Path | None = None) -> Mnemosyne:
    """Upstream's memory object for `target` (created once per process)."""
    db_path = target.db_path(base)
    key = (str(db_path), target.namespace)
    memory = _instances.get(key)
    if memory is None:
        _ensure_environment()
        with translate_sqlite_errors(db_path):
            from mnemosyne.core.memory import Mnemosyne

            db_path.parent.mkdir(parents=True, exist_ok=True)
            memory = Mnemosyne(session_id=target.namespace, db_path=db_path)
        _instances[key] = memory
    return memory


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


def recall(target: Target, query: str, *, top_k: int, base: Path | None = None,
           **kwargs: Any) -> list[dict[str, Any]]:
    """Upstream's recall in `target`'s session (its rows plus scope-global rows)."""
    memory = instance(target, base)
    with translate_sqlite_errors(target.db_path(base)):
        return list(memory.recall(query, top_k=top_k, **kwargs))


def sleep(target: Target, *, dry_run: bool, force: bool,
          base: Path | None = None) -> dict[str, Any]:
    """Upstream's per-session sleep for one namespace (never `sleep_all_sessions`)."""
    memory = instance(target, base)
    with translate_sqlite_errors(target.db_path(base)):
        return dict(memory.sleep(dry_run=dry_run, force=force))


def delete(target: Target, memory_id: str, *, allow_global: bool,
           base: Path | None = None) -> dict[str, int]:
    """Delete one row of `target`'s namespace (or a global row) from every tier."""
    db_path = target.db_path(base)
    clause = "(session_id = ? OR scope = 'global')" if allow_global else "session_id = ?"
    memory = instance(target, base)
    deleted: dict[str, int] = {}
    with translate_sqlite_errors(db_path):
        conn = memory.conn
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
        if cur.rowcount:
            conn.execute("DELETE FROM annotations WHERE memory_id = ?", (memory_id,))
            conn.execute("DELETE FROM memory_embeddings WHERE memory_id = ?", (memory_id,))
            if episode is not None:
                _delete_episode_vector(conn, int(episode[0]))
        cur = conn.execute("DELETE FROM memories WHERE id = ? AND session_id = ?",
                           (memory_id, target.namespace))
        deleted["memories"] = cur.rowcount
        conn.commit()
    return deleted


def _delete_episode_vector(conn: sqlite3.Connection, rowid: int) -> None:
    """Drop a forgotten episode's vector (episodic rowids are never reused, so it would linger)."""
    try:
        conn.execute("DELETE FROM vec_episodes WHERE rowid = ?", (rowid,))
    except sqlite3.OperationalError:
        pass  # no vector table, or the sqlite-vec extension is not loaded here
