"""Which namespaces a database holds, with row counts and first/last times."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from .schema import SESSION_COLUMN, discover, quote

# The recallable memories: what a person means by "rows" of a namespace.
MEMORY_TABLES = ("working_memory", "episodic_memory")


@dataclass
class NamespaceStats:
    namespace: str
    rows: int  # memories (working + episodic)
    all_rows: int  # every row with this session_id, in any table
    first: str | None
    last: str | None


def open_readonly(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    conn.execute("PRAGMA busy_timeout=10000")
    return conn


def namespace_stats(db_path: Path) -> dict[str, NamespaceStats]:
    """Per session_id of `db_path`: memories, all rows, first and last timestamps."""
    if not db_path.exists():
        return {}
    try:
        conn = open_readonly(db_path)
    except sqlite3.Error:
        return {}
    stats: dict[str, NamespaceStats] = {}
    try:
        schema = discover(conn)
        for table in schema.tables.values():
            if not table.has(SESSION_COLUMN):
                continue
            memory = table.name in MEMORY_TABLES
            tcol = quote(table.time_column) if (memory and table.time_column) else "NULL"
            for sid, count, first, last in conn.execute(
                    f"SELECT session_id, count(*), min({tcol}), max({tcol}) "
                    f"FROM {quote(table.name)} GROUP BY session_id"):
                if sid is None:
                    continue
                entry = stats.setdefault(str(sid), NamespaceStats(str(sid), 0, 0, None, None))
                entry.all_rows += count
                if memory:
                    entry.rows += count
                    if first is not None and (entry.first is None or str(first) < entry.first):
                        entry.first = str(first)
                    if last is not None and (entry.last is None or str(last) > entry.last):
                        entry.last = str(last)
    except sqlite3.Error:
        return stats
    finally:
        conn.close()
    return stats


def is_legacy_dsh(session_id: str) -> bool:
    """The old DSH plugin's per-conversation rows: `dsh_*` but never `dsh_v2_*` (C1)."""
    return session_id.startswith("dsh_") and not session_id.startswith("dsh_v2_")
