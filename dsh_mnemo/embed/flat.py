"""Vector arithmetic without numpy, for a process that has not imported it.

A new process that imports numpy pays about 55-75 ms for it on a 2-core
machine (92 modules and a 10 MB extension), more than a third of a cold
prompt, to compare one query with a few hundred vectors.  The standard
library does that comparison in about 11 us a vector (`sum(map(mul, ...))`
over two `array('f')`), so a namespace of up to `MAX_ROWS` vectors is
searched with these functions when numpy is not loaded yet; past that, or in
a process that has numpy already (the resident server imports it at start),
numpy does it.  Both give the same order: best score first, ties by position.

Vectors here are `array('f')` (float32, this machine's byte order); a matrix
is one flat `array('f')` of rows x dim values.  Scores are summed in double
precision and kept as float32, as numpy keeps them.
"""

from __future__ import annotations

import heapq
import math
import operator
import sys
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

#: a namespace of at most this many vectors is searched without numpy by a
#: process that has not imported it: 3,000 vectors take about 40 ms to
#: compare, about what importing numpy costs (bench/bench_cold.py)
MAX_ROWS = 3000
_LITTLE = sys.byteorder == "little"
_mul = operator.mul


def numpy_loaded() -> bool:
    """Has this process imported numpy?"""
    return sys.modules.get("numpy") is not None


def wanted(rows: int) -> bool:
    """Should a namespace of `rows` vectors be searched without numpy here?"""
    return rows <= MAX_ROWS and not numpy_loaded()


def is_flat(value: Any) -> bool:
    return isinstance(value, array)


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


def row(matrix: array, dim: int, at: int) -> array:
    return matrix[at * dim:(at + 1) * dim]


def scores(matrix: array, dim: int, query: array, rows: int) -> array:
    """The dot product of `query` with each of the first `rows` rows of `matrix`."""
    if len(query) != dim or len(matrix) < rows * dim:
        raise ValueError(f"a {len(query)}-d query against {dim}-d vectors")
    view = memoryview(matrix)
    q = query.tolist() if isinstance(query, array) else [float(v) for v in query]  # faster
    return array("f", [sum(map(_mul, q, view[at:at + dim])) for at in range(0, rows * dim, dim)])


def top(values: Sequence[float], k: int) -> list[int]:
    """The positions of the `k` best values, best first; ties keep the lower position first."""
    k = min(k, len(values))
    if k <= 0:
        return []
    return heapq.nsmallest(k, range(len(values)), key=lambda i: (-values[i], i))


def stats(values: Sequence[float]) -> tuple[float, float, float]:
    """(best, mean, population standard deviation) of `values` (not empty)."""
    n = len(values)
    mean = math.fsum(values) / n
    var = math.fsum((v - mean) * (v - mean) for v in values) / n
    return float(max(values)), mean, math.sqrt(var)
