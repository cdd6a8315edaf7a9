"""The cold path through upstream: its import, a bank's open, its connections, threads.

A bank whose schema upstream's full DDL already built is opened without that
DDL (its fingerprint, stored in the bank, still matches); any difference in
the schema or in upstream's release runs the DDL again.  Statements are
counted on the real connections upstream opens: `sqlite3.connect` is wrapped
to trace each one, the `mnemosyne` package itself is untouched.
"""

from __future__ import annotations

import gc
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_mnemo import paths
from dsh_mnemo.memory import driver
from dsh_mnemo.memory.targets import Target
from tests.memory.conftest import query

DDL = ("CREATE", "ALTER", "DROP")


def target(n: int = 0) -> Target:
    return Target(bank=f"ws-{n:048x}", namespace=f"ns-{n}", level="workspace")


class Statements:
    """Every statement run on a connection to `db`, by every connection opened meanwhile."""

    def __init__(self, db: Path) -> None:
        self.db = str(db)
        self.seen: list[str] = []

    def ddl(self) -> list[str]:
        return [s for s in self.seen if s.lstrip().upper().startswith(DDL)]

    def clear(self) -> None:
        self.seen.clear()


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[callable]:
    watching: list[Statements] = []
    real_connect = sqlite3.connect

    def connect(database, *args, **kwargs):  # type: ignore[no-untyped-def]
        conn = real_connect(database, *args, **kwargs)
        for watch in watching:
            if str(database) == watch.db:
                conn.set_trace_callback(watch.seen.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)

    def watch(db: Path) -> Statements:
        found = Statements(db)
        watching.append(found)
        return found

    yield watch


def reopen(t: Target) -> object:
    driver.reset_cache()  # as a new process would
    return driver.instance(t)


def stored_fingerprint(db: Path) -> list[tuple[str, str]]:
    return query(db, "SELECT key, value FROM mnemo_meta")


def test_the_second_open_of_a_bank_runs_no_ddl(traced) -> None:
    t = target()
    db = t.db_path()
    seen = traced(db)
    driver.instance(t)
    assert len(seen.ddl()) > 100  # upstream's whole DDL, the first time
    assert [key for key, _ in stored_fingerprint(db)] == ["upstream_schema"]

    seen.clear()
    reopen(t)
    assert seen.ddl() == []
    assert not any(s.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))
                   for s in seen.seen)  # and no write at all
    # Fully working: the write path (filter, extraction tables) and recall.
    memory_id = driver.remember(t, "We deploy with make release from main.", source="user",
                                importance=0.5)
    assert memory_id
    assert [r["id"] for r in driver.recall(t, "make release", top_k=5)] == [memory_id]
    assert query(db, "SELECT COUNT(*) FROM gists WHERE memory_id = ?", memory_id) == [(1,)]


def test_a_bank_missing_an_index_gets_the_ddl_again(traced) -> None:
    t = target()
    db = t.db_path()
    driver.instance(t)
    before = stored_fingerprint(db)
    driver.reset_cache()
    with sqlite3.connect(db) as conn:
        conn.execute("DROP INDEX idx_wm_event_date")  # as an older release left it
    seen = traced(db)
    reopen(t)
    assert any("idx_wm_event_date" in s for s in seen.ddl())
    assert query(db, "SELECT 1 FROM sqlite_master WHERE name = 'idx_wm_event_date'") == [(1,)]
    assert stored_fingerprint(db) == before  # the same schema again
    seen.clear()
    reopen(t)
    assert seen.ddl() == []


def test_a_bank_missing_a_table_and_a_column_gets_them_back(traced) -> None:
    if sqlite3.sqlite_version_info < (3, 35, 0):
        pytest.skip("DROP COLUMN needs SQLite 3.35")
    t = target()
    db = t.db_path()
    driver.instance(t)
    driver.reset_cache()
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE gists")  # created by a store upstream added later
        conn.execute("ALTER TABLE episodic_memory DROP COLUMN binary_vector")
    seen = traced(db)
    reopen(t)
    assert seen.ddl()
    assert query(db, "SELECT name FROM sqlite_master WHERE name = 'gists'") == [("gists",)]
    assert "binary_vector" in {r[1] for r in query(db, "PRAGMA table_info(episodic_memory)")}
    seen.clear()
    reopen(t)
    assert seen.ddl() == []


def test_another_upstream_release_runs_the_ddl(traced, monkeypatch) -> None:
    import mnemosyne

    t = target()
    db = t.db_path()
    driver.instance(t)
    first = stored_fingerprint(db)
    seen = traced(db)
    monkeypatch.setattr(mnemosyne, "__version__", mnemosyne.__version__ + ".post1")
    reopen(t)
    assert len(seen.ddl()) > 100
    assert stored_fingerprint(db) != first  # vouching for the new release now
    seen.clear()
    reopen(t)
    assert seen.ddl() == []


def test_a_foreign_fingerprint_is_not_trusted(traced) -> None:
    t = target()
    db = t.db_path()
    driver.instance(t)
    driver.reset_cache()
    with sqlite3.connect(db) as conn:  # a copy from another bank, a stale row: any mismatch
        conn.execute("UPDATE mnemo_meta SET value = 'something else'")
    seen = traced(db)
    reopen(t)
    assert len(seen.ddl()) > 100
    assert stored_fingerprint(db)[0][1] != "something else"


def test_the_full_ddl_switch(traced, monkeypatch) -> None:
    t = target()
    db = t.db_path()
    driver.instance(t)
    monkeypatch.setenv(driver.FULL_DDL_ENV, "1")
    seen = traced(db)
    reopen(t)
    assert len(seen.ddl()) > 100


def test_a_bank_only_init_bank_touched_gets_the_whole_schema(traced) -> None:
    """init_db alone leaves out the stores' tables: it never records a fingerprint."""
    t = target()
    db = t.db_path()
    driver.init_bank(db)
    assert query(db, "SELECT 1 FROM sqlite_master WHERE name = 'gists'") == []
    assert query(db, "SELECT 1 FROM sqlite_master WHERE name = 'mnemo_meta'") == []
    driver.instance(t)
    assert query(db, "SELECT 1 FROM sqlite_master WHERE name = 'gists'") == [(1,)]


def test_upstreams_connections_are_wal_without_fsync_on_commit() -> None:
    t = target()
    for open_ in (driver.instance, reopen):  # a full open, then a fast one
        opened = open_(t)
        for conn in (opened.conn, opened.beam.conn):
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        # the stores share beam's connection: closing an instance closes all of them
        assert opened.beam.annotations.conn is opened.beam.conn


def test_each_thread_has_its_own_instances() -> None:
    t = target()
    mine = driver.instance(t)
    assert driver.instance(t) is mine
    theirs: dict[str, object] = {}
    go = threading.Event()

    def work() -> None:
        theirs["memory"] = driver.instance(t)
        theirs["id"] = driver.remember(t, "The worker thread writes this line.", source="user",
                                       importance=0.5)
        theirs["hits"] = [r["id"] for r in driver.recall(t, "worker thread", top_k=5)]
        go.wait(10)

    thread = threading.Thread(target=work)
    thread.start()
    while "hits" not in theirs and thread.is_alive():
        thread.join(0.01)
    assert theirs["memory"] is not mine
    assert theirs["memory"].conn is not mine.conn
    assert theirs["hits"] == [theirs["id"]]
    assert driver.open_banks() == 2
    assert [r["id"] for r in driver.recall(t, "worker thread", top_k=5)] == [theirs["id"]]
    go.set()
    thread.join(10)
    gc.collect()
    assert driver.open_banks() == 1  # a finished thread's banks close with it
    with pytest.raises(sqlite3.ProgrammingError):
        theirs["memory"].conn.execute("SELECT 1")


def test_a_thread_keeps_a_bounded_number_of_banks(monkeypatch) -> None:
    monkeypatch.setattr(driver, "MAX_BANKS_PER_THREAD", 2)
    first, second, third = (driver.instance(target(n)) for n in range(3))
    assert driver.open_banks() == 2
    with pytest.raises(sqlite3.ProgrammingError):  # the least recently used, closed
        first.conn.execute("SELECT 1")
    with pytest.raises(sqlite3.ProgrammingError):
        first.beam.conn.execute("SELECT 1")
    assert second.conn.execute("SELECT 1").fetchone()[0] == 1
    again = driver.instance(target(0))
    assert again is not first and again.conn.execute("SELECT 1").fetchone()[0] == 1
    driver.instance(target(2))  # recently used: it stays, target 1 goes
    assert third.conn.execute("SELECT 1").fetchone()[0] == 1
    with pytest.raises(sqlite3.ProgrammingError):
        second.conn.execute("SELECT 1")


def test_close_all_and_reset_cache_close_every_bank() -> None:
    held = [driver.instance(target(n)) for n in range(3)]
    assert driver.open_banks() == 3
    assert driver.close_all() == 3
    assert driver.open_banks() == 0
    for memory in held:
        with pytest.raises(sqlite3.ProgrammingError):
            memory.conn.execute("SELECT 1")
    driver.instance(target(0))
    driver.reset_cache()
    assert driver.open_banks() == 0
    driver.init_bank(target(5).db_path())  # upstream's own per-thread cache is not stale
    assert driver.instance(target(0)).conn.execute("SELECT 1").fetchone()[0] == 1


IMPORT_PROBE = textwrap.dedent("""
    import importlib, json, sqlite3, sys
    from dsh_mnemo import paths
    paths.prepare_mnemosyne_environment()
    default = str(paths.default_db_path())
    seen = []
    real_connect = sqlite3.connect

    def connect(database, *args, **kwargs):
        conn = real_connect(database, *args, **kwargs)
        if str(database) == default:
            conn.set_trace_callback(seen.append)
        return conn

    sqlite3.connect = connect
    from dsh_mnemo.memory import driver
    from dsh_mnemo.memory.targets import Target
    t = Target(bank="ws-" + "c" * 48, namespace="ns", level="workspace")
    driver.remember(t, "We deploy with make release from main.", source="user", importance=0.5)
    hits = driver.recall(t, "make release", top_k=5)
    loaded = {name: name in sys.modules for name in ("ssl", "urllib.request", "mcp")}
    from mnemosyne.core import embeddings
    # What was deferred still works, and is the real thing.
    same = [embeddings.urllib.request.Request
            is importlib.import_module("urllib.request").Request,
            embeddings.ssl.create_default_context
            is importlib.import_module("ssl").create_default_context,
            embeddings.urllib.error.HTTPError
            is importlib.import_module("urllib.error").HTTPError]
    import mcp  # mnemo's MCP server still imports the SDK afterwards
    print(json.dumps({"hits": len(hits), "loaded": loaded, "same": same, "mcp": mcp.__name__,
                      "default_bank": seen}))
""")


def probe() -> dict:
    done = subprocess.run([sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_importing_upstream_defers_what_mnemo_does_not_use(data_dir: Path) -> None:
    seen = probe()
    assert seen["hits"] == 1
    assert seen["loaded"] == {"ssl": False, "urllib.request": False, "mcp": False}
    assert seen["same"] == [True, True, True]
    assert seen["mcp"] == "mcp"


def test_the_import_time_init_runs_once_then_only_reads_the_default_bank(
        data_dir: Path) -> None:
    default = paths.default_db_path(data_dir)
    first = probe()["default_bank"]
    assert len([s for s in first if s.lstrip().upper().startswith(DDL)]) > 50  # it is created
    assert default.exists()
    assert [k for k, _ in query(default, "SELECT key, value FROM mnemo_meta")] == [
        "upstream_init_db"]

    again = probe()["default_bank"]
    assert not any(s.lstrip().upper().startswith(("DROP", "ALTER", "INSERT", "UPDATE",
                                                   "DELETE", "BEGIN", "CREATE TRIGGER",
                                                   "CREATE VIRTUAL"))
                   for s in again), again
    assert len([s for s in again if s.lstrip().upper().startswith("CREATE")]) <= 5

    with sqlite3.connect(default) as conn:  # an older schema: the import upgrades it again
        conn.execute("DROP INDEX idx_wm_event_date")
    upgraded = probe()["default_bank"]
    assert any("idx_wm_event_date" in s for s in upgraded)
    assert query(default, "SELECT 1 FROM sqlite_master WHERE name = 'idx_wm_event_date'") == [
        (1,)]
