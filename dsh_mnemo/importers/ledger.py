"""What `mnemo import` has imported: one digest per turn and role, in `DATA/imports/ledger.db`.

The digest covers where the row went (bank and namespace), where it came
from (source, session id, turn index, role) and the stored text, so the
same turn is never imported twice into one namespace, while a transcript
that grew (a resumed session) contributes only its new turns.  A row the
user later forgets stays in the ledger, so a re-import does not bring it
back.  The ledger is a plain SQLite file beside the banks, never one of
them: losing it costs nothing but the forget memory, because the import
also skips any turn whose exact text the namespace already holds (which is
also how turns the hooks captured live are recognised).

A batch is noted as *pending* (digest and the turn's original time) before
its rows are written, and leaves that list when it is recorded.  An import
killed in between wrote rows that still carry the time of the import: the
next run finds them present, and gives them back their own time.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path

from .. import paths

SCHEMA = """CREATE TABLE IF NOT EXISTS imported (
    digest TEXT PRIMARY KEY,
    bank TEXT NOT NULL,
    namespace TEXT NOT NULL,
    source TEXT NOT NULL,
    session TEXT NOT NULL,
    turn INTEGER NOT NULL,
    role TEXT NOT NULL,
    memory_id TEXT,          -- NULL: the write filter rejected the text
    imported_at INTEGER NOT NULL
)"""
PENDING_SCHEMA = """CREATE TABLE IF NOT EXISTS pending (
    digest TEXT PRIMARY KEY,
    timestamp TEXT NOT NULL  -- the turn's own time, which the written row must get
)"""


def ledger_path(base: Path | None = None) -> Path:
    return (base or paths.data_dir()) / "imports" / "ledger.db"


def digest(bank: str, namespace: str, source: str, session: str, turn: int, role: str,
           content: str) -> str:
    text = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()
    key = "\0".join((bank, namespace, source, session, str(turn), role, text))
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


class Ledger:
    """Read-only until the first `record` (a dry run never creates the file)."""

    def __init__(self, base: Path | None = None) -> None:
        self.path = ledger_path(base)
        self._conn: sqlite3.Connection | None = None
        self._writable = False

    def _open(self, write: bool) -> sqlite3.Connection | None:
        if self._conn is not None and (self._writable or not write):
            return self._conn
        if not write and not self.path.exists():
            return None
        if self._conn is not None:
            self._conn.close()
        if write:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=10.0)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(SCHEMA)
            self._conn.execute(PENDING_SCHEMA)
            self._conn.commit()
        else:
            from ..memory.banks import readonly_uri

            self._conn = sqlite3.connect(readonly_uri(self.path), uri=True, timeout=10.0)
        self._writable = write
        return self._conn

    def has(self, digests: list[str]) -> set[str]:
        return set(self._select("SELECT digest, NULL FROM imported", digests))

    def pending(self, digests: list[str]) -> dict[str, str]:
        """Of `digests`, those of a batch that was being written when its import
        stopped: digest -> the turn's own time."""
        return self._select("SELECT digest, timestamp FROM pending", digests)

    def _select(self, query: str, digests: list[str]) -> dict[str, str]:
        conn = self._open(write=False)
        if conn is None or not digests:
            return {}
        found: dict[str, str] = {}
        try:
            for start in range(0, len(digests), 500):
                chunk = digests[start:start + 500]
                marks = ",".join("?" * len(chunk))
                found.update(conn.execute(f"{query} WHERE digest IN ({marks})", chunk))
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
        return found

    def begin(self, rows: list[tuple[str, str]]) -> None:
        """(digest, the turn's own time) of rows about to be written."""
        if not rows:
            return
        conn = self._open(write=True)
        assert conn is not None
        conn.executemany("INSERT OR REPLACE INTO pending (digest, timestamp) VALUES (?, ?)",
                         rows)
        conn.commit()

    def record(self, rows: list[tuple[str, str, str, str, str, int, str, str | None]]) -> None:
        """(digest, bank, namespace, source, session, turn, role, memory_id) per row."""
        if not rows:
            return
        conn = self._open(write=True)
        assert conn is not None
        stamp = int(time.time() * 1000)
        conn.executemany("INSERT OR IGNORE INTO imported (digest, bank, namespace, source, "
                         "session, turn, role, memory_id, imported_at) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [(*row, stamp) for row in rows])
        conn.executemany("DELETE FROM pending WHERE digest = ?", [(row[0],) for row in rows])
        conn.commit()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
