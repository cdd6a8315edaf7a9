"""The only module that drives the `mnemosyne` package.

Everything that needs upstream's own code — its write path (with the write
filter), its recall, its per-session sleep, its forget — calls in here.
Everything that only reads a bank uses `banks` instead, with plain SQLite.

Every hook process pays for its first use of upstream, so this module keeps
that cold path short (docs/upstream.md, "Import and configuration"):

- **Import** (`_upstream`).  `mnemosyne.core.memory` initialises a database
  on its default path (mnemo's default bank) when it is imported, so it is
  imported lazily, once, after `config.apply_environment` has pointed
  `MNEMOSYNE_DATA_DIR` at mnemo's data dir, and that import-time init runs
  on a private in-memory database instead (`_throwaway_databases`): the
  import creates and writes no file.  Upstream's optional `import mcp` is
  skipped and `ssl`/`urllib.request` are loaded when first used instead of
  at import (`quiet_upstream_import`).
- **Schema** (`_open`).  Upstream's constructor runs its whole DDL (about
  130 statements and a schema write) every time.  After a full run that
  left every object a new bank gets (`_pristine`), the bank's schema
  fingerprint is stored in the bank; an open that finds the schema, the
  upstream code and the vector settings still matching constructs
  upstream's objects with the DDL skipped.
- **Durability** (`_tune`).  Upstream's connections are in WAL mode; the
  driver sets `synchronous=NORMAL` on them, so a commit does not wait for
  an fsync.
- **Threads.**  SQLite connections belong to the thread that opened them:
  instances are cached per (bank file, namespace, thread), at most
  `MAX_BANKS_PER_THREAD` per thread, the least recently used closed first.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import sqlite3
import sys
import tempfile
import threading
import types
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import paths
from .banks import (
    BUSY_TIMEOUT_SECONDS,
    CANDIDATES,
    MEMORY_TABLES,
    bank_files,
    candidate_digest,
    candidate_text,
    column_names,
    count,
    rows,
    summary_ids,
    translate_sqlite_errors,
)
from .banks import reader as banks_reader
from .targets import Target
from .upstream_import import quiet_upstream_import

if TYPE_CHECKING:  # pragma: no cover
    from mnemosyne.core.memory import Mnemosyne

# Upstream logs expected events (e.g. "LLM summarization failed ... falling
# back to AAAK" on every offline sleep) as warnings; with no handler they reach
# stderr through logging's last resort, which cron would mail on every run.
# A NullHandler keeps them quiet unless the application configures logging.
logging.getLogger("mnemosyne").addHandler(logging.NullHandler())

#: Upstream instances kept open per thread; the least recently used is closed first.
MAX_BANKS_PER_THREAD = 16
#: `1` runs upstream's full DDL on every open, as before the fingerprint
#: (for benchmarks, and a way out should a fast open ever misbehave).
FULL_DDL_ENV = "MNEMO_DRIVER_FULL_DDL"
#: How long an open waits for another one building the same bank's schema.
SCHEMA_LOCK_SECONDS = 15.0

_META_TABLE = "mnemo_meta"
_FINGERPRINT_KEY = "upstream_schema"
# Part of every fingerprint: bump it whenever what a fingerprint vouches for changes.
_FINGERPRINT_FORMAT = "2"
# The modules holding the DDL `Mnemosyne(...)` runs (`_gate_constructor_ddl`):
# their source is part of the fingerprint, so any change to upstream's code
# (a release, a patched or development install with the same version) runs
# the full DDL once again.
_DDL_MODULES = ("memory", "beam", "triples", "annotations", "canonical", "episodic_graph",
                "veracity_consolidation")
# How long recording a fingerprint waits for a busy bank (it is best effort).
_RECORD_BUSY_MS = 250


def _ensure_environment() -> None:
    if not os.environ.get("MNEMOSYNE_DATA_DIR"):
        # Safety net: never let an import create ~/.hermes.
        paths.prepare_mnemosyne_environment()


# ─── Importing upstream ───────────────────────────────────────────────────


class _Upstream:
    """Upstream's modules, imported once per process (`_upstream`)."""

    def __init__(self, memory: types.ModuleType, beam: types.ModuleType,
                 fast_open: bool) -> None:
        self.memory = memory
        self.beam = beam
        # True when every DDL entry point of the constructor is gated (`_gate`)
        # and upstream's code could be hashed: without that, skipping the DDL
        # could skip only part of it, or vouch for code it never saw.
        self.fast_open = fast_open
        self._code: str | None = None

    def code_digest(self) -> str | None:
        """Hash of the source of upstream's DDL modules; None if one cannot be read."""
        if self._code is None:
            digest = hashlib.sha256()
            for name in _DDL_MODULES:
                module = sys.modules.get(f"mnemosyne.core.{name}")
                origin = getattr(module, "__file__", None)
                if not origin:
                    return None
                try:
                    digest.update(name.encode() + b"\0" + Path(origin).read_bytes() + b"\0")
                except OSError:
                    return None
            self._code = digest.hexdigest()
        return self._code


_imported: _Upstream | None = None
_import_lock = threading.RLock()


def _upstream() -> _Upstream:
    """Import upstream (once, cheaply) and gate its DDL."""
    global _imported
    found = _imported
    if found is None:
        with _import_lock:
            if _imported is None:
                _ensure_environment()
                _imported = _import_checked()
            found = _imported
    return found


def _import_checked() -> _Upstream:
    """`_import_upstream`, with a clear ConfigError instead of the ValueError its
    module-level `int(os.environ[...])` raises on a variable it cannot read."""
    from ..config import check_upstream_environment
    from ..errors import ConfigError

    check_upstream_environment()  # the ones known, by name
    try:
        return _import_upstream()
    except ValueError as exc:  # another one: the message quotes its value
        named = [name for name, value in os.environ.items()
                 if name.startswith("MNEMOSYNE_") and repr(value) in str(exc)]
        if not named:
            raise
        raise ConfigError(f"Mnemosyne cannot read the environment variable {named[0]}: {exc}",
                          hint=f"Fix it, or unset it for Mnemosyne's default: "
                               f"unset {named[0]}") from None


def _import_upstream() -> _Upstream:
    if "mnemosyne.core.memory" in sys.modules:
        # Imported by someone else, its import-time init already run: gate the rest.
        import mnemosyne.core.beam as beam
        import mnemosyne.core.memory as memory

        gated = _gate_constructor_ddl(beam)
        up = _Upstream(memory, beam, _gate(memory, "init_db") and gated)
        return up if up.code_digest() is not None else _Upstream(memory, beam, False)
    with quiet_upstream_import():
        import mnemosyne.core.beam as beam

        # Before `memory` binds beam's `init_beam`, so its import-time init is gated too.
        gated = _gate_constructor_ddl(beam)
        try:
            with _throwaway_databases():
                # The import-time init_db(): on a private in-memory database,
                # where its beam part is not even worth running.
                _ddl.skip, _ddl.failed = gated, False
                try:
                    import mnemosyne.core.memory as memory
                finally:
                    _ddl.skip = False
        finally:
            # Never leave the throwaway connections in upstream's per-thread
            # caches: `_get_connection()` of the default path would return them.
            for module in (beam, sys.modules.get("mnemosyne.core.memory")):
                _drop_module_connection(module, close=True)
    up = _Upstream(memory, beam, _gate(memory, "init_db") and gated)
    return up if up.code_digest() is not None else _Upstream(memory, beam, False)


@contextlib.contextmanager
def _throwaway_databases() -> Iterator[list[str]]:
    """On this thread, `sqlite3.connect` opens a private in-memory database instead.

    For the import of `mnemosyne.core.memory` only: its module-level
    `init_db()` would create (or rewrite the schema of) the default bank,
    `$MNEMOSYNE_DATA_DIR/mnemosyne.db`, with an fsync, in every process,
    though mnemo only ever uses upstream through instances on explicit bank
    files, whose constructor initialises them itself.  Other threads'
    connections are untouched; the wrapper is removed afterwards (unless
    someone replaced `sqlite3.connect` meanwhile, who then owns it).  Yields
    the databases that were redirected.
    """
    real = sqlite3.connect
    me = threading.get_ident()
    redirected: list[str] = []

    @functools.wraps(real)
    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if threading.get_ident() != me:
            return real(database, *args, **kwargs)
        redirected.append(str(database))
        kwargs.pop("uri", None)
        return real(":memory:", *args, **kwargs)

    sqlite3.connect = connect
    try:
        yield redirected
    finally:
        if sqlite3.connect is connect:
            sqlite3.connect = real


# ─── Skipping upstream's DDL ──────────────────────────────────────────────


class _DdlState(threading.local):
    """Per thread: skip upstream's DDL now; did a DDL step fail during this open."""

    skip = False
    failed = False


_ddl = _DdlState()


def _gate(owner: Any, name: str) -> bool:
    """Wrap `owner.name` (a DDL step of upstream) so that `_ddl.skip` skips it.

    The gate is per thread: another thread running the same step meanwhile
    (upstream builds stores outside constructors too) still runs it.  A step
    that raises marks the open failed, even when upstream's caller swallows
    the error, so no fingerprint vouches for a schema it may have left short.
    False when the step is not there (a later release moved it).
    """
    original = getattr(owner, name, None)
    if not callable(original):
        return False
    if getattr(original, "__mnemo_gated__", None) is not None:
        return True

    @functools.wraps(original)
    def gated(*args: Any, **kwargs: Any) -> Any:
        if _ddl.skip:
            return None
        try:
            return original(*args, **kwargs)
        except BaseException:
            _ddl.failed = True
            raise

    gated.__mnemo_gated__ = original  # type: ignore[attr-defined]
    setattr(owner, name, gated)
    return True


def _gate_constructor_ddl(beam: types.ModuleType) -> bool:
    """Gate every DDL step `Mnemosyne(...)` runs besides `memory.init_db`.

    Found by tracing a construction (3.15.1): `init_db` (the legacy tables,
    then `init_beam`), `BeamMemory.__init__` → `init_beam`, `init_triples`,
    `init_annotations` (in the E6 check), then the stores sharing beam's
    connection: `AnnotationStore`, `CanonicalStore`, `EpisodicGraph` and
    `VeracityConsolidator`, each running its own `CREATE … IF NOT EXISTS`.
    All are looked up at call time, so replacing the module or class
    attribute reaches them.  Everything else the constructor does stays:
    its connections and pragmas, the config singleton, and the E6 check for
    legacy triples still to migrate (three cheap reads, data not schema).
    """
    try:
        from mnemosyne.core import annotations, canonical, triples
    except ImportError:
        return False
    steps: list[tuple[Any, str]] = [
        (beam, "init_beam"), (triples, "init_triples"),
        (annotations, "init_annotations"), (annotations, "_init_annotations_with_conn"),
        (canonical, "_init_canonical_with_conn")]
    for cls_name in ("EpisodicGraph", "VeracityConsolidator"):
        cls = getattr(beam, cls_name, None)
        if cls is not None:  # None: upstream failed to import it and never builds one
            steps.append((cls, "_init_tables"))
    ok = all([_gate(owner, name) for owner, name in steps])
    if getattr(beam, "_SQLITE_VEC_AVAILABLE", False):
        # `_after_fast_open` repeats init_beam's vector backfill with these.
        ok = ok and all(callable(getattr(beam, f, None)) for f in (
            "_existing_vec_dim", "_backfill_vec_working_from_memory_embeddings"))
    return ok


# ─── Opening a bank ───────────────────────────────────────────────────────


def _prime_settings() -> bool | None:
    """Upstream's settings singleton from the kept parse (`upstream_config`):
    True if built from it, False if upstream will parse its file, None when it
    exists already (an earlier open)."""
    config = sys.modules.get("mnemosyne.core.config")
    if config is None or config.MnemosyneConfig._instance is not None:
        return None
    from . import upstream_config

    if upstream_config.prime(config):
        return True
    if upstream_config.before_parse is not None:
        with contextlib.suppress(Exception):  # a speed-up: never a reason to fail an open
            upstream_config.before_parse()
    return False


def _keep_settings() -> None:
    config = sys.modules.get("mnemosyne.core.config")
    if config is not None:
        from . import upstream_config

        upstream_config.keep(config)


def _open(db_path: Path, namespace: str, base: Path | None = None) -> Mnemosyne:
    """A new upstream instance for (`db_path`, `namespace`) on this thread.

    Upstream's constructor takes its two connections (`memory.conn`,
    `beam.conn`) from per-thread caches in its modules; they are opened here
    first, through upstream's own functions, so that they are tuned and the
    schema is read before the constructor runs.  Then:

    - the stored fingerprint equals the live one (`_fingerprint`): the
      constructor runs with every DDL step gated off, so it builds its
      objects and runs no DDL at all;
    - otherwise (a new bank, a schema someone changed or a damaged one,
      other upstream code, sqlite-vec appearing, `MNEMO_DRIVER_FULL_DDL=1`):
      the full DDL runs, as upstream always does, and when no step of it
      failed and the bank now has every object a new bank gets, the
      fingerprint is stored for the next open (`_record_fingerprint`).

    Upstream's per-thread caches are emptied before and after, so they never
    hold a connection an instance owns: closing an evicted instance cannot
    break another one, and each instance closes exactly its own.
    """
    up = _upstream()
    db_path.parent.mkdir(parents=True, exist_ok=True)
    _drop_thread_connections(up)
    opened: list[sqlite3.Connection] = []
    try:
        conn = up.memory._get_connection(db_path)
        opened.append(conn)
        beam_conn = up.beam._get_connection(db_path)
        opened.append(beam_conn)
        for each in opened:
            _tune(each)
        vec_loaded = bool(getattr(beam_conn, "_mnemosyne_vec_loaded", False))
        # Forced full DDL: exactly upstream's open, nothing checked or recorded.
        usable = up.fast_open and os.environ.get(FULL_DDL_ENV, "") in ("", "0")
        fast = usable and _fingerprint_matches(conn, up, vec_loaded)
        if fast:
            memory = _construct(up, db_path, namespace, fast=True)
        else:
            # Upstream's DDL checks for a column, then adds it: two opens of a new
            # bank at once (processes, or the server's threads) both add it and
            # the second fails ("duplicate column name").  One at a time; an open
            # that waited finds the schema built and the fingerprint stored.
            with _schema_lock(db_path, base):
                fast = usable and _fingerprint_matches(conn, up, vec_loaded)
                memory = _construct(up, db_path, namespace, fast=fast)
                if not fast and usable and not _ddl.failed:
                    _drop_thread_connections(up)  # the instance owns them now
                    _record_fingerprint(memory.conn, up, vec_loaded)
    except BaseException:
        for each in opened:
            with contextlib.suppress(Exception):
                each.close()
        raise
    finally:
        _drop_thread_connections(up)
    return memory


def _construct(up: _Upstream, db_path: Path, namespace: str, *, fast: bool) -> Mnemosyne:
    """Upstream's constructor, its DDL skipped when `fast` (`_ddl.failed` says
    whether a DDL step failed)."""
    primed = _prime_settings()
    _ddl.skip, _ddl.failed = fast, False
    try:
        memory = up.memory.Mnemosyne(session_id=namespace, db_path=db_path)
    finally:
        _ddl.skip = False
    if primed is False:
        _keep_settings()
    if fast:
        _after_fast_open(up, memory)
    return memory


@contextlib.contextmanager
def _schema_lock(db_path: Path, base: Path | None) -> Iterator[None]:
    """An exclusive lock on `db_path`'s schema, across processes and threads (each
    open takes its own `flock`), held while upstream's DDL runs on it."""
    from ..fsutil import file_lock, sha256_hex

    digest = sha256_hex(os.path.realpath(db_path).encode())[:32]
    with file_lock(paths.locks_dir(base) / f"schema-{digest}.lock",
                   timeout=SCHEMA_LOCK_SECONDS, what="schema lock of a bank"):
        yield


def _tune(conn: sqlite3.Connection) -> None:
    """`synchronous=NORMAL` on a WAL connection: commits stop waiting for fsync.

    In WAL mode NORMAL syncs only at checkpoints; a committed transaction
    survives any crash of the application (the WAL is in the file), and only
    an operating-system crash or power loss can roll back the last commits,
    never corrupt the database.  A connection that is not in WAL mode (a
    file system without shared memory) keeps upstream's FULL.
    """
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    if str(mode).lower() == "wal":
        conn.execute("PRAGMA synchronous=NORMAL")


def _after_fast_open(up: _Upstream, memory: Mnemosyne) -> None:
    """What upstream's init does besides DDL, kept when the DDL is skipped.

    `init_beam` ends by mirroring fallback embeddings (`memory_embeddings`)
    into the sqlite-vec index, on every open and only when sqlite-vec is
    loaded: data written by a process without the extension must still
    reach the vector index.  Same guard as upstream's (no mirroring into a
    vector table of another dimension); a no-op without sqlite-vec.
    """
    beam = up.beam
    if not getattr(beam, "_SQLITE_VEC_AVAILABLE", False):
        return
    conn = memory.beam.conn
    with contextlib.suppress(Exception):  # upstream logs and goes on, too
        if beam._existing_vec_dim(conn) in (None, beam.EMBEDDING_DIM):
            beam._backfill_vec_working_from_memory_embeddings(conn)


def _fingerprint(conn: sqlite3.Connection, up: _Upstream, vec_loaded: bool) -> str:
    """Hash of the bank's schema and of everything else upstream's DDL depends on.

    The schema is every `sqlite_master` row (tables, indexes, triggers,
    virtual tables, with their SQL) but mnemo's own table, plus
    `PRAGMA user_version`.  The rest: the upstream release and the source of
    its DDL modules, the SQLite library, and the vector settings `init_beam`
    branches on (sqlite-vec importable and loaded on this connection,
    embedding dimension, vector type).  Equal fingerprints mean upstream's
    DDL, run now, would meet the very schema it met when the fingerprint was
    stored, which it then left complete.
    """
    beam = up.beam
    context = (_FINGERPRINT_FORMAT, _upstream_version(), up.code_digest(), sqlite3.sqlite_version,
               getattr(beam, "_SQLITE_VEC_AVAILABLE", None), vec_loaded,
               getattr(beam, "EMBEDDING_DIM", None), getattr(beam, "VEC_TYPE", None),
               conn.execute("PRAGMA user_version").fetchone()[0])
    digest = hashlib.sha256(repr(context).encode())
    for row in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                            "WHERE tbl_name <> ? ORDER BY type, name", (_META_TABLE,)):
        digest.update(repr(tuple(row)).encode())
    return digest.hexdigest()


def _fingerprint_matches(conn: sqlite3.Connection, up: _Upstream, vec_loaded: bool) -> bool:
    """Does the bank's stored fingerprint equal its live one? (one read transaction)"""
    if conn.in_transaction:
        return False
    conn.execute("BEGIN")
    try:
        stored = _stored_fingerprints(conn).get(_FINGERPRINT_KEY)
        return stored is not None and stored == _fingerprint(conn, up, vec_loaded)
    finally:
        conn.rollback()


def _upstream_version() -> str:
    return str(getattr(sys.modules.get("mnemosyne"), "__version__", "unknown"))


def _stored_fingerprints(conn: sqlite3.Connection) -> dict[str, str]:
    try:
        rows = conn.execute(f"SELECT key, value FROM {_META_TABLE}").fetchall()
    except sqlite3.Error:
        return {}  # no table yet (a new bank, or one no mnemo opened)
    return {str(key): str(value) for key, value in rows}


def _record_fingerprint(conn: sqlite3.Connection, up: _Upstream, vec_loaded: bool) -> bool:
    """Store the fingerprint of the schema upstream's full DDL just left; whether it was.

    Only for a schema that has everything upstream's DDL gives a new bank
    (`_pristine`, `_complete`): upstream swallows some of its own DDL errors
    (an `ALTER TABLE … ADD COLUMN` or a vector table that fails, a locked
    bank), and a fingerprint of a schema such an error left short would skip
    the DDL that repairs it on every later open.  Such a bank keeps getting
    the full DDL, as before, until one run completes it.

    It lives in the bank itself, in a table of mnemo's (`mnemo_meta`, a row
    per key) rather than in a file beside it: it is written in the same
    transaction-safe file as the schema it describes, it travels with the
    bank through copies, backups, restores and migrations, and no stray or
    stale file can outlive a bank.  A copy never misleads: every open
    compares against the live schema, so a fingerprint that no longer fits
    only costs one full DDL run.  Written under BEGIN IMMEDIATE, so the
    schema checked and hashed is the schema committed with it; when the
    bank is busy or read-only nothing is stored and the next open runs the
    DDL again.
    """
    if conn.in_transaction:
        return False
    reference = _pristine(up, vec_loaded)
    if reference is None:
        return False
    busy = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    conn.execute(f"PRAGMA busy_timeout={_RECORD_BUSY_MS}")
    try:
        conn.execute("BEGIN IMMEDIATE")
        if not _complete(_schema(conn), reference):
            conn.rollback()
            return False
        value = _fingerprint(conn, up, vec_loaded)
        conn.execute(f"CREATE TABLE IF NOT EXISTS {_META_TABLE} "
                     "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute(f"INSERT OR REPLACE INTO {_META_TABLE} (key, value) VALUES (?, ?)",
                     (_FINGERPRINT_KEY, value))
        conn.commit()
        return True
    except sqlite3.Error:
        with contextlib.suppress(sqlite3.Error):
            conn.rollback()
        return False
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.execute(f"PRAGMA busy_timeout={int(busy)}")


# ─── What a complete schema is ────────────────────────────────────────────

# (type, name) → (columns, foreign keys) of every schema object; columns and
# foreign keys only for ordinary tables.
_Schema = dict[tuple[str, str], tuple[frozenset[str], frozenset[tuple[Any, ...]]]]
_pristine_schemas: dict[tuple[Any, ...], _Schema | None] = {}
_pristine_lock = threading.Lock()


def _schema(conn: sqlite3.Connection) -> _Schema:
    found: _Schema = {}
    for kind, name, sql in conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' "
            "ESCAPE '\\' AND tbl_name <> ?", (_META_TABLE,)).fetchall():
        columns: frozenset[str] = frozenset()
        keys: frozenset[tuple[Any, ...]] = frozenset()
        if kind == "table" and not str(sql or "").upper().startswith("CREATE VIRTUAL"):
            quoted = '"' + str(name).replace('"', '""') + '"'
            columns = frozenset(str(r[1]) for r in conn.execute(f"PRAGMA table_info({quoted})"))
            keys = frozenset((r[2], r[3], r[4])
                             for r in conn.execute(f"PRAGMA foreign_key_list({quoted})"))
        found[(str(kind), str(name))] = (columns, keys)
    return found


def _complete(schema: _Schema, reference: _Schema) -> bool:
    """Has `schema` every object of `reference`, each table every column, no other key?

    Extra objects and columns (an older release's, mnemo's) are fine; a
    foreign key the reference lacks is not (upstream rebuilds
    `memory_embeddings` without its old one, and may fail to).
    """
    for key, (columns, keys) in reference.items():
        found = schema.get(key)
        if found is None or not columns <= found[0] or not found[1] <= keys:
            return False
    return True


def _pristine(up: _Upstream, vec_loaded: bool) -> _Schema | None:
    """The schema upstream's full DDL gives a new bank, built once per process.

    Built by a real construction in a scratch directory (in memory when
    `/dev/shm` is there, its connections without fsync), with the same code
    and vector settings as the bank's; None when that fails or cannot load
    sqlite-vec as the bank did (nothing is recorded then).  Only an open
    that ran the full DDL pays for it, once per process.
    """
    key = (up.code_digest(), vec_loaded, getattr(up.beam, "EMBEDDING_DIM", None),
           getattr(up.beam, "VEC_TYPE", None))
    with _pristine_lock:
        if key not in _pristine_schemas:
            _pristine_schemas[key] = _build_pristine(up, vec_loaded)
        return _pristine_schemas[key]


def _build_pristine(up: _Upstream, vec_loaded: bool) -> _Schema | None:
    saved = (_ddl.skip, _ddl.failed)
    _drop_thread_connections(up)
    try:
        shm = Path("/dev/shm")
        where = str(shm) if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else None
        with tempfile.TemporaryDirectory(prefix="mnemo-schema-", dir=where) as scratch:
            db = Path(scratch) / paths.DEFAULT_DB_FILE
            memory = None
            try:
                conns = [up.memory._get_connection(db), up.beam._get_connection(db)]
                for each in conns:
                    each.execute("PRAGMA synchronous=OFF")
                if bool(getattr(conns[1], "_mnemosyne_vec_loaded", False)) != vec_loaded:
                    return None
                _ddl.skip, _ddl.failed = False, False
                memory = up.memory.Mnemosyne(session_id="mnemo-pristine", db_path=db)
                return None if _ddl.failed else _schema(memory.conn)
            except Exception:  # noqa: BLE001 - no reference, no fingerprint
                return None
            finally:
                if memory is not None:
                    _close(memory)
                _drop_thread_connections(up, close=True)
    except OSError:
        return None
    finally:
        _ddl.skip, _ddl.failed = saved


def _drop_module_connection(module: types.ModuleType | None, *, close: bool = False) -> None:
    local = getattr(module, "_thread_local", None)
    if local is None:
        return
    conn = getattr(local, "conn", None)
    local.conn = None
    local.db_path = None
    if close and conn is not None:
        with contextlib.suppress(Exception):
            conn.close()


def _drop_thread_connections(up: _Upstream, *, close: bool = False) -> None:
    """Empty upstream's per-thread connection caches (this thread's), closing them if asked."""
    for module in (up.memory, up.beam):
        _drop_module_connection(module, close=close)


def _close(memory: Mnemosyne) -> None:
    """Close the connections an instance owns (its stores share beam's)."""
    beam = getattr(memory, "beam", None)
    for closable in (getattr(beam, "_query_cache", None), getattr(beam, "conn", None),
                     getattr(memory, "conn", None)):
        if closable is not None:
            with contextlib.suppress(Exception):
                closable.close()


# ─── The per-thread cache ─────────────────────────────────────────────────


class _Banks:
    """One thread's open upstream instances, least recently used first."""

    __slots__ = ("entries", "__weakref__")

    def __init__(self) -> None:
        self.entries: OrderedDict[tuple[str, str], Mnemosyne] = OrderedDict()


class _Local(threading.local):
    banks: _Banks | None = None


_local = _Local()
# Every thread's cache, for open_banks and close_all; a cache (and its
# connections, see `_thread_banks`) goes when its thread does.
_every_thread: weakref.WeakSet[_Banks] = weakref.WeakSet()
_cache_lock = threading.Lock()


def _close_each(entries: OrderedDict[tuple[str, str], Mnemosyne]) -> None:
    for memory in list(entries.values()):
        _close(memory)
    entries.clear()


def _thread_banks() -> _Banks:
    banks = _local.banks
    if banks is None:
        banks = _local.banks = _Banks()
        # A finished thread's connections are closed with its cache (not at exit).
        weakref.finalize(banks, _close_each, banks.entries).atexit = False
        with _cache_lock:
            _every_thread.add(banks)
    return banks


def instance(target: Target, base: Path | None = None) -> Mnemosyne:
    """Upstream's memory object for `target` on this thread (created once, then cached)."""
    db_path = target.db_path(base)
    key = (str(db_path), target.namespace)
    banks = _thread_banks()
    with _cache_lock:
        memory = banks.entries.get(key)
        if memory is not None:
            banks.entries.move_to_end(key)
    if memory is not None:
        return memory
    _ensure_environment()
    with translate_sqlite_errors(db_path):
        memory = _open(db_path, target.namespace, base)
    disarm_trim(memory)
    with _cache_lock:
        banks.entries[key] = memory
        evicted = [banks.entries.popitem(last=False)[1]
                   for _ in range(len(banks.entries) - MAX_BANKS_PER_THREAD)]
    for old in evicted:
        _close(old)
    return memory


def open_banks() -> int:
    """Distinct bank files with an upstream instance open in this process (any thread)."""
    with _cache_lock:
        return len({key[0] for banks in _every_thread for key in banks.entries})


def open_instances() -> int:
    """Upstream instances open in this process: one per (bank file, namespace, thread)."""
    with _cache_lock:
        return sum(len(banks.entries) for banks in _every_thread)


def end_open_transactions() -> list[str]:
    """Roll back whatever transaction this thread's upstream connections left open.

    A process that lives on (the resident server) keeps each thread's
    connections between requests; a transaction left open on one of them
    (an upstream path that writes without committing, an error between a
    write and its commit) would hold the bank's write lock for good and every
    later store would find the database busy.  Returns the banks whose
    connection had one (the caller logs them).
    """
    banks = _local.banks
    if banks is None:
        return []
    with _cache_lock:
        entries = list(banks.entries.items())
    ended: list[str] = []
    for (db_path, _namespace), memory in entries:
        seen: set[int] = set()
        for conn in (getattr(memory, "conn", None), getattr(getattr(memory, "beam", None),
                                                              "conn", None)):
            conn = getattr(conn, "_conn", conn)  # through a _DeferredTracking proxy
            if not isinstance(conn, sqlite3.Connection) or id(conn) in seen:
                continue
            seen.add(id(conn))
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.rollback()
                ended.append(Path(db_path).parent.name)
    return ended


def close_all() -> int:
    """Close every cached instance of every thread; how many were closed.

    For shutdown and tests: another thread still using an instance it got
    before would find its connections closed.  Instances opened afterwards
    are new.
    """
    with _cache_lock:
        doomed = [memory for banks in list(_every_thread) for memory in banks.entries.values()]
        for banks in list(_every_thread):
            banks.entries.clear()
    for memory in doomed:
        _close(memory)
    return len(doomed)


def reset_cache() -> None:
    """Close and forget every cached instance (tests switch data dirs between cases)."""
    close_all()


def disarm_trim(memory: Mnemosyne) -> None:
    """Stop upstream's working-memory trim from deleting rows through mnemo.

    Every upstream write ends by deleting the session's unconsolidated rows
    older than its TTL (and beyond its item cap).  mnemo consolidates what is
    due before each write, but a row can still cross the TTL between that
    check and upstream's trim (another process aging it, a clock change), and
    the trim deletes it for good.  Consolidated rows are exempt from the trim
    anyway, and mnemo keeps the unconsolidated backlog bounded itself
    (`store.protect_before_write`), so through mnemo the trim only ever
    destroys: it does not run.  Upstream's own tools still trim when they
    write; `protect_pinned` and the due-check keep that from costing rows.
    """
    beam = getattr(memory, "beam", None)
    if beam is None or not callable(getattr(beam, "_trim_working_memory", None)):
        raise RuntimeError("mnemosyne's working-memory trim moved: re-check docs/upstream.md "
                           "before using this mnemosyne release")
    beam._trim_working_memory = lambda: None


def init_bank(db_path: Path) -> None:
    """Create Mnemosyne's base schema in `db_path` (idempotent).

    Upstream's `init_db`: the tables its constructor adds (gists,
    annotations, …) come with the first open of the bank, whose full DDL is
    also what records a fingerprint; this partial schema never gets one.
    """
    _ensure_environment()
    with translate_sqlite_errors(db_path):
        up = _upstream()
        db_path.parent.mkdir(parents=True, exist_ok=True)
        _drop_thread_connections(up)
        try:
            with _schema_lock(db_path, None):
                up.memory.init_db(db_path)
        finally:
            _drop_thread_connections(up, close=True)


def remember(target: Target, text: str, *, source: str, importance: float,
             base: Path | None = None) -> str | None:
    """Upstream's write (its write filter applies); None when the filter rejected it."""
    memory = instance(target, base)
    with translate_sqlite_errors(target.db_path(base)):
        return memory.remember(text, source=source, importance=importance, scope=target.scope)


def protect_pinned(target: Target, base: Path | None = None) -> int:
    """Shield pinned rows from upstream's trim; how many were shielded.

    Upstream's trim deletes every unconsolidated row past the TTL, pinned or
    not, while its sleep never consolidates a pinned row.  Marking them
    consolidated (with no summary claim, so sleep's orphan reclaim leaves
    them alone) is what the trim spares; recall still finds them, verbatim.
    """
    from datetime import datetime

    memory = instance(target, base)
    with translate_sqlite_errors(target.db_path(base)):
        cur = memory.conn.execute(
            "UPDATE working_memory SET consolidated_at = ?, consolidation_claimed_at = NULL "
            "WHERE session_id = ? AND pinned = 1 AND consolidated_at IS NULL",
            (datetime.now().isoformat(), target.namespace))
        memory.conn.commit()
        return cur.rowcount


def recall(target: Target, query: str, *, top_k: int, base: Path | None = None,
           tracking: list[Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    """Upstream's recall in `target`'s session (its rows plus scope-global rows).

    Upstream's recall ends by bumping `recall_count` of what it returned and
    committing: a write, and an fsync, on the prompt's path, and a write lock
    a resident server's stores would contend with.  Given a `tracking` list,
    the recall only reads: the bump statements are kept in the list, and
    `record_recalls` applies them later, off the prompt's path.
    """
    memory = instance(target, base)
    with translate_sqlite_errors(target.db_path(base)):
        if tracking is None:
            return list(memory.recall(query, top_k=top_k, **kwargs))
        beam = memory.beam
        real = beam.conn
        bumps: list[tuple[str, tuple[Any, ...]]] = []
        beam.conn = _DeferredTracking(real, bumps)
        try:
            return list(memory.recall(query, top_k=top_k, **kwargs))
        finally:
            beam.conn = real
            tracking.extend((target, sql, params) for sql, params in bumps)


def record_recalls(tracking: list[Any], base: Path | None = None) -> int:
    """Apply the recall-count bumps `recall(tracking=...)` kept; how many statements ran.

    Best effort: a count is not a memory, so a busy database drops them.
    """
    done = 0
    for target, sql, params in tracking:
        memory = instance(target, base)
        try:
            memory.beam.conn.execute(sql, params)
            memory.beam.conn.commit()
            done += 1
        except sqlite3.Error:
            with contextlib.suppress(sqlite3.Error):
                memory.beam.conn.rollback()
    return done


def _is_recall_bump(sql: str) -> bool:
    text = " ".join(sql.split())
    return text.startswith("UPDATE ") and "SET recall_count = recall_count + 1" in text


class _DeferredCursor:
    """A cursor whose recall-count bumps are kept, not run (reads pass through)."""

    def __init__(self, cursor: sqlite3.Cursor, bumps: list[tuple[str, tuple[Any, ...]]]):
        self._cursor = cursor
        self._bumps = bumps

    def execute(self, sql: str, params: Any = ()) -> Any:
        if _is_recall_bump(sql):
            self._bumps.append((sql, tuple(params)))
            return self
        self._cursor.execute(sql, params)
        return self

    def __iter__(self) -> Any:
        return iter(self._cursor)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _DeferredTracking:
    """Upstream's connection during a read-only recall (see `recall`)."""

    def __init__(self, conn: sqlite3.Connection, bumps: list[tuple[str, tuple[Any, ...]]]):
        self._conn = conn
        self._bumps = bumps

    def cursor(self, *args: Any, **kwargs: Any) -> _DeferredCursor:
        return _DeferredCursor(self._conn.cursor(*args, **kwargs), self._bumps)

    def execute(self, sql: str, params: Any = ()) -> Any:
        if _is_recall_bump(sql):
            self._bumps.append((sql, tuple(params)))
            return self._conn.execute("SELECT 1 WHERE 0")
        return self._conn.execute(sql, params)

    def commit(self) -> None:
        if self._conn.in_transaction:  # something else was written: never leave it open
            self._conn.commit()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def sleep(target: Target, *, dry_run: bool, force: bool,
          base: Path | None = None) -> dict[str, Any]:
    """Upstream's per-session sleep for one namespace (never `sleep_all_sessions`)."""
    memory = instance(target, base)
    with translate_sqlite_errors(target.db_path(base)):
        return dict(memory.sleep(dry_run=dry_run, force=force))


# Tables that copy a memory's text or hang off it, by the column naming the
# memory (upstream's extraction writes gists and facts for every memory, and
# MEMORIA rows, `memoria_*` by `source_memory_id`: see `_delete_copies`).
_CHILD_TABLES = (("annotations", "memory_id"), ("memory_embeddings", "memory_id"),
                 ("memory_events", "memory_id"), ("memory_validations", "memory_id"),
                 ("mnemo_vectors", "memory_id"))


def delete(target: Target, memory_id: str, *, allow_global: bool,
           base: Path | None = None, drop_sole_copies: bool = False) -> dict[str, int]:
    """Delete one row of `target`'s namespace (or a global row), and every copy of its text.

    Besides the row in each tier: the gists, facts and consolidated facts
    upstream extracted from it, its MEMORIA rows, its graph edges,
    annotations, events and vectors, the sleep summaries that fold it in
    (`_delete_summaries_of`), and the standing candidates filed from it
    (`_forget_candidates`; for a global row, in the workspace banks too).
    With `secure_delete` the freed pages are overwritten, the full-text
    indexes are merged so no stale entry keeps its words, and the WAL is
    checkpointed: the text is gone from the files, not just unlinked.

    A summary that must go is refused, before anything is deleted, while it is
    the only remaining copy of other memories (`_refuse_sole_copies`), unless
    `drop_sole_copies`.
    """
    db_path = target.db_path(base)
    clause = "(session_id = ? OR scope = 'global')" if allow_global else "session_id = ?"
    memory = instance(target, base)
    deleted: dict[str, int] = {}
    with translate_sqlite_errors(db_path):
        conn = memory.conn
        if not drop_sole_copies:
            _refuse_sole_copies(conn, memory_id, clause, target.namespace)
        conn.execute("PRAGMA secure_delete = ON")
        texts = _texts_of(conn, memory_id, clause, target.namespace)
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
        if cur.rowcount and episode is not None:
            _delete_episode_vector(conn, int(episode[0]))
        cur = conn.execute("DELETE FROM memories WHERE id = ? AND session_id = ?",
                           (memory_id, target.namespace))
        deleted["memories"] = cur.rowcount
        if any(deleted.values()):
            deleted.update(_delete_copies(conn, memory_id))
            candidates = _forget_candidates(conn, memory_id, texts, target.namespace)
            if candidates:
                deleted[CANDIDATES] = candidates
            summaries = _delete_summaries_of(conn, memory_id, clause, target.namespace)
            if summaries:
                deleted["summaries"] = summaries
        conn.commit()
        if any(deleted.values()):
            _purge_freed_text(conn)
    if any(deleted.values()):
        from . import vector_file

        vector_file.remove_for(db_path, base)  # no copy of a forgotten vector stays either
        if target.bank == paths.GLOBAL_BANK:
            elsewhere = _forget_candidates_elsewhere(memory_id, base)
            if elsewhere:
                deleted[CANDIDATES] = deleted.get(CANDIDATES, 0) + elsewhere
    return deleted


def _texts_of(conn: sqlite3.Connection, memory_id: str, clause: str,
              namespace: str) -> set[str]:
    """The text of the row `delete` is about to delete, in each tier that has it."""
    texts: set[str] = set()
    for table, where in (("working_memory", clause), ("episodic_memory", clause),
                         ("memories", "session_id = ?")):
        texts.update(str(r[0]) for r in rows(
            conn, f"SELECT content FROM {table} WHERE id = ? AND {where}",
            (memory_id, namespace)) if r[0])
    return texts


def _forget_candidates(conn: sqlite3.Connection, memory_id: str, texts: set[str],
                       namespace: str) -> int:
    """Take the forgotten row's text out of the standing candidates; how many changed.

    A candidate copies the statement of the turn it was filed from (found by
    its digest, which the same statement said again shares) and, once
    accepted, names the standing memory it became (`memory_id`).  A pending
    candidate is deleted, and so is an accepted one whose standing memory is
    the row forgotten: the statement may be suggested again.  Any other
    decided one keeps its decision without its text: its digest, a hash,
    still keeps a rejected statement (or one a standing memory holds) from
    being suggested again.
    """
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (CANDIDATES,)).fetchone():
        return 0
    digests = sorted({candidate_digest(namespace, candidate_text(t)) for t in texts})
    marks = ",".join("?" * len(digests))
    linked = f"(memory_id = ? OR digest IN ({marks}))" if digests else "memory_id = ?"
    args = (memory_id, *digests)
    changed = conn.execute(f"DELETE FROM {CANDIDATES} WHERE {linked} AND (status = 'pending' "
                           "OR (status = 'accepted' AND memory_id = ?))",
                           (*args, memory_id)).rowcount
    return changed + conn.execute(f"UPDATE {CANDIDATES} SET text = '' WHERE {linked} "
                                  "AND text <> ''", args).rowcount


def _forget_candidates_elsewhere(memory_id: str, base: Path | None) -> int:
    """`_forget_candidates` for a global standing memory in the banks of the workspaces.

    A candidate accepted with `--scope global` stays in the bank of the workspace
    whose turn it was filed from, naming the global row it became; the global
    bank does not say which workspace that was, so each bank is asked (read-only,
    one lookup in its small candidates table; only a bank that holds such a
    candidate is written to: 50 banks take about 20 ms).
    """
    changed = 0
    for bank, db in bank_files(base):
        if bank == paths.GLOBAL_BANK:
            continue
        with translate_sqlite_errors(db):
            with banks_reader(db) as reader:
                if reader is None:
                    continue
                try:
                    linked = reader.execute(f"SELECT 1 FROM {CANDIDATES} WHERE memory_id = ? "
                                            "LIMIT 1", (memory_id,)).fetchone()
                except sqlite3.OperationalError:
                    linked = None  # no candidate was ever filed in this bank
            if not linked:
                continue
            conn = sqlite3.connect(db, timeout=BUSY_TIMEOUT_SECONDS)
            try:
                conn.execute("PRAGMA secure_delete = ON")
                changed += _forget_candidates(conn, memory_id, set(), "")
                conn.commit()
                _checkpoint_wal(conn)
            finally:
                conn.close()
    return changed


def _summaries_of(conn: sqlite3.Connection, memory_id: str, clause: str,
                  namespace: str) -> list[tuple[str, int, str]]:
    """(id, rowid, summary_of) of the summaries of the namespace that list `memory_id`."""
    try:
        return [(str(r[0]), int(r[1]), str(r[2] or "")) for r in conn.execute(
            f"SELECT id, rowid, summary_of FROM episodic_memory WHERE {clause} "
            "AND summary_of IS NOT NULL "
            "AND instr(',' || replace(summary_of, ' ', '') || ',', ',' || ? || ',') > 0",
            (namespace, memory_id)).fetchall()]
    except sqlite3.OperationalError:
        return []  # no summary_of column: a schema without summaries


def _refuse_sole_copies(conn: sqlite3.Connection, memory_id: str, clause: str,
                        namespace: str) -> None:
    """Refuse to forget `memory_id` while a summary it takes along is the only copy
    of other memories.

    Forgetting must leave no copy of the forgotten text, and a summary repeats
    the text of every row it folds in, so it goes too; mnemo's own sleep keeps
    those rows, so usually nothing else is lost.  But a summary can outlive its
    rows (upstream's sleep once deleted them, its trim can, and a migration
    keeps such a summary as a memory): deleting it would then silently destroy
    the only copy of memories the user never asked to forget.  A summary cannot
    be split (it compresses its rows into one line), so the user decides: the
    error says how many memories would be lost, and forgetting the summary
    itself first (by its id) is the explicit way to go ahead.
    """
    from ..errors import RefusedError

    summaries = _summaries_of(conn, memory_id, clause, namespace)
    if not summaries:
        return
    # The tiers recall reads: a row left only in upstream's legacy `memories`
    # mirror is never recalled, so it does not count as a copy.
    tables = [t for t in MEMORY_TABLES
              if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                              (t,)).fetchone()]

    def exists(row_id: str) -> bool:
        return any(conn.execute(f"SELECT 1 FROM {t} WHERE id = ?", (row_id,)).fetchone()
                   for t in tables)

    legacy = bool(conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                               "AND name = 'memories'").fetchone())
    if not exists(memory_id) and not (legacy and conn.execute(
            "SELECT 1 FROM memories WHERE id = ?", (memory_id,)).fetchone()):
        return  # no such row: `delete` deletes nothing, summaries included
    going = {summary_id for summary_id, _, _ in summaries}
    lost: dict[str, set[str]] = {}  # summary -> the memories only it still holds
    for summary_id, _, listed in summaries:
        gone = {i for i in set(summary_ids(listed)) - {memory_id} if not exists(i)}
        if gone:
            lost[summary_id] = gone
    if lost:
        # A summary that stays (it does not fold `memory_id` in) keeps its own copy.
        for summary_id, listed in conn.execute(
                "SELECT id, summary_of FROM episodic_memory WHERE summary_of IS NOT NULL "
                "AND summary_of <> ''").fetchall():
            if summary_id not in going:
                kept = set(summary_ids(listed))
                lost = {s: ids - kept for s, ids in lost.items() if ids - kept}
    if not lost:
        return
    count = len(set().union(*lost.values()))
    names = sorted(lost)
    which = (f"the sleep summary {names[0]}, the only recallable copy" if len(names) == 1
             else f"the sleep summaries {', '.join(names)}, the only recallable copies")
    forget_first = " and ".join(f"`mnemo forget {name}`" for name in names)
    raise RefusedError(
        f"forgetting {memory_id} would also delete {which} of {count} other "
        f"memor{'y' if count == 1 else 'ies'} (a summary repeats the text of every memory "
        "it folds in, so it cannot stay); nothing was deleted",
        hint=f"To forget them all, first forget the summary itself: {forget_first}, then "
             f"`mnemo forget {memory_id}`.")


def _delete_summaries_of(conn: sqlite3.Connection, memory_id: str, clause: str,
                         namespace: str) -> int:
    """Delete the sleep summaries that folded `memory_id` in, with their own copies.

    A summary lists the rows it was made from in `summary_of` (comma-separated
    ids) and repeats their text: left in place it would keep, and the next
    prompt could inject, what was forgotten.  The other rows it summarised
    stay as they are (consolidation is additive: they are still there, whole);
    only the summary, derived text, goes.  Where they are not (a summary that
    outlived them), `delete` has refused first unless told to go ahead
    (`_refuse_sole_copies`).  This applies whatever the summary's source: a
    migration keeps such a summary as a memory (`migrate.engine.SOLE_COPY_SOURCE`)
    with its `summary_of`."""
    rows = [(summary_id, rowid) for summary_id, rowid, _ in
            _summaries_of(conn, memory_id, clause, namespace)]
    for summary_id, rowid in rows:
        conn.execute("DELETE FROM episodic_memory WHERE id = ?", (summary_id,))
        _delete_episode_vector(conn, int(rowid))
        _delete_copies(conn, summary_id)
    return len(rows)


def _delete_copies(conn: sqlite3.Connection, memory_id: str) -> dict[str, int]:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    deleted: dict[str, int] = {}

    def run(table: str, sql: str, args: tuple[Any, ...]) -> None:
        if table in tables:
            deleted[table] = deleted.get(table, 0) + conn.execute(sql, args).rowcount

    # Graph edges join the memory itself (upstream links related memories) and
    # what was extracted from it.
    derived = [memory_id]
    if "gists" in tables:
        derived += [r[0] for r in conn.execute("SELECT id FROM gists WHERE memory_id = ?",
                                               (memory_id,))]
    if "facts" in tables:
        derived += [r[0] for r in conn.execute("SELECT fact_id FROM facts WHERE "
                                               "source_msg_id = ?", (memory_id,))]
    for table, column in _CHILD_TABLES:
        run(table, f'DELETE FROM "{table}" WHERE "{column}" = ?', (memory_id,))
    run("gists", "DELETE FROM gists WHERE memory_id = ?", (memory_id,))
    run("facts", "DELETE FROM facts WHERE source_msg_id = ?", (memory_id,))  # trigger: fts_facts
    for table in sorted(t for t in tables if t.startswith("memoria_")):
        if "source_memory_id" in column_names(conn, table):
            if table == "memoria_facts":
                _drop_previous_values(conn, memory_id)
            run(table, f'DELETE FROM "{table}" WHERE source_memory_id = ?', (memory_id,))
    for item in derived:
        run("graph_edges", "DELETE FROM graph_edges WHERE source = ? OR target = ?",
            (item, item))
    if "consolidated_facts" in tables:
        # A consolidated fact lists the memories it came from: drop this one, and
        # the fact itself once no other memory says it.
        for row_id, sources in conn.execute(
                "SELECT id, sources_json FROM consolidated_facts WHERE instr(sources_json, ?)",
                (memory_id,)).fetchall():
            try:
                left = [s for s in json.loads(sources or "[]") if s != memory_id]
            except ValueError:
                left = []
            if left:
                conn.execute("UPDATE consolidated_facts SET sources_json = ? WHERE id = ?",
                             (json.dumps(left), row_id))
            else:
                run("consolidated_facts", "DELETE FROM consolidated_facts WHERE id = ?",
                    (row_id,))
    return {k: v for k, v in deleted.items() if v}


def _drop_previous_values(conn: sqlite3.Connection, memory_id: str) -> None:
    """Clear the copies of the memory's MEMORIA facts that later versions keep.

    A fact a later memory changed (the same key, a new value) carries the old
    value as its `previous_value`."""
    for session_id, fact_type, key, value in conn.execute(
            "SELECT session_id, fact_type, key, value FROM memoria_facts "
            "WHERE source_memory_id = ? AND value IS NOT NULL", (memory_id,)).fetchall():
        conn.execute("UPDATE memoria_facts SET previous_value = NULL WHERE session_id IS ? "
                     "AND fact_type IS ? AND key IS ? AND previous_value = ? "
                     "AND source_memory_id IS NOT ?", (session_id, fact_type, key, value,
                                                       memory_id))


def _purge_freed_text(conn: sqlite3.Connection) -> None:
    """Merge full-text indexes (dropping deleted entries) and checkpoint the WAL."""
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND "
                                "sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'").fetchall():
        try:
            conn.execute(f'INSERT INTO "{name}"("{name}") VALUES (\'optimize\')')
        except sqlite3.Error:
            continue
    conn.commit()
    _checkpoint_wal(conn)


def _checkpoint_wal(conn: sqlite3.Connection) -> None:
    """Fold the WAL into the bank and empty it, so freed text leaves the WAL file."""
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error:
        pass  # another connection holds the WAL; its next checkpoint overwrites it


def _delete_episode_vector(conn: sqlite3.Connection, rowid: int) -> None:
    """Drop a forgotten episode's vector (episodic rowids are never reused, so it would linger)."""
    try:
        conn.execute("DELETE FROM vec_episodes WHERE rowid = ?", (rowid,))
    except sqlite3.OperationalError:
        pass  # no vector table, or the sqlite-vec extension is not loaded here
