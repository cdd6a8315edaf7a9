"""Consistent snapshots of live SQLite databases (online backup API).

A file copy of a database in WAL mode can miss committed pages that still
sit in the `-wal` file; SQLite's backup API reads through the WAL and yields
a consistent database, and restores the same way into a live file.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from ..errors import BusyError, DataError
from ..fsutil import PRIVATE_DIR, PRIVATE_FILE
from ..memory.banks import readonly_uri

BUSY_MS = 10_000


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), timeout=BUSY_MS / 1000, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
    return conn


def snapshot(database: Path, destination: Path) -> Path:
    """Write a consistent copy of `database` to `destination` (a new file)."""
    if not database.exists():
        raise DataError(f"cannot back up {database}: it does not exist")
    destination.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    partial = destination.with_name(destination.name + ".partial")
    partial.unlink(missing_ok=True)
    # Created private whatever the umask: a snapshot holds every row of its database.
    os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    source = _connect(database)
    try:
        target = sqlite3.connect(str(partial))
        try:
            source.backup(target)
            check = target.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise DataError(f"the backup of {database} failed its integrity check: {check}")
        finally:
            target.close()
    except sqlite3.OperationalError as exc:
        partial.unlink(missing_ok=True)
        if "locked" in str(exc) or "busy" in str(exc):
            raise BusyError(f"{database} stayed busy during the backup",
                            hint="Try again when no harness is writing.") from None
        raise DataError(f"cannot back up {database}: {exc}") from None
    finally:
        source.close()
    # Only a complete, checked snapshot gets its final name.
    partial.replace(destination)
    return destination


def check(snapshot_path: Path, tables: Iterable[str] = ()) -> None:
    """Raise a DataError unless the snapshot is a sound database holding `tables`.

    `PRAGMA quick_check` reads every page, so a truncated or overwritten file
    is refused here rather than halfway through a restore; an empty file
    opens as an empty database, which the table check refuses.
    """
    if not snapshot_path.is_file():
        raise DataError(f"the backup {snapshot_path} is missing")
    try:
        # Immutable: nothing writes a snapshot, and no -wal/-shm appears beside it.
        conn = sqlite3.connect(readonly_uri(snapshot_path, immutable=True), uri=True)
        try:
            problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
            present = {row[0] for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise DataError(f"the backup {snapshot_path} is unreadable: {exc}") from None
    if problems != ["ok"]:
        raise DataError(f"the backup {snapshot_path} is damaged: {problems[0]}")
    absent = sorted(set(tables) - present)
    if absent:
        raise DataError(f"the backup {snapshot_path} lacks the table(s) {', '.join(absent)}")


def restore(snapshot_path: Path, database: Path) -> None:
    """Overwrite the live `database` with the snapshot, through SQLite (one write
    transaction of `database`, which SQLite rolls back on an error)."""
    if not snapshot_path.exists():
        raise DataError(f"the backup {snapshot_path} is missing; cannot restore {database}")
    database.parent.mkdir(parents=True, exist_ok=True)
    source = sqlite3.connect(readonly_uri(snapshot_path), uri=True)
    try:
        target = _connect(database)
        try:
            source.backup(target)
        finally:
            target.close()
    except sqlite3.Error as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise BusyError(f"cannot restore {database}: {exc}",
                            hint="Try again when no harness is writing.") from None
        raise DataError(f"cannot restore {database} from {snapshot_path}: {exc}") from None
    finally:
        source.close()
