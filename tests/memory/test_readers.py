"""banks.reader: read-only connections kept between reads, never across a new file or a fork."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_mnemo.memory import banks


@pytest.fixture(autouse=True)
def _no_kept_readers() -> Iterator[None]:
    banks.close_readers()
    yield
    banks.close_readers()


def _bank(path: Path, value: str) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (v TEXT)")
    conn.execute("DELETE FROM t")
    conn.execute("INSERT INTO t VALUES (?)", (value,))
    conn.commit()
    conn.close()
    return path


def _read(path: Path) -> tuple[sqlite3.Connection | None, list[str]]:
    with banks.reader(path) as conn:
        if conn is None:
            return None, []
        return conn, [r[0] for r in conn.execute("SELECT v FROM t")]


def test_a_reader_is_kept_for_the_next_read_in_any_thread(tmp_path: Path) -> None:
    db = _bank(tmp_path / "a.db", "one")
    first, values = _read(db)
    assert values == ["one"]
    again, _ = _read(db)
    assert again is first
    seen: list[object] = []
    worker = threading.Thread(target=lambda: seen.append(_read(db)))
    worker.start()
    worker.join()
    assert seen[0][0] is first and seen[0][1] == ["one"]
    # it is read-only, and sees what a writer commits afterwards
    with pytest.raises(sqlite3.OperationalError):
        first.execute("INSERT INTO t VALUES ('x')")
    _bank(db, "two")
    assert _read(db)[1] == ["two"]


def test_a_replaced_bank_gets_a_new_reader(tmp_path: Path) -> None:
    db = _bank(tmp_path / "a.db", "old")
    kept, _ = _read(db)
    fresh = _bank(tmp_path / "new.db", "new")
    os.replace(fresh, db)  # a migration or a restore that writes a new file
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    conn, values = _read(db)
    assert values == ["new"]
    assert conn is not kept


def test_a_read_that_fails_does_not_keep_its_connection(tmp_path: Path) -> None:
    db = _bank(tmp_path / "a.db", "one")
    with pytest.raises(sqlite3.OperationalError), banks.reader(db) as conn:
        assert conn is not None
        broken = conn
        conn.execute("SELECT nothing FROM nowhere")
    assert _read(db)[0] is not broken


def test_no_file_no_reader(tmp_path: Path) -> None:
    assert _read(tmp_path / "missing.db") == (None, [])
    assert not (tmp_path / "missing.db").exists()


def test_at_most_a_few_readers_per_bank_and_banks_are_bounded(tmp_path: Path) -> None:
    db = _bank(tmp_path / "a.db", "one")
    with banks.reader(db) as a, banks.reader(db) as b, banks.reader(db) as c:
        assert len({id(a), id(b), id(c)}) == 3
    assert len(banks._readers[str(db)]) == banks.READERS_PER_BANK
    for n in range(banks.READER_BANKS + 3):
        _read(_bank(tmp_path / f"b{n}.db", "x"))
    assert len(banks._readers) == banks.READER_BANKS
    assert str(db) not in banks._readers  # the least recently used went first


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_never_uses_its_parents_readers(tmp_path: Path) -> None:
    db = _bank(tmp_path / "a.db", "one")
    parent, _ = _read(db)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report whether it got the parent's connection
        try:
            conn, values = _read(db)
            answer = b"fresh" if conn is not parent and values == ["one"] else b"inherited"
            os.write(write_end, answer)
        finally:
            os._exit(0)
    os.close(write_end)
    answer = os.read(read_end, 64)
    os.close(read_end)
    os.waitpid(pid, 0)
    assert answer == b"fresh"
    assert _read(db)[0] is parent  # the parent's own pool is untouched
