"""The cold path through upstream: its import, a bank's open, its connections, threads.

A bank whose schema upstream's full DDL already built is opened without that
DDL (its fingerprint, stored in the bank, still matches); any difference in
the schema, in upstream's code or release runs the DDL again, and so does a
bank the DDL left short.  Statements are counted on the real connections
upstream opens: `sqlite3.connect` is wrapped to trace each one, the
`mnemosyne` package itself is untouched.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dsh_mnemo import paths
from dsh_mnemo.errors import DataError
from dsh_mnemo.memory import driver, upstream_import
from dsh_mnemo.memory.targets import Target
from tests.conftest import REPO_ROOT
from tests.memory.conftest import query

DDL = ("CREATE", "ALTER", "DROP")
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "BEGIN IMMEDIATE")


def target(n: int = 0) -> Target:
    return Target(bank=f"ws-{n:048x}", namespace=f"ns-{n}", level="workspace")


class Statements:
    """Every statement run on a connection to `db`, by every connection opened meanwhile."""

    def __init__(self, db: Path) -> None:
        self.db = str(db)
        self.seen: list[str] = []
        # Statements containing this fail with "database is locked", as under
        # another writer that held the bank past the busy timeout.
        self.locked: str | None = None

    def ddl(self) -> list[str]:
        return [s for s in self.seen if s.lstrip().upper().startswith(DDL)]

    def writes(self) -> list[str]:
        return [s for s in self.seen if s.lstrip().upper().startswith(WRITES)]

    def clear(self) -> None:
        self.seen.clear()


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path], Statements]]:
    watching: list[Statements] = []
    real_connect = sqlite3.connect

    def connect(database, *args, **kwargs):  # type: ignore[no-untyped-def]
        watch = next((w for w in watching if str(database) == w.db), None)
        if watch is None:
            return real_connect(database, *args, **kwargs)

        class Cursor(sqlite3.Cursor):
            def execute(self, sql, *params):  # type: ignore[no-untyped-def]
                if watch.locked and watch.locked in sql:
                    raise sqlite3.OperationalError("database is locked")
                return super().execute(sql, *params)

        class Connection(kwargs.pop("factory", sqlite3.Connection)):  # type: ignore[misc]
            def cursor(self, factory=Cursor):  # type: ignore[no-untyped-def]
                return super().cursor(factory)

        conn = real_connect(database, *args, factory=Connection, **kwargs)
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


def reopens_without_ddl(seen: Statements, t: Target) -> bool:
    """Does the next process's open of `t` run none of upstream's DDL?"""
    seen.clear()
    reopen(t)
    return seen.ddl() == []


def stored_fingerprint(db: Path) -> list[tuple[str, str]]:
    return query(db, "SELECT key, value FROM mnemo_meta")


def columns(db: Path, table: str) -> set[str]:
    return {r[1] for r in query(db, f"PRAGMA table_info({table})")}


# ─── Skipping the DDL ──────────────────────────────────────────────────────

def test_the_second_open_of_a_bank_runs_no_ddl(traced) -> None:
    t = target()
    db = t.db_path()
    seen = traced(db)
    driver.instance(t)
    assert len(seen.ddl()) > 100  # upstream's whole DDL, the first time
    assert [key for key, _ in stored_fingerprint(db)] == ["upstream_schema"]

    assert reopens_without_ddl(seen, t)
    assert seen.writes() == []  # and no write at all
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
    assert reopens_without_ddl(seen, t)


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
    assert "binary_vector" in columns(db, "episodic_memory")
    assert reopens_without_ddl(seen, t)


def test_a_ddl_error_upstream_swallows_leaves_no_fingerprint(traced) -> None:
    """Upstream ignores a failed `ALTER TABLE … ADD COLUMN`: the next open must retry it."""
    t = target()
    db = t.db_path()
    seen = traced(db)
    seen.locked = "ADD COLUMN degraded_at"  # upstream: `except sqlite3.OperationalError: pass`
    driver.instance(t)
    assert "degraded_at" not in columns(db, "episodic_memory")  # the DDL left it short
    assert "tier" in columns(db, "episodic_memory")  # and went on
    assert stored_fingerprint(db) == []

    seen.locked = None
    seen.clear()
    reopen(t)
    assert len(seen.ddl()) > 100
    assert "degraded_at" in columns(db, "episodic_memory")
    assert [key for key, _ in stored_fingerprint(db)] == ["upstream_schema"]
    assert reopens_without_ddl(seen, t)


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
    assert reopens_without_ddl(seen, t)


def test_other_upstream_code_under_the_same_version_runs_the_ddl(traced, monkeypatch) -> None:
    """A patched or development install keeps the version: the source is hashed too."""
    t = target()
    db = t.db_path()
    driver.instance(t)
    real = driver._upstream().code_digest()
    assert real is not None and len(real) == 64
    seen = traced(db)
    monkeypatch.setattr(driver._Upstream, "code_digest", lambda self: "0" * 64)
    reopen(t)
    assert len(seen.ddl()) > 100


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


def test_a_removed_bank_is_built_anew_and_a_damaged_one_is_refused(traced) -> None:
    t = target()
    db = t.db_path()
    driver.instance(t)
    driver.reset_cache()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    seen = traced(db)
    reopen(t)
    assert len(seen.ddl()) > 100
    assert driver.remember(t, "The new bank has a schema again.", source="user", importance=0.5)
    driver.reset_cache()
    size = db.stat().st_size
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"\xde\xad" * (size // 2))  # overwritten: no longer a database
    with pytest.raises(DataError):
        reopen(t)


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


# ─── Connections and threads ───────────────────────────────────────────────

def test_new_banks_opened_by_many_threads_at_once_all_open() -> None:
    """Upstream's DDL looks for a column, then adds it: eight opens of a new bank at
    once (the server's threads, or processes) each added it, and all but the first
    failed with "duplicate column name" (a store or recall lost to a bank's first
    open).  Each open builds the schema in turn; the later ones find it built."""
    driver.instance(target(99))  # upstream imported before the race, as in a warm process
    failures: list[str] = []
    for n in range(8):
        t = target(n)
        start = threading.Barrier(8)

        def work(t: Target = t, start: threading.Barrier = start) -> None:
            start.wait(30)
            try:
                driver.instance(t)
                driver.remember(t, f"Thread {threading.get_ident()} wrote this.",
                                source="user", importance=0.5)
            except Exception as exc:  # noqa: BLE001 - collected, then asserted
                failures.append(f"bank {t.bank}: {exc}")

        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        db = t.db_path()
        assert query(db, "SELECT COUNT(*) FROM working_memory") == [(8,)], failures
        assert [key for key, _ in stored_fingerprint(db)] == ["upstream_schema"]
    assert failures == []



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
    done = threading.Event()
    go = threading.Event()

    def work() -> None:
        theirs["memory"] = driver.instance(t)
        theirs["id"] = driver.remember(t, "The worker thread writes this line.", source="user",
                                       importance=0.5)
        theirs["hits"] = [r["id"] for r in driver.recall(t, "worker thread", top_k=5)]
        done.set()
        go.wait(10)

    thread = threading.Thread(target=work)
    thread.start()
    assert done.wait(30)
    assert theirs["memory"] is not mine
    assert theirs["memory"].conn is not mine.conn
    assert theirs["memory"].beam.conn is not mine.beam.conn
    assert theirs["hits"] == [theirs["id"]]
    assert driver.open_banks() == 1  # one bank file (the server's banks_open) ...
    assert driver.open_instances() == 2  # ... open on two threads
    assert [r["id"] for r in driver.recall(t, "worker thread", top_k=5)] == [theirs["id"]]
    go.set()
    thread.join(10)
    gc.collect()
    assert driver.open_instances() == 1  # a finished thread's banks close with it
    with pytest.raises(sqlite3.ProgrammingError):
        theirs["memory"].conn.execute("SELECT 1")
    assert mine.conn.execute("SELECT 1").fetchone()[0] == 1


def test_deferred_recall_tracking_across_threads() -> None:
    """main's read-only recall: the bumps are kept, then applied (here on another thread)."""
    t = target()
    db = t.db_path()
    memory_id = driver.remember(t, "The parser rejects tabs in YAML keys.", source="user",
                                importance=0.5)
    reopen(t)  # a fast open
    tracking: list[object] = []
    hits = driver.recall(t, "parser tabs YAML", top_k=5, tracking=tracking)
    assert [h["id"] for h in hits] == [memory_id]
    assert tracking
    assert query(db, "SELECT recall_count FROM working_memory WHERE id = ?", memory_id) == [(0,)]
    applied: list[int] = []
    worker = threading.Thread(target=lambda: applied.append(driver.record_recalls(tracking)))
    worker.start()
    worker.join(30)
    assert applied == [len(tracking)]
    assert query(db, "SELECT recall_count FROM working_memory WHERE id = ?", memory_id) == [(1,)]
    driver.recall(t, "parser tabs YAML", top_k=5)  # without tracking: upstream bumps itself
    assert query(db, "SELECT recall_count FROM working_memory WHERE id = ?", memory_id) == [(2,)]


def test_a_thread_keeps_a_bounded_number_of_banks(monkeypatch) -> None:
    monkeypatch.setattr(driver, "MAX_BANKS_PER_THREAD", 2)
    first, second, third = (driver.instance(target(n)) for n in range(3))
    assert driver.open_instances() == 2 and driver.open_banks() == 2
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


# ─── Importing upstream ────────────────────────────────────────────────────

def test_throwaway_databases_redirect_only_this_thread(tmp_path: Path) -> None:
    mine, theirs = tmp_path / "mine.db", tmp_path / "theirs.db"
    other: list[sqlite3.Connection] = []
    with driver._throwaway_databases() as redirected:
        here = sqlite3.connect(mine)
        here.execute("CREATE TABLE t (a)")
        worker = threading.Thread(target=lambda: other.append(
            sqlite3.connect(theirs, check_same_thread=False)))
        worker.start()
        worker.join(10)
        other[0].execute("CREATE TABLE t (a)")
    here.close()
    other[0].close()
    assert redirected == [str(mine)]
    assert not mine.exists() and theirs.exists()
    sqlite3.connect(mine).close()
    assert mine.exists()  # the wrapper is gone


def test_a_skipped_import_fails_on_this_thread_only() -> None:
    name = "colorsys"  # any module nobody imported yet
    sys.modules.pop(name, None)
    skip = upstream_import._SkipOnThread(frozenset({name}))
    sys.meta_path.insert(0, skip)
    try:
        with pytest.raises(ImportError):
            importlib.import_module(name)
        elsewhere: list[object] = []
        worker = threading.Thread(target=lambda: elsewhere.append(importlib.import_module(name)))
        worker.start()
        worker.join(10)
        assert elsewhere and elsewhere[0].__name__ == name
    finally:
        sys.meta_path.remove(skip)


IMPORT_PROBE = textwrap.dedent("""
    import importlib, json, sqlite3, sys
    from dsh_mnemo import paths
    paths.prepare_mnemosyne_environment()
    data = str(paths.data_dir())
    seen = []
    real_connect = sqlite3.connect

    def connect(database, *args, **kwargs):
        seen.append(str(database))
        return real_connect(database, *args, **kwargs)

    sqlite3.connect = connect
    from dsh_mnemo.memory.scrub import scrub
    scrub("password=hunter2hunter2")  # the first import of upstream, on a write path
    loaded = {name: name in sys.modules for name in ("ssl", "urllib.request", "mcp", "numpy")}
    from dsh_mnemo.memory import driver
    from dsh_mnemo.memory.targets import Target
    t = Target(bank="ws-" + "c" * 48, namespace="ns", level="workspace")
    driver.remember(t, "We deploy with make release from main.", source="user", importance=0.5)
    hits = driver.recall(t, "make release", top_k=5)
    loaded = {name: loaded[name] or name in sys.modules for name in loaded}
    from mnemosyne.core import binary_vectors, embeddings, memory
    # numpy as upstream holds it: the real module the moment it is used; an
    # annotation read while it was deferred still checks against the real class.
    numpy_type = type(embeddings.np.zeros(2))
    annotation = binary_vectors.BinaryVectorStore.store_vector.__annotations__["embedding"]
    numpy_ok = [numpy_type is importlib.import_module("numpy").ndarray,
                isinstance(embeddings.np.zeros(2), annotation),
                not isinstance([0.0, 1.0], annotation)]
    # What was deferred still works, and is the real thing.
    same = [embeddings.urllib.request.Request
            is importlib.import_module("urllib.request").Request,
            embeddings.ssl.create_default_context
            is importlib.import_module("ssl").create_default_context,
            embeddings.urllib.error.HTTPError
            is importlib.import_module("urllib.error").HTTPError]
    import mcp  # mnemo's MCP server still imports the SDK afterwards
    print(json.dumps({"hits": len(hits), "loaded": loaded, "same": same, "mcp": mcp.__name__,
                      "numpy": numpy_ok,
                      "connected": seen, "default": str(memory._default_db_path()),
                      "cached": getattr(memory._thread_local, "conn", None) is not None}))
""")


def test_importing_upstream_creates_nothing_and_defers_what_mnemo_does_not_use(
        data_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}  # this tree, not an installed mnemo
    done = subprocess.run([sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["hits"] == 1
    assert seen["loaded"] == {"ssl": False, "urllib.request": False, "mcp": False,
                              "numpy": False}
    assert seen["same"] == [True, True, True]
    assert seen["numpy"] == [True, True, True]
    assert seen["mcp"] == "mcp"
    default = paths.default_db_path(data_dir)
    assert seen["default"] == str(default)
    # The import-time init ran on a throwaway database: the default bank was
    # never connected to, never created, and no stale connection is cached.
    assert str(default) not in seen["connected"], seen["connected"]
    assert ":memory:" in seen["connected"]
    assert not default.exists()
    assert not seen["cached"]
    assert query(Target(bank="ws-" + "c" * 48, namespace="ns", level="workspace").db_path(
        data_dir), "SELECT COUNT(*) FROM working_memory") == [(1,)]


def test_a_transaction_left_open_is_rolled_back_and_frees_the_bank(data_dir: Path) -> None:
    """What the resident server runs after every job: no kept connection holds the lock."""
    t = target(7)
    driver.remember(t, "the build uses make", source="fact", importance=0.5)
    memory = driver.instance(t)
    memory.conn.execute("UPDATE working_memory SET importance = 0.9")  # opens a transaction
    assert memory.conn.in_transaction
    other = sqlite3.connect(t.db_path(), timeout=0)
    with pytest.raises(sqlite3.OperationalError):
        other.execute("BEGIN IMMEDIATE")  # the kept connection holds the write lock
    assert driver.end_open_transactions() == [t.bank]
    assert not memory.conn.in_transaction
    other.execute("BEGIN IMMEDIATE")
    other.rollback()
    other.close()
    assert driver.end_open_transactions() == []
    assert query(t.db_path(), "SELECT importance FROM working_memory")[0][0] == 0.5


def test_numpy_already_imported_or_missing_is_left_as_it_is() -> None:
    """With numpy imported before upstream, upstream gets numpy itself; with numpy not
    importable, upstream sees the ImportError it handles (its `np` is None)."""
    probe = textwrap.dedent("""
        import json, sys
        if sys.argv[1] == "missing":
            sys.modules["numpy"] = None
        else:
            import numpy
        from dsh_mnemo.memory.upstream_import import quiet_upstream_import
        with quiet_upstream_import():
            from mnemosyne.core import embeddings
        np = embeddings.np
        print(json.dumps(None if np is None else np is sys.modules["numpy"]))
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    for case, expected in (("imported", True), ("missing", None)):
        done = subprocess.run([sys.executable, "-c", probe, case], capture_output=True,
                              text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == expected, case


def test_the_numpy_stand_in_nests_and_is_removed_when_the_last_import_ends() -> None:
    probe = textwrap.dedent("""
        import builtins, json, sys, threading
        from dsh_mnemo.memory.upstream_import import _numpy
        original = builtins.__import__
        seen = [_numpy.enter(), builtins.__import__ != original]
        ready, release = threading.Event(), threading.Event()

        def other():
            _numpy.enter()
            ready.set()
            release.wait(10)
            _numpy.leave()

        worker = threading.Thread(target=other)
        worker.start()
        ready.wait(10)
        _numpy.leave()  # the other thread still imports: the hook stays
        seen.append(builtins.__import__ != original)
        release.set()
        worker.join(10)
        seen.append(builtins.__import__ == original)
        import numpy  # a module other than upstream's gets numpy itself
        seen.append(type(numpy) is type(sys) and "numpy" in sys.modules)
        print(json.dumps(seen))
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [True, True, True, True, True]


def test_a_variable_upstream_cannot_read_at_import_is_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # One `config.UPSTREAM_NUMBERS` does not list (a later upstream's): the
    # ValueError its import raises quotes the value, which names the variable.
    from dsh_mnemo.errors import ConfigError

    def failing() -> None:
        raise ValueError("invalid literal for int() with base 10: 'lots'")

    monkeypatch.setattr(driver, "_import_upstream", failing)
    monkeypatch.setenv("MNEMOSYNE_SOME_NEW_LIMIT", "lots")
    with pytest.raises(ConfigError) as caught:
        driver._import_checked()
    assert "MNEMOSYNE_SOME_NEW_LIMIT" in caught.value.message
    assert caught.value.hint and "unset MNEMOSYNE_SOME_NEW_LIMIT" in caught.value.hint
    monkeypatch.delenv("MNEMOSYNE_SOME_NEW_LIMIT")
    with pytest.raises(ValueError):  # not a variable's: a bug, shown as one
        driver._import_checked()
