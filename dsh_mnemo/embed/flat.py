"""Vector arithmetic without numpy, for a process that has not imported it.

A new process that imports numpy pays about 55-75 ms for it on a 2-core
machine (92 modules and a 10 MB extension), more than a third of a cold
prompt, to compare one query with a few hundred vectors.  A namespace of up
to `MAX_ROWS` vectors is searched with these functions when numpy is not
loaded yet: the comparison itself goes through numpy's bundled BLAS library,
loaded with ctypes (`blas`: 0.2 ms for 1,000 vectors, numpy's own scores),
or, without it, through the standard library (about 11 us a vector,
`sum(map(mul, ...))` over two `array('f')`); past `MAX_ROWS`, or in a
process that has numpy already (the resident server imports it at start),
numpy does it.  All give the same order: best score first, ties by position.

Vectors here are `array('f')` (float32, this machine's byte order); a matrix
is one flat `array('f')` of rows x dim values, or a float32 `memoryview` of
them mapped from their file (`map_rows`: the pages are the operating
system's, read by the comparison itself, never copied).  Scores are summed
in double precision and kept as float32, as numpy keeps them.
"""

from __future__ import annotations

import heapq
import math
import operator
import os
import sys
from array import array
from collections.abc import Iterable, Sequence
from itertools import compress

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any

#: a namespace of at most this many vectors is searched without numpy by a
#: process that has not imported it: in pure Python, 3,000 vectors take about
#: 40 ms to compare, about what importing numpy costs (bench/bench_cold.py)
MAX_ROWS = 3000
#: ... and of at most this many when numpy's BLAS library does the comparison
#: (`blas`): the rows are mapped from their file as numpy maps them, the sums
#: of the mean and deviation are BLAS's too, and what is left in Python is the
#: ids (read for numpy alike) and the best few (about 9 ms at 100,000
#: vectors), against 55-75 ms for importing numpy
MAX_ROWS_BLAS = 200_000
#: fewer vectors than this are compared in Python (about 2 ms) rather than
#: loading the BLAS library for them (about 2 ms)
BLAS_FROM = 200
_LITTLE = sys.byteorder == "little"
_mul = operator.mul


def numpy_loaded() -> bool:
    """Has this process imported numpy?"""
    return sys.modules.get("numpy") is not None


def wanted(rows: int) -> bool:
    """Should a namespace of `rows` vectors be searched without numpy here?"""
    if numpy_loaded():
        return False
    if rows <= MAX_ROWS:
        return True
    from . import blas

    return rows <= MAX_ROWS_BLAS and blas.get() is not None


def is_flat(value: Any) -> bool:
    return isinstance(value, array) or (isinstance(value, memoryview) and value.format == "f")


def from_blobs(blobs: Iterable[bytes | bytearray | memoryview], dim: int) -> array:
    """Stored vectors (little-endian float32, `dim` each) as one flat array."""
    raw = b"".join(blobs)
    if dim < 1 or len(raw) % (4 * dim):
        raise ValueError(f"blobs do not hold whole {dim}-d float32 vectors")
    out = array("f")
    out.frombytes(raw)
    if not _LITTLE:
        out.byteswap()
    return out


def read_rows(handle: Any, count: int) -> array:
    """`count` stored values (little-endian float32) read from the open file `handle`
    straight into a flat array (one copy, not three: 15 MB at 10,000 vectors).
    Raises EOFError when the file holds fewer."""
    out = array("f")
    out.fromfile(handle, count)
    if not _LITTLE:
        out.byteswap()
    return out


def map_rows(handle: Any, offset: int, count: int) -> Any:
    """`count` stored values at `offset` of the open file `handle`, mapped: a flat
    float32 memoryview of a private (copy-on-write) mapping, whose pages the
    comparison reads straight from the page cache; `read_rows` copies them all
    first (10,000 vectors: 15 MB).  On a big-endian machine, or where the file
    cannot be mapped, read instead.  Raises EOFError when the file holds fewer."""
    import mmap

    size = os.fstat(handle.fileno()).st_size
    if offset + 4 * count > size:
        raise EOFError("the file holds fewer values")
    if _LITTLE and count:
        try:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
            return memoryview(mapped)[offset:offset + 4 * count].cast("f")
        except (OSError, ValueError):
            pass  # read instead
    handle.seek(offset)
    return read_rows(handle, count)


def copy(matrix: Any) -> array:
    """A flat matrix (mapped or not) as a new `array('f')` of its own."""
    out = array("f")
    out.frombytes(memoryview(matrix).cast("B"))
    return out


def to_bytes(values: array) -> bytes:
    """A flat array as stored: little-endian float32."""
    if _LITTLE:
        return values.tobytes()
    swapped = array("f", values)
    swapped.byteswap()
    return swapped.tobytes()


def vector(values: Any) -> array:
    """Any sequence of numbers (a numpy row included) as an `array('f')`."""
    if isinstance(values, array) and values.typecode == "f":
        return values
    return array("f", (float(v) for v in values))


def unit(values: Sequence[float]) -> array:
    """`values` scaled to unit length (a zero vector stays zero)."""
    norm = math.sqrt(sum(map(_mul, values, values)))
    if norm == 0.0:
        return array("f", values)
    return array("f", (v / norm for v in values))


def dot(a: Any, b: Any) -> float:
    """The dot product of two vectors, numpy's or these."""
    if hasattr(a, "dot"):
        return float(a.dot(b))
    if hasattr(b, "dot"):
        return float(b.dot(a))
    return float(sum(map(_mul, a, b)))


def row(matrix: Any, dim: int, at: int) -> array:
    """Row `at` of a flat matrix, as an `array('f')` of its own."""
    if isinstance(matrix, array):
        return matrix[at * dim:(at + 1) * dim]
    return copy(matrix[at * dim:(at + 1) * dim])


def scores(matrix: array, dim: int, query: array, rows: int) -> array:
    """The dot product of `query` with each of the first `rows` rows of `matrix`:
    through numpy's own BLAS library when there is one (`blas`: numpy's very
    scores, without importing numpy), else in pure Python."""
    if len(query) != dim or len(matrix) < rows * dim:
        raise ValueError(f"a {len(query)}-d query against {dim}-d vectors")
    from . import blas

    library = blas.get() if rows >= BLAS_FROM else blas.loaded()
    if library is not None:
        return library.scores(matrix, rows, dim, vector(query))
    view = memoryview(matrix)
    q = query.tolist() if isinstance(query, array) else [float(v) for v in query]  # faster
    return array("f", [sum(map(_mul, q, view[at:at + dim])) for at in range(0, rows * dim, dim)])


def top(values: Sequence[float], k: int) -> list[int]:
    """The positions of the `k` best values, best first; ties keep the lower position first
    (`nlargest` is `sorted(..., reverse=True)[:k]`, which keeps equal keys in order)."""
    k = min(k, len(values))
    if k <= 0:
        return []
    if len(values) < 4 * BLAS_FROM:
        return heapq.nlargest(k, range(len(values)), key=values.__getitem__)
    # Many values: the k-th best value first (C), then the positions that reach it,
    # best first, ties in position order (a stable sort): the same k positions.
    cutoff = heapq.nlargest(k, values)[-1]
    reached = list(compress(range(len(values)), map(cutoff.__le__, values)))
    reached.sort(key=values.__getitem__, reverse=True)
    return reached[:k]


def stats(values: Sequence[float]) -> tuple[float, float, float]:
    """(best, mean, population standard deviation) of `values` (not empty).

    Summed exactly (`math.fsum`) or, for many float32 values with numpy's BLAS
    loaded, by its `dsdot` (100,000 values: 0.1 ms against about 8 ms; within
    1e-9 of the exact sums); either way far closer to the exact figures than
    numpy's own float32 mean and std (about 1e-7 off), which the resident
    server uses."""
    n = len(values)
    sums = None
    if n >= BLAS_FROM and isinstance(values, array) and values.typecode == "f":
        from . import blas

        library = blas.loaded()
        sums = library.sums(values) if library is not None else None
    if sums is not None:
        mean = sums[0] / n
        var = max(0.0, sums[1] / n - mean * mean)
    else:
        mean = math.fsum(values) / n
        var = math.fsum((v - mean) * (v - mean) for v in values) / n
    return float(max(values)), mean, math.sqrt(var)
