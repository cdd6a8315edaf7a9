"""The only module that drives the `mnemosyne` package.

Layout (SPEC 1a): each bound workspace has its own bank (one SQLite file),
global memories live in the `global` bank, and the default database keeps
legacy rows and the session rows of unbound directories.  A write goes to
exactly one bank; a recall reads the context's bank and the global bank and
merges them by score.

Two upstream behaviours shape this module (UPSTREAM.md):
- full-text candidates are picked across sessions before the session filter,
  so namespaces are kept in separate files and every recalled id is checked
  against its namespace before it is returned;
- every upstream write trims unconsolidated rows older than the TTL, so
  `protect_before_write` consolidates what is due before any write.

`mnemosyne` is imported lazily, after `config.apply_environment` has pointed
it at mnemo's data dir.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import paths
from ..errors import BusyError, DataError, RefusedError, UnboundError
from ..workspace.context import MemoryContext

if TYPE_CHECKING:  # pragma: no cover
    from mnemosyne.core.memory import Mnemosyne

# Upstream logs expected events (e.g. "LLM summarization failed ... falling
# back to AAAK" on every offline sleep) as warnings; with no handler they reach
# stderr through logging's last resort, which cron would mail on every run.
# A NullHandler keeps them quiet unless the application configures logging.
logging.getLogger("mnemosyne").addHandler(logging.NullHandler())

GLOBAL_SESSION = "global"
LEVELS = ("session", "workspace", "global")
BUSY_TIMEOUT_MS = 5000


@dataclass
class Memory:
    id: str
    content: str
    score: float
    level: str  # "workspace" | "session" | "global"
    timestamp: str | None
    source: str | None
    importance: float
    tier: str | None  # "working" | "episodic"
    bank: str
    signals: dict[str, Any] = field(default_factory=dict)  # keyword/fts/dense scores, match kind


@dataclass
class WriteResult:
    id: str | None  # None when the write filter rejected the text
    filtered: bool
    bank: str
    namespace: str
    level: str
    consolidated_first: int = 0  # rows consolidated by the no-loss guard


@dataclass
class ForgetResult:
    id: str
    bank: str
    level: str
    deleted: dict[str, int]


@dataclass(frozen=True)
class Target:
    """One namespace in one bank: where a write goes or a recall reads."""

    bank: str
    namespace: str
    level: str

    def db_path(self, base: Path | None = None) -> Path:
        return paths.bank_db_path(self.bank, base)

    @property
    def scope(self) -> str:
        return "global" if self.level == "global" else "session"


GLOBAL_TARGET = Target(bank=paths.GLOBAL_BANK, namespace=GLOBAL_SESSION, level="global")


# ─── Targets ────────────────────────────────────────────────────────────────

def write_target(ctx: MemoryContext, level: str | None = None) -> Target:
    """Where a write at `level` (default: the context's mode) goes."""
    level = level or ctx.mode
    if level not in LEVELS:
        raise RefusedError(f"unknown scope {level!r}; use session, workspace or global")
    if level == "global":
        return GLOBAL_TARGET
    if level == "workspace":
        if ctx.workspace is None:
            raise UnboundError(
                "this directory is not in a bound workspace; nothing was written",
                hint="Run `mnemo bind` in the project, or use --scope global.")
        return Target(bank=ctx.workspace.bank, namespace=ctx.workspace.namespace,
                      level="workspace")
    if not ctx.session_id:
        raise UnboundError("a session-scoped memory needs a session id",
                           hint="Pass --session ID.")
    from ..workspace.identity import session_namespace

    bank = ctx.workspace.bank if ctx.workspace else "default"
    return Target(bank=bank, namespace=session_namespace(ctx.session_id), level="session")


def read_target(ctx: MemoryContext) -> Target:
    """The context's own namespace; raises when the context has none."""
    if not ctx.bound or ctx.namespace is None or ctx.bank is None:
        if ctx.reason == "no-session":
            raise UnboundError("session recall mode needs a session id",
                               hint="Pass --session ID, or set recall_mode: workspace.")
        raise UnboundError("this directory is not in a bound workspace; no memory is read here",
                           hint="Run `mnemo bind` in the project root.")
    return Target(bank=ctx.bank, namespace=ctx.namespace, level=ctx.mode)


# ─── Connections ───────────────────────────────────────────────────────────

_instances: dict[tuple[str, str], Mnemosyne] = {}


def _ensure_environment() -> None:
    if not os.environ.get("MNEMOSYNE_DATA_DIR"):
        # Safety net: never let an import create ~/.hermes.
        paths.prepare_mnemosyne_environment()


def _open(target: Target, base: Path | None = None) -> Mnemosyne:
    db_path = target.db_path(base)
    key = (str(db_path), target.namespace)
    instance = _instances.get(key)
    if instance is None:
        _ensure_environment()
        with translate_sqlite_errors(db_path):
            from mnemosyne.core.memory import Mnemosyne

            db_path.parent.mkdir(parents=True, exist_ok=True)
            instance = Mnemosyne(session_id=target.namespace, db_path=db_path)
        _instances[key] = instance
    return instance


def reset_cache() -> None:
    """Forget cached upstream instances (tests switch data dirs between cases)."""
    _instances.clear()


@contextmanager
def translate_sqlite_errors(db_path: Path) -> Iterator[None]:
    try:
        yield
    except sqlite3.OperationalError as exc:
        text = str(exc).lower()
        if "locked" in text or "busy" in text:
            raise BusyError(f"the database {db_path} stayed locked",
                            hint="Another process is writing; try again.") from None
        raise DataError(f"cannot use the database {db_path}: {exc}") from None
    except sqlite3.DatabaseError as exc:
        raise DataError(f"the database {db_path} is damaged: {exc}",
                        hint="Run `mnemo doctor`.") from None


def connect_readonly(db_path: Path) -> sqlite3.Connection | None:
    """A read-only connection, or None when the file does not exist."""
    if not db_path.exists():
        return None
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.row_factory = sqlite3.Row
    return conn


def init_bank(db_path: Path) -> None:
    """Create Mnemosyne's full schema in `db_path` (idempotent)."""
    _ensure_environment()
    with translate_sqlite_errors(db_path):
        from mnemosyne.core.memory import init_db

        db_path.parent.mkdir(parents=True, exist_ok=True)
        init_db(db_path)


# ─── The no-loss guard ─────────────────────────────────────────────────────

def ttl_hours() -> float:
    try:
        return float(os.environ.get("MNEMOSYNE_WM_TTL_HOURS", "168"))
    except ValueError:
        return 168.0


def max_items() -> int:
    try:
        return int(os.environ.get("MNEMOSYNE_WM_MAX_ITEMS", "10000"))
    except ValueError:
        return 10000


def sleep_cutoff(now: datetime | None = None) -> str:
    """Upstream's sleep eligibility cutoff: naive local time, TTL/2 ago."""
    now = now or datetime.now()
    return (now - timedelta(hours=int(ttl_hours()) // 2)).isoformat()


DUE_SQL = ("SELECT COUNT(*) FROM working_memory WHERE session_id = ? AND timestamp < ? "
           "AND consolidated_at IS NULL AND (pinned IS NULL OR pinned = 0)")
UNCONSOLIDATED_SQL = ("SELECT COUNT(*) FROM working_memory WHERE session_id = ? "
                      "AND consolidated_at IS NULL")


def _count(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> int:
    try:
        return int(conn.execute(sql, args).fetchone()[0])
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return 0
        raise


def protect_before_write(target: Target, base: Path | None = None) -> int:
    """Consolidate rows that the write's trim would otherwise delete.

    Upstream's trim deletes unconsolidated rows older than the TTL, and all
    but the newest `MNEMOSYNE_WM_MAX_ITEMS`.  Consolidated rows survive it,
    so everything sleep considers due (older than TTL/2) is consolidated
    first, and when the unconsolidated backlog reaches the item cap it is
    consolidated whatever its age.  Returns the rows consolidated.
    """
    from .consolidate import consolidate

    db_path = target.db_path(base)
    conn = connect_readonly(db_path)
    if conn is None:
        return 0
    try:
        with translate_sqlite_errors(db_path):
            due = _count(conn, DUE_SQL, (target.namespace, sleep_cutoff()))
            backlog = _count(conn, UNCONSOLIDATED_SQL, (target.namespace,))
    finally:
        conn.close()
    if not due and backlog < max_items() - 1:
        return 0
    result = consolidate(target, base=base, force=backlog >= max_items() - 1, wait=30.0)
    return result.items_consolidated


# ─── Remember / recall / forget ────────────────────────────────────────────

def remember(ctx: MemoryContext, text: str, *, level: str | None = None,
             source: str = "user", importance: float = 0.5,
             base: Path | None = None) -> WriteResult:
    target = write_target(ctx, level)
    return remember_at(target, text, source=source, importance=importance, base=base)


def remember_at(target: Target, text: str, *, source: str = "user", importance: float = 0.5,
                base: Path | None = None) -> WriteResult:
    if not text or not text.strip():
        raise RefusedError("nothing to remember: the text is empty")
    if "\x00" in text:
        raise RefusedError("the text contains NUL bytes; nothing was written")
    if not 0.0 <= importance <= 1.0:
        raise RefusedError(f"importance must be between 0 and 1, not {importance}")
    consolidated = protect_before_write(target, base)
    memory = _open(target, base)
    with translate_sqlite_errors(target.db_path(base)):
        memory_id = memory.remember(text, source=source, importance=importance,
                                    scope=target.scope)
    return WriteResult(id=memory_id, filtered=memory_id is None, bank=target.bank,
                       namespace=target.namespace, level=target.level,
                       consolidated_first=consolidated)


def _owned_ids(db_path: Path, namespace: str, ids: list[str], *,
               allow_global: bool) -> set[str]:
    """The subset of `ids` that really belongs to `namespace` (or is global)."""
    conn = connect_readonly(db_path)
    if conn is None or not ids:
        return set()
    marks = ",".join("?" * len(ids))
    clause = "(session_id = ? OR scope = 'global')" if allow_global else "session_id = ?"
    owned: set[str] = set()
    try:
        for table in ("working_memory", "episodic_memory"):
            try:
                rows = conn.execute(
                    f"SELECT id FROM {table} WHERE id IN ({marks}) AND {clause}",
                    (*ids, namespace))
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc) or "no such column" in str(exc):
                    continue
                raise
            owned.update(row[0] for row in rows)
    finally:
        conn.close()
    return owned


# Upper bound of the deeper second look in a shared bank (upstream scores
# up to three times as many full-text candidates).
SHARED_BANK_MAX_FETCH = 3000


def _shared_bank_rows(db_path: Path, namespace: str) -> int:
    """Rows in the bank's working and episodic tiers if other namespaces share it, else 0.

    The existence check is three index seeks per table, so a bank of its own
    (every workspace in workspace mode) costs next to nothing here.
    """
    conn = connect_readonly(db_path)
    if conn is None:
        return 0
    tables = ("working_memory", "episodic_memory")
    try:
        shared = any(_count(conn, f"""SELECT EXISTS(SELECT 1 FROM {t} WHERE session_id > ?)
                                          OR EXISTS(SELECT 1 FROM {t} WHERE session_id < ?)
                                          OR EXISTS(SELECT 1 FROM {t} WHERE session_id IS NULL)""",
                            (namespace, namespace)) for t in tables)
        if not shared:
            return 0
        return sum(_count(conn, f"SELECT COUNT(*) FROM {t}", ()) for t in tables)
    finally:
        conn.close()


def _recall_one(target: Target, query: str, fetch: int, base: Path | None, *,
                want: int | None = None, **kwargs: Any) -> list[Memory]:
    db_path = target.db_path(base)
    if not db_path.exists():
        return []  # never create a bank just to read it
    memory = _open(target, base)
    with translate_sqlite_errors(db_path):
        rows = memory.recall(query, top_k=fetch, **kwargs)
        owned = _owned_ids(db_path, target.namespace, [str(r.get("id")) for r in rows],
                           allow_global=True)
        if len(owned) < (want or fetch):
            # A bank shared by several namespaces (a workspace and its sessions,
            # or the default bank's unbound sessions) is subject to upstream's
            # candidate starvation: its full-text stage keeps max(top_k*3, 50)
            # candidates across every session before filtering.  When this
            # namespace came back short, look again with enough candidates to
            # cover the whole bank (bounded), so other namespaces cannot hide it.
            total = _shared_bank_rows(db_path, target.namespace)
            deeper = min(total // 3 + 1, SHARED_BANK_MAX_FETCH)
            if total and deeper > fetch:
                rows = memory.recall(query, top_k=deeper, **kwargs)
                owned = _owned_ids(db_path, target.namespace,
                                   [str(r.get("id")) for r in rows], allow_global=True)
    results = []
    for row in rows:
        memory_id = str(row.get("id"))
        if memory_id not in owned:
            continue  # defence in depth: never return a row of another namespace
        level = "global" if row.get("scope") == "global" else target.level
        signals = {k: row.get(k) for k in ("keyword_score", "fts_score", "dense_score",
                                           "fact_match", "entity_match", "recency_decay")
                   if k in row}
        results.append(Memory(
            id=memory_id, content=str(row.get("content") or ""),
            score=float(row.get("score") or 0.0), level=level,
            timestamp=row.get("timestamp"), source=row.get("source"),
            importance=float(row.get("importance") or 0.0), tier=row.get("tier"),
            bank=target.bank, signals=signals))
    return results


def recall(ctx: MemoryContext, query: str, *, top_k: int = 5, temporal_weight: float = 0.0,
           temporal_halflife: float | None = None, base: Path | None = None) -> list[Memory]:
    """The context's memories plus global ones matching `query`, best first."""
    if not query or not query.strip():
        raise RefusedError("the query is empty")
    if top_k < 1:
        raise RefusedError("--top-k must be at least 1")
    own = read_target(ctx)
    # Upstream's full-text stage takes max(top_k*3, 50) candidates across all
    # sessions of a file; asking for more keeps a small namespace visible in a
    # shared file (the default bank) without costing much in a bank of its own.
    fetch = max(top_k, 20)
    kwargs: dict[str, Any] = {"temporal_weight": temporal_weight}
    if temporal_halflife is not None:
        kwargs["temporal_halflife"] = temporal_halflife
    merged = _recall_one(own, query, fetch, base, want=top_k, **kwargs)
    if own.bank != paths.GLOBAL_BANK:
        seen = {m.id for m in merged}
        merged += [m for m in _recall_one(GLOBAL_TARGET, query, fetch, base, want=top_k,
                                          **kwargs)
                   if m.id not in seen]
    merged.sort(key=lambda m: m.score, reverse=True)
    return merged[:top_k]


def forget(ctx: MemoryContext, memory_id: str, *, base: Path | None = None) -> ForgetResult:
    """Delete one row of the current namespace, or a global row; refuse anything else."""
    memory_id = memory_id.strip()
    if not memory_id:
        raise RefusedError("no memory id given")
    try:
        own: Target | None = read_target(ctx)
    except UnboundError as unbound:
        # Global rows can be forgotten from anywhere, an unbound directory too;
        # anything else needs the namespace this context does not have.
        own, no_namespace = None, unbound
    for target in (own, GLOBAL_TARGET) if own else (GLOBAL_TARGET,):
        db_path = target.db_path(base)
        allow_global = target is GLOBAL_TARGET
        if memory_id not in _owned_ids(db_path, target.namespace, [memory_id],
                                       allow_global=allow_global) \
                and not _legacy_owned(db_path, target.namespace, memory_id):
            continue
        deleted = _delete(target, memory_id, base, allow_global=allow_global)
        return ForgetResult(id=memory_id, bank=target.bank,
                            level="global" if allow_global else target.level, deleted=deleted)
    if own is None:
        raise no_namespace
    raise RefusedError(
        f"no memory {memory_id} in this {own.level} or in global memory: it does not exist "
        "or belongs to another workspace; nothing was deleted",
        hint="`mnemo recall` shows the ids you can forget here.")


def _legacy_owned(db_path: Path, namespace: str, memory_id: str) -> bool:
    conn = connect_readonly(db_path)
    if conn is None:
        return False
    try:
        return _count(conn, "SELECT COUNT(*) FROM memories WHERE id = ? AND session_id = ?",
                      (memory_id, namespace)) > 0
    finally:
        conn.close()


def _delete(target: Target, memory_id: str, base: Path | None, *,
            allow_global: bool) -> dict[str, int]:
    db_path = target.db_path(base)
    clause = "(session_id = ? OR scope = 'global')" if allow_global else "session_id = ?"
    memory = _open(target, base)
    deleted: dict[str, int] = {}
    with translate_sqlite_errors(db_path):
        conn = memory.conn
        before = _count(conn, f"SELECT COUNT(*) FROM working_memory WHERE id = ? AND {clause}",
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


# ─── Inspection ────────────────────────────────────────────────────────────

@dataclass
class NamespaceStats:
    bank: str
    namespace: str
    working: int = 0
    working_consolidated: int = 0
    working_unconsolidated: int = 0
    episodic: int = 0
    legacy: int = 0
    due: int = 0
    first: str | None = None
    last: str | None = None


def bank_names(base: Path | None = None) -> list[str]:
    """Every bank with a database on disk: default, global and the ws-* banks."""
    names = []
    if paths.default_db_path(base).exists():
        names.append("default")
    root = paths.banks_dir(base)
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if (child / paths.DEFAULT_DB_FILE).exists():
                names.append(child.name)
    return names


def namespace_stats(bank: str, namespaces: list[str] | None = None,
                    base: Path | None = None) -> list[NamespaceStats]:
    """Per-namespace counts in one bank, read-only (all namespaces when None)."""
    db_path = paths.bank_db_path(bank, base)
    conn = connect_readonly(db_path)
    if conn is None:
        return [NamespaceStats(bank=bank, namespace=ns) for ns in namespaces or []]
    stats: dict[str, NamespaceStats] = {}

    def get(ns: str) -> NamespaceStats:
        if ns not in stats:
            stats[ns] = NamespaceStats(bank=bank, namespace=ns)
        return stats[ns]

    cutoff = sleep_cutoff()
    try:
        with translate_sqlite_errors(db_path):
            for row in _rows(conn, """
                    SELECT session_id, COUNT(*),
                           SUM(consolidated_at IS NOT NULL),
                           SUM(consolidated_at IS NULL AND timestamp < ?
                               AND (pinned IS NULL OR pinned = 0)),
                           MIN(timestamp), MAX(timestamp)
                    FROM working_memory GROUP BY session_id""", (cutoff,)):
                s = get(row[0] or "default")
                s.working, s.working_consolidated = row[1], row[2] or 0
                s.working_unconsolidated = s.working - s.working_consolidated
                s.due = row[3] or 0
                s.first, s.last = row[4], row[5]
            for row in _rows(conn, """SELECT session_id, COUNT(*), MIN(timestamp), MAX(timestamp)
                                      FROM episodic_memory GROUP BY session_id""", ()):
                s = get(row[0] or "default")
                s.episodic = row[1]
                s.first = min(filter(None, (s.first, row[2])), default=None)
                s.last = max(filter(None, (s.last, row[3])), default=None)
            for row in _rows(conn, "SELECT session_id, COUNT(*) FROM memories "
                                   "GROUP BY session_id", ()):
                get(row[0] or "default").legacy = row[1]
    finally:
        conn.close()
    if namespaces is not None:
        return [stats.get(ns) or NamespaceStats(bank=bank, namespace=ns) for ns in namespaces]
    return sorted(stats.values(), key=lambda s: s.namespace)


def _rows(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    try:
        return list(conn.execute(sql, args))
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise


def due_namespaces(bank: str, base: Path | None = None) -> dict[str, int]:
    """Namespaces of a bank with rows sleep would consolidate (one cheap query)."""
    db_path = paths.bank_db_path(bank, base)
    conn = connect_readonly(db_path)
    if conn is None:
        return {}
    try:
        with translate_sqlite_errors(db_path):
            rows = _rows(conn, """
                SELECT COALESCE(session_id, 'default'), COUNT(*) FROM working_memory
                WHERE timestamp < ? AND consolidated_at IS NULL AND (pinned IS NULL OR pinned = 0)
                GROUP BY 1""", (sleep_cutoff(),))
    finally:
        conn.close()
    return {ns: n for ns, n in rows if n}


def run_sleep(target: Target, *, dry_run: bool, force: bool,
              base: Path | None = None) -> dict[str, Any]:
    """Upstream's per-session sleep for one namespace (never `sleep_all_sessions`)."""
    memory = _open(target, base)
    with translate_sqlite_errors(target.db_path(base)):
        return dict(memory.sleep(dry_run=dry_run, force=force))
