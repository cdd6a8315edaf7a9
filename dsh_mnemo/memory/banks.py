"""Reading banks without Mnemosyne: the one SQLite opener and what it reads.

A bank is one Mnemosyne SQLite file (see docs/architecture.md).  Everything
that only reads one — statistics, the consolidation due-check, orphan
scans, migration plans, `doctor` — goes through this module, so that every
read-only connection is opened the same way (the path quoted in its `file:`
URI: a `#` or `?` in the data directory must not cut the path short) and
the "rows due for consolidation" rule is written once.

Nothing here imports `mnemosyne` (its memory module creates a database when
imported) or ever writes to a bank.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import quote

from .. import paths
from ..errors import BusyError, DataError
from ..fsutil import sha256_hex
from ..record import record

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any

BUSY_TIMEOUT_SECONDS = 5.0

# Upstream's working-memory trim and sleep read these (and only these) from
# the environment; their defaults are upstream's.
DEFAULT_TTL_HOURS = 168.0
DEFAULT_MAX_ITEMS = 10_000

# The recallable memories: what a person means by "rows" of a namespace.
MEMORY_TABLES = ("working_memory", "episodic_memory")
# The `source` of a captured conversation turn (`mnemo hook`'s capture,
# imported transcripts): a `[USER] …` or `[ASSISTANT] …` row, not a fact.
TALK_SOURCE = "conversation"
# The `source` of a summary upstream's sleep writes (`episodic_memory`): the
# text of the rows it consolidated, compressed into one line (offline, AAAK:
# "We deploy w/ make release | never by hand. | The CI runs@GitHub Actions…"),
# listed in `summary_of`.  Consolidation is additive, so those rows are still
# there, whole: a summary repeats them, merges unrelated ones, and, for
# captured turns, repeats the user's own questions.
SUMMARY_SOURCE = "sleep_consolidation"
# Rows that are not memories in their own right: a prompt's profile over the
# namespace leaves them out (`semantic.profile_of`), and the prefetch gate
# never injects them (`hook.gate`).
NOT_MEMORY_SOURCES = frozenset([TALK_SOURCE, SUMMARY_SOURCE])


# mnemo's table of standing statements found in captured user turns
# (`memory/standing`).  A candidate holds its turn's statement and, as its
# `digest`, a hash of that statement in its namespace: the link from a turn's
# row to the candidate filed from it, which `driver.delete` follows.
CANDIDATES = "mnemo_candidates"


def candidate_text(content: str) -> str:
    """The statement of a captured user turn's row, as a candidate holds it."""
    return (content[len("[USER]"):] if content.startswith("[USER]") else content).strip()


def candidate_digest(namespace: str, statement: str) -> str:
    """A candidate's `digest`: one statement of a namespace is suggested once."""
    normal = " ".join(statement.lower().split())
    return sha256_hex(f"{namespace}\0{normal}".encode())[:32]


def summary_ids(summary_of: object) -> list[str]:
    """The ids a summary's `summary_of` lists (upstream's comma-separated form)."""
    return [i.strip() for i in str(summary_of or "").split(",") if i.strip()]


# ─── Opening ────────────────────────────────────────────────────────────────

def readonly_uri(db_path: Path, *, immutable: bool = False) -> str:
    """A `file:` URI opening `db_path` read-only, its path percent-quoted."""
    uri = "file:" + quote(str(db_path.absolute()), safe="/") + "?mode=ro"
    return uri + "&immutable=1" if immutable else uri


def connect_readonly(db_path: Path, *, quiet: bool = False,
                     timeout: float = BUSY_TIMEOUT_SECONDS,
                     check_same_thread: bool = True) -> sqlite3.Connection | None:
    """A read-only connection to a bank, or None when the file does not exist.

    Even a read-only reader of a WAL database creates empty `-wal`/`-shm`
    files beside it.  With `quiet`, a file with no `-wal` (no writer has it
    open, nothing awaits a checkpoint) is opened `immutable`, which creates
    nothing; a writer starting meanwhile could make such a read inconsistent,
    so callers re-check a bad verdict without `quiet`.
    """
    if not db_path.exists():
        return None
    immutable = quiet and not Path(f"{db_path}-wal").exists()
    conn = sqlite3.connect(readonly_uri(db_path, immutable=immutable), uri=True,
                           timeout=timeout, check_same_thread=check_same_thread)
    conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
    conn.execute("PRAGMA query_only = 1")
    return conn


# ─── Kept readers ───────────────────────────────────────────────────────────
#
# A new connection parses the bank's schema at its first statement (upstream's
# tables, indexes and triggers: about 0.4 ms), which a prompt paid for every
# read of its recall.  `reader` keeps a few read-only connections per bank for
# the next caller, in any thread (one caller at a time each).  A kept
# connection is only handed out while the path still names the file it opened:
# a bank replaced by a migration, a revert or a restore gets a new one.

READERS_PER_BANK = 2
READER_BANKS = 16
_readers: dict[str, list[tuple[tuple[int, int], sqlite3.Connection]]] = {}
_readers_lock = threading.Lock()
_readers_pid = os.getpid()
# Connections a forked child inherited: never used (SQLite connections must not
# cross a fork) and never closed there (the parent's are the same), only kept.
_inherited: list[sqlite3.Connection] = []


def _pool() -> dict[str, list[tuple[tuple[int, int], sqlite3.Connection]]]:
    """The kept readers of this process (call with `_readers_lock` held)."""
    global _readers_pid
    if _readers_pid != os.getpid():
        _inherited.extend(c for pool in _readers.values() for _, c in pool)
        _readers.clear()
        _readers_pid = os.getpid()
    return _readers


@contextmanager
def reader(db_path: Path) -> Iterator[sqlite3.Connection | None]:
    """A read-only connection to a bank for the block (None when there is no file)."""
    key = str(db_path)
    try:
        info = os.stat(key)
    except OSError:
        yield None
        return
    identity = (info.st_dev, info.st_ino)
    conn: sqlite3.Connection | None = None
    stale: list[sqlite3.Connection] = []
    with _readers_lock:
        idle = _pool().get(key, [])
        while idle and conn is None:
            kept_identity, kept = idle.pop()
            if kept_identity == identity:
                conn = kept
            else:
                stale.append(kept)
    for old in stale:
        old.close()
    if conn is None:
        conn = connect_readonly(db_path, check_same_thread=False)
        if conn is None:
            yield None
            return
    try:
        yield conn
    except BaseException:
        conn.close()  # whatever went wrong, this connection is not kept
        raise
    if conn.in_transaction:
        conn.close()
        return
    evicted: list[sqlite3.Connection] = []
    with _readers_lock:
        pool = _pool()
        kept_here = pool.pop(key, [])
        pool[key] = kept_here  # most recently used last
        if len(kept_here) < READERS_PER_BANK:
            kept_here.append((identity, conn))
            conn = None
        while len(pool) > READER_BANKS:
            evicted += [c for _, c in pool.pop(next(iter(pool)))]
    for old in evicted + ([conn] if conn is not None else []):
        old.close()


def close_readers() -> None:
    """Close every kept reader (tests)."""
    with _readers_lock:
        pool = _pool()
        kept = [c for connections in pool.values() for _, c in connections]
        pool.clear()
    for conn in kept:
        conn.close()


@contextmanager
def translate_sqlite_errors(db_path: Path) -> Iterator[None]:
    """SQLite's errors as mnemo's: a lock that stayed is busy, anything else bad data."""
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


def attach_readonly(conn: sqlite3.Connection, db_path: Path, alias: str) -> None:
    """Attach `db_path` read-only to `conn` under `alias`."""
    if not alias.isidentifier():
        raise ValueError(f"bad schema alias {alias!r}")
    conn.execute(f"ATTACH DATABASE ? AS {alias}", (readonly_uri(db_path),))


def quote_name(name: str) -> str:
    """An SQLite identifier (a table or column name), quoted for a statement."""
    return '"' + name.replace('"', '""') + '"'


def column_names(conn: sqlite3.Connection, table: str) -> list[str]:
    """The columns of `table` in `conn`'s main schema, in order ([] when there is no such table)."""
    return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({quote_name(table)})")]


def count(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...] = ()) -> int:
    """The first column of the first row; 0 when the table does not exist yet."""
    try:
        return int(conn.execute(sql, args).fetchone()[0] or 0)
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return 0
        raise


def rows(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...] = ()
         ) -> list[tuple[Any, ...]]:
    """All rows; none when the table does not exist yet."""
    try:
        return list(conn.execute(sql, args))
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise


# ─── Listing ───────────────────────────────────────────────────────────────

def bank_files(base: Path | None = None) -> list[tuple[str, Path]]:
    """Every bank with a database on disk: `default`, then the named banks."""
    found: list[tuple[str, Path]] = []
    default = paths.default_db_path(base)
    if default.is_file():
        found.append(("default", default))
    root = paths.banks_dir(base)
    if root.is_dir():
        for child in sorted(root.iterdir()):
            db = child / paths.DEFAULT_DB_FILE
            if db.is_file():
                found.append((child.name, db))
    return found


def bank_names(base: Path | None = None) -> list[str]:
    return [name for name, _ in bank_files(base)]


# ─── Consolidation age ─────────────────────────────────────────────────────

def ttl_hours() -> float:
    """Upstream's working-memory TTL (`MNEMOSYNE_WM_TTL_HOURS`)."""
    try:
        return float(os.environ.get("MNEMOSYNE_WM_TTL_HOURS") or DEFAULT_TTL_HOURS)
    except ValueError:
        return DEFAULT_TTL_HOURS


def max_items() -> int:
    """Upstream's working-memory cap per session (`MNEMOSYNE_WM_MAX_ITEMS`)."""
    try:
        return int(os.environ.get("MNEMOSYNE_WM_MAX_ITEMS") or DEFAULT_MAX_ITEMS)
    except ValueError:
        return DEFAULT_MAX_ITEMS


def sleep_cutoff(now: datetime | None = None) -> str:
    """Upstream's sleep eligibility cutoff: naive local time, TTL/2 ago."""
    now = now or datetime.now()
    return (now - timedelta(hours=int(ttl_hours()) // 2)).isoformat()


def age_cutoff(hours: float, now: datetime | None = None) -> str:
    return ((now or datetime.now()) - timedelta(hours=hours)).isoformat()


# A row is *due* when sleep would consolidate it: unconsolidated, not
# pinned, older than the cutoff.  Upstream's trim deletes such rows once
# they pass the TTL, so this is also "at risk".
_DUE_WHERE = ("timestamp < ? AND consolidated_at IS NULL AND (pinned IS NULL OR pinned = 0)")


def due_counts(conn: sqlite3.Connection, cutoff: str,
               namespace: str | None = None) -> dict[str, int]:
    """Due working-memory rows per namespace (only `namespace`, when given)."""
    where = _DUE_WHERE
    args: tuple[Any, ...] = (cutoff,)
    if namespace is not None:
        where += " AND session_id = ?"
        args += (namespace,)
    sql = (f"SELECT COALESCE(session_id, 'default'), COUNT(*) FROM working_memory "
           f"WHERE {where} GROUP BY 1")
    try:
        found = rows(conn, sql, args)
    except sqlite3.OperationalError as exc:
        if "no such column" not in str(exc):
            raise
        # Schemas older than upstream's consolidation columns: nothing was
        # ever consolidated or pinned there, so every old row is due.
        legacy = "timestamp < ?" + (" AND session_id = ?" if namespace is not None else "")
        found = rows(conn, f"SELECT COALESCE(session_id, 'default'), COUNT(*) "
                           f"FROM working_memory WHERE {legacy} GROUP BY 1", args)
    return {str(ns): int(n) for ns, n in found if n}


def due_namespaces(bank: str, base: Path | None = None,
                   cutoff: str | None = None) -> dict[str, int]:
    """Namespaces of a bank with rows sleep would consolidate (one cheap query)."""
    conn = connect_readonly(paths.bank_db_path(bank, base))
    if conn is None:
        return {}
    try:
        return due_counts(conn, cutoff or sleep_cutoff())
    finally:
        conn.close()


def due_count(bank: str, namespace: str, base: Path | None = None) -> int:
    db_path = paths.bank_db_path(bank, base)
    with translate_sqlite_errors(db_path):  # a damaged bank: DataError, not a crash
        conn = connect_readonly(db_path)
        if conn is None:
            return 0
        try:
            return due_counts(conn, sleep_cutoff(), namespace).get(namespace, 0)
        finally:
            conn.close()


# ─── Statistics ────────────────────────────────────────────────────────────

@record
class NamespaceStats:
    bank: str
    namespace: str
    working: int = 0
    working_consolidated: int = 0
    working_unconsolidated: int = 0
    episodic: int = 0
    legacy: int = 0  # upstream's legacy `memories` table
    due: int = 0
    rows: int = 0  # memories: working + episodic
    all_rows: int = 0  # every row carrying this session_id, in any table
    first: str | None = None
    last: str | None = None


def session_tables(conn: sqlite3.Connection) -> list[str]:
    """Tables of the bank that carry a `session_id` column."""
    found = []
    for (name,) in rows(conn, "SELECT name FROM sqlite_master WHERE type = 'table' "
                              "AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name"):
        if "session_id" in column_names(conn, str(name)):
            found.append(str(name))
    return found


def namespace_stats(bank: str, namespaces: list[str] | None = None,
                    base: Path | None = None, *, db_path: Path | None = None
                    ) -> dict[str, NamespaceStats]:
    """Per-namespace counts of one bank, read-only (all namespaces when None).

    A namespace asked for but absent is returned with zero counts.
    """
    db_path = db_path or paths.bank_db_path(bank, base)
    stats: dict[str, NamespaceStats] = {
        ns: NamespaceStats(bank=bank, namespace=ns) for ns in namespaces or []}
    conn = connect_readonly(db_path)
    if conn is None:
        return stats

    def entry(ns: Any) -> NamespaceStats | None:
        key = "default" if ns is None else str(ns)
        if namespaces is not None and key not in stats:
            return None
        return stats.setdefault(key, NamespaceStats(bank=bank, namespace=key))

    where, args = "", ()
    if namespaces is not None:
        if not namespaces:
            conn.close()
            return stats
        where = f" WHERE session_id IN ({','.join('?' * len(namespaces))})"
        args = tuple(namespaces)
    try:
        with translate_sqlite_errors(db_path):
            for table in session_tables(conn):
                timed = table in MEMORY_TABLES
                select, table_args = "session_id, COUNT(*)", args
                if timed:
                    select += ", MIN(timestamp), MAX(timestamp)"
                if table == "working_memory":
                    select += f", SUM(consolidated_at IS NOT NULL), SUM({_DUE_WHERE})"
                    table_args = (sleep_cutoff(), *args)
                for row in rows(conn, f'SELECT {select} FROM "{table}"{where} GROUP BY session_id',
                                table_args):
                    s = entry(row[0])
                    if s is None:
                        continue
                    s.all_rows += row[1]
                    if table == "memories":
                        s.legacy = row[1]
                    if not timed:
                        continue
                    s.rows += row[1]
                    first, last = row[2], row[3]
                    if first is not None and (s.first is None or str(first) < s.first):
                        s.first = str(first)
                    if last is not None and (s.last is None or str(last) > s.last):
                        s.last = str(last)
                    if table == "working_memory":
                        s.working = row[1]
                        s.working_consolidated = row[4] or 0
                        s.working_unconsolidated = s.working - s.working_consolidated
                        s.due = row[5] or 0
                    else:
                        s.episodic = row[1]
    finally:
        conn.close()
    return stats
