"""Inspection helpers of the memory tests (storage, consolidate, CLI, leaks, e2e).

Everything here inspects the SQLite files directly with plain `sqlite3`, so
the tests check what is really on disk rather than what mnemo reports.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from dsh_mnemo import paths
from dsh_mnemo.cli import app

# Every table that can hold a memory row by id, and carries a session_id.
ROW_TABLES = ("working_memory", "episodic_memory", "memories")


_runner = CliRunner()


def mnemo(*args: str, cwd: Path | None = None, input: str | bytes | None = None) -> Result:
    """Run `mnemo ARGS` in process from `cwd`."""
    old = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        return _runner.invoke(app, list(args), input=input)
    finally:
        os.chdir(old)


# ─── Looking at the files ──────────────────────────────────────────────────

def query(db: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Rows of `sql` against `db`; [] when the file or table does not exist."""
    if not db.exists():
        return []
    conn = sqlite3.connect(db, timeout=5)
    try:
        return [tuple(r) for r in conn.execute(sql, args)]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    finally:
        conn.close()


def db_files(data_dir: Path) -> dict[str, Path]:
    """Every bank file on disk, by bank name."""
    found = {}
    if paths.default_db_path(data_dir).exists():
        found["default"] = paths.default_db_path(data_dir)
    root = paths.banks_dir(data_dir)
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if (child / paths.DEFAULT_DB_FILE).exists():
                found[child.name] = child / paths.DEFAULT_DB_FILE
    return found


def locate(data_dir: Path, memory_id: str) -> list[tuple[str, str, str | None, str | None]]:
    """Every (bank, table, session_id, scope) holding `memory_id`."""
    hits = []
    for bank, db in db_files(data_dir).items():
        for table in ROW_TABLES:
            scope_col = "NULL" if table == "memories" else "scope"
            for session_id, scope in query(
                    db, f"SELECT session_id, {scope_col} FROM {table} WHERE id = ?", memory_id):
                hits.append((bank, table, session_id, scope))
    return hits


def row_snapshot(data_dir: Path, memory_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """Full rows of `memory_id` in every bank and table, to prove 'untouched'."""
    snap = {}
    for bank, db in db_files(data_dir).items():
        for table in ROW_TABLES:
            rows = query(db, f"SELECT * FROM {table} WHERE id = ?", memory_id)
            if rows:
                snap[f"{bank}:{table}"] = rows
    return snap


def content_anywhere(data_dir: Path, needle: str) -> list[tuple[str, str]]:
    """(bank, table) pairs where any row's content contains `needle`."""
    hits = []
    for bank, db in db_files(data_dir).items():
        for table in ROW_TABLES:
            if query(db, f"SELECT 1 FROM {table} WHERE instr(content, ?) > 0", needle):
                hits.append((bank, table))
    return hits


def working_count(db: Path, namespace: str | None = None) -> int:
    if namespace is None:
        return query(db, "SELECT COUNT(*) FROM working_memory")[0][0] if db.exists() else 0
    rows = query(db, "SELECT COUNT(*) FROM working_memory WHERE session_id = ?", namespace)
    return rows[0][0] if rows else 0


def age_rows(db: Path, namespace: str, hours: float, ids: list[str] | None = None) -> int:
    """Move working rows of `namespace` `hours` into the past (naive local time, as upstream)."""
    stamp = (datetime.now() - timedelta(hours=hours)).isoformat()
    conn = sqlite3.connect(db, timeout=5)
    try:
        if ids is None:
            cur = conn.execute("UPDATE working_memory SET timestamp = ? WHERE session_id = ?",
                               (stamp, namespace))
        else:
            marks = ",".join("?" * len(ids))
            cur = conn.execute(
                f"UPDATE working_memory SET timestamp = ? WHERE session_id = ? "
                f"AND id IN ({marks})", (stamp, namespace, *ids))
        conn.commit()
        return cur.rowcount
    finally:
        conn.close()


@contextmanager
def hold_flock(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on `path` (as a concurrent mnemo process would)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)


def db_digest(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every ordinary table (FTS shadow tables included): to prove 'wrote nothing'."""
    conn = sqlite3.connect(db, timeout=5)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name")]
        return {t: sorted(map(tuple, conn.execute(f'SELECT * FROM "{t}"')), key=repr)
                for t in tables}
    finally:
        conn.close()
