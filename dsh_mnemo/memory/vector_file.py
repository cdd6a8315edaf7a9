"""A namespace's vector matrix kept in a file of its own, mapped by the next process.

A prompt compares the query with every vector of its namespace.  Read from
the bank, 100,000 vectors take about half a second (the blobs, then one
matrix out of them); a process without a resident server pays that on every
prompt, and a server on every start.  Mapped from this file they are ready in
about 25 ms, their ids included: the pages are the operating system's, and
nothing is decoded.

The file is a cache of what the bank holds, never the record: the bank's
`mnemo_vectors` table is.  It is written (whole, under a temporary name,
then renamed over the old one) by a process that read the matrix from the
bank, after its answer, and carries what the bank looked like then: its
files' stat and its counts (`semantic._Matrix`).  The process that maps it
checks those exactly as a resident server checks the matrix it keeps in
memory: the same files mean the same vectors; otherwise the bank is opened
and the rows added since are read into the mapping's private copy, or,
when any vector or memory went, everything is read again.  A file of
another bank file (a replaced inode), another namespace or model, or one
that does not parse is ignored.

Layout (all integers little-endian):

    MAGIC                      b"mnemo-vectors/3\\n"
    u32 header length, header  JSON: key, files, counts, dim, rows, capacity,
                               the ids' byte length and the matrix's offset
    ids                        UTF-8, one per line
    kinds                      one byte a row: 1 for a memory, 0 for a captured
                               conversation turn or a sleep summary
                               (`banks.NOT_MEMORY_SOURCES`)
    padding to 64 bytes
    matrix                     capacity x dim float32; rows past `rows` are a
                               hole in the file (zeros, no disk blocks): room
                               for the rows a prompt brings in, copy-on-write
"""

from __future__ import annotations

import json
import os
import struct
import time
from collections.abc import Callable
from pathlib import Path

from .. import paths
from ..embed import flat
from ..fsutil import fnv64, write_cache_file

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any

# /1 had no kinds, /2 counted sleep summaries as memories: ignored, the bank is read instead
MAGIC = b"mnemo-vectors/3\n"
SUFFIX = ".vectors"
#: below this many vectors there is no file.  Reading vectors from the bank
#: costs about 18 us a row (1,000 rows: 18.6 ms; their file: 1.5 ms); 200 rows
#: read in about 4 ms, which is not worth a file
MIN_ROWS = 200
#: files kept (the most recently written); the rest, and those of a bank
#: file that no longer exists, are removed whenever one is written
MAX_FILES = 16
_ALIGN = 64
_MAX_HEADER = 1 << 20


def folder(base: Path | None = None) -> Path:
    return (base or paths.data_dir()) / "cache" / "vectors"


def path_for(key: tuple[str, str, str, bool], base: Path | None = None) -> Path:
    # the key inside the file is what is trusted, not its name
    return folder(base) / f"{fnv64(json.dumps(list(key)).encode('utf-8')):016x}{SUFFIX}"


def read(key: tuple[str, str, str, bool], base: Path | None = None, *,
         flat_if: Callable[[int], bool] | None = None) -> dict[str, Any] | None:
    """The file of `key` mapped: ids, facts (a byte a row: 1 for a memory, 0 for a
    conversation turn), buffer (copy-on-write), dim, files, counts; or None.

    A file of N vectors where `flat_if(N)` (`embed.flat.wanted`) is mapped
    as one flat float32 memoryview instead (no numpy), of its whole capacity
    as numpy's mapping is: the first N rows are the vectors."""
    path = path_for(key, base)
    try:
        with open(path, "rb") as fh:
            header = _header(fh)
            if header is None or header.get("key") != list(key):
                return None
            rows, capacity, dim = (int(header[k]) for k in ("rows", "capacity", "dim"))
            offset, id_bytes = int(header["offset"]), int(header["ids"])
            ids = fh.read(id_bytes).decode("utf-8").split("\n") if rows else []
            facts = bytearray(fh.read(rows))
            total = os.fstat(fh.fileno()).st_size
            if (len(ids) != rows or len(facts) != rows
                    or facts.translate(None, b"\x00\x01")  # a byte that is not 0 or 1
                    or not 0 < rows <= capacity or dim < 1 or offset % _ALIGN
                    or total != offset + capacity * dim * 4):
                return None
            if flat_if is not None and flat_if(rows):
                # the room too, as numpy's mapping: rows brought in later are written there
                buffer: Any = flat.map_rows(fh, offset, capacity * dim)
            else:
                import numpy as np

                buffer = np.memmap(path, dtype="<f4", mode="c", offset=offset,
                                   shape=(capacity, dim))
        files = tuple(tuple(f) if f is not None else None for f in header["files"])
        return {"ids": ids, "facts": facts, "buffer": buffer, "dim": dim, "files": files,
                "counts": tuple(int(c) for c in header["counts"])}
    except (OSError, EOFError, ValueError, KeyError, TypeError, struct.error,
            UnicodeDecodeError):
        return None


def write(key: tuple[str, str, str, bool], ids: list[str], matrix: Any,
          files: tuple[Any, ...], counts: tuple[int, int, int],
          base: Path | None = None, *, dim: int | None = None,
          facts: bytes | bytearray | None = None) -> Path | None:
    """Write `matrix` (rows x dim float32, the rows of `ids`; or one flat
    `array('f')` of them, with `dim`) as `key`'s file; `facts`, a byte a row
    (1 for a memory, 0 for a conversation turn), all memories when None.

    Returns its path, or None when it was not written (no room, an id with a
    newline, an error: the next process reads the bank instead)."""
    if flat.is_flat(matrix):
        if not dim or len(matrix) % dim:
            return None
        rows, data = len(matrix) // dim, flat.to_bytes(matrix)
    else:
        import numpy as np

        rows, dim = int(matrix.shape[0]), int(matrix.shape[1])
        data = np.ascontiguousarray(matrix, dtype="<f4").data  # no copy of it
    kinds = bytes(facts) if facts is not None else b"\x01" * rows
    if rows != len(ids) or len(kinds) != rows or any("\n" in i for i in ids):
        return None
    capacity = rows + rows // 4 + 64
    id_blob = "\n".join(ids).encode("utf-8")
    target = path_for(key, base)
    header: dict[str, Any] = {"key": list(key), "files": [list(f) if f is not None else None
                                                          for f in files],
                              "counts": list(counts), "dim": dim, "rows": rows,
                              "capacity": capacity, "ids": len(id_blob), "offset": 0}
    # the offset is in the header it follows: grow it until it fits
    offset = 0
    while True:
        encoded = json.dumps(header).encode("utf-8")
        start = len(MAGIC) + 4 + len(encoded) + len(id_blob) + rows
        needed = -(-start // _ALIGN) * _ALIGN
        if needed == offset:
            break
        offset = header["offset"] = needed

    def contents(fh: Any) -> None:
        fh.write(MAGIC + struct.pack("<I", len(encoded)) + encoded + id_blob + kinds)
        fh.write(b"\0" * (offset - start))
        fh.write(data)
        fh.truncate(offset + capacity * dim * 4)  # the room: a hole

    try:
        write_cache_file(target, contents)
    except OSError:
        return None
    prune(base, keep=target)
    return target


def prune(base: Path | None = None, *, keep: Path | None = None) -> int:
    """Remove stale temporary files, files whose bank file is gone, files of the
    namespace `keep` holds made with another model (a reindex replaced them), and
    the oldest past MAX_FILES; how many were removed."""
    where = folder(base)
    try:
        entries = [p for p in where.iterdir() if p.name.endswith((SUFFIX, ".tmp"))]
    except OSError:
        return 0
    kept_key = _key_of(keep) if keep is not None else []
    removed = 0
    dated: list[tuple[float, Path]] = []
    for p in entries:
        try:
            stamp = p.stat().st_mtime
        except OSError:
            continue
        if p.name.endswith(".tmp"):
            if p.name.startswith(".") and time.time() - stamp > 3600:
                removed += _unlink(p)
            continue
        if p == keep:
            dated.append((stamp, p))
            continue
        key = _key_of(p)
        gone = not (key and isinstance(key[0], str) and os.path.isfile(key[0]))
        # the same bank, namespace and scope (key[0], [1], [3]) with another model
        replaced = (len(key) == len(kept_key) == 4 and key[2] != kept_key[2]
                    and [key[0], key[1], key[3]] == [kept_key[0], kept_key[1], kept_key[3]])
        if gone or replaced:
            removed += _unlink(p)
            continue
        dated.append((stamp, p))
    dated.sort(reverse=True)
    for _, p in dated[MAX_FILES:]:
        if p != keep:
            removed += _unlink(p)
    return removed


def remove_for(db_path: Path, base: Path | None = None) -> int:
    """Remove every file of the bank file `db_path` (its memories were forgotten)."""
    where = folder(base)
    removed = 0
    try:
        entries = [p for p in where.iterdir() if p.name.endswith(SUFFIX)]
    except OSError:
        return 0
    wanted = os.path.realpath(db_path)
    for p in entries:
        key = _key_of(p)
        if key and isinstance(key[0], str) and os.path.realpath(key[0]) == wanted:
            removed += _unlink(p)
    return removed


def _header(fh: Any) -> dict[str, Any] | None:
    """The header of the file open in `fh` (read past it), or None if it has none.
    Raises OSError, ValueError (bad JSON or UTF-8) or struct.error."""
    if fh.read(len(MAGIC)) != MAGIC:
        return None
    (size,) = struct.unpack("<I", fh.read(4))
    if size > _MAX_HEADER:
        return None
    header = json.loads(fh.read(size).decode("utf-8"))
    return header if isinstance(header, dict) else None


def _key_of(path: Path) -> list[Any]:
    try:
        with open(path, "rb") as fh:
            header = _header(fh)
    except (OSError, ValueError, struct.error):
        return []
    key = header.get("key") if header is not None else None
    return key if isinstance(key, list) else []


def _unlink(path: Path) -> int:
    try:
        path.unlink()
        return 1
    except OSError:
        return 0
