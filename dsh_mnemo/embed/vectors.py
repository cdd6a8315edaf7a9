"""Vectors on disk and in memory: float32 little-endian bytes, cosine, batch top-k.

A stored vector is `dim` float32 values, little-endian, no header (the dim and
model_id are stored beside it).  Embedders return unit-length rows, so cosine
is a plain dot product; `cosine` normalises anyway for vectors of unknown
origin.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]
_LE_F32 = np.dtype("<f4")


def to_bytes(vector: npt.ArrayLike) -> bytes:
    """One vector as float32 little-endian bytes (4 * dim bytes)."""
    arr = np.asarray(vector, dtype=np.float32)
    if arr.ndim != 1:
        raise ValueError(f"expected one vector, got shape {arr.shape}")
    return arr.astype(_LE_F32, copy=False).tobytes()


def from_bytes(blob: bytes | bytearray | memoryview, dim: int | None = None) -> Matrix:
    """A vector back from `to_bytes` output; checks the length against `dim`."""
    raw = bytes(blob)
    if len(raw) % 4:
        raise ValueError(f"vector blob of {len(raw)} bytes is not float32 data")
    vec = np.frombuffer(raw, dtype=_LE_F32).astype(np.float32)
    if dim is not None and vec.shape[0] != dim:
        raise ValueError(f"vector has {vec.shape[0]} dimensions, expected {dim}")
    return vec


def stack(blobs: Iterable[bytes | bytearray | memoryview], dim: int, *,
          into: Matrix | None = None) -> Matrix:
    """Many stored vectors as one (n, dim) matrix, in order.

    With `into` (a float32 buffer of at least n rows) the vectors are decoded
    straight into its first n rows, which are returned: one copy of the data
    instead of three (a namespace of 100,000 vectors is 150 MB).
    """
    raw = b"".join(blobs)
    if len(raw) % (4 * dim):
        raise ValueError(f"blobs do not hold whole {dim}-d float32 vectors")
    decoded = np.frombuffer(raw, dtype=_LE_F32).reshape(-1, dim)
    if into is None:
        return decoded.astype(np.float32)
    rows = decoded.shape[0]
    if into.shape[0] < rows or into.shape[1] != dim:
        raise ValueError(f"buffer of shape {into.shape} cannot take {rows} {dim}-d vectors")
    into[:rows] = decoded
    return into[:rows]


def normalize(matrix: npt.ArrayLike) -> Matrix:
    """Rows scaled to unit length (zero rows stay zero)."""
    m = np.atleast_2d(np.asarray(matrix, dtype=np.float32))
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


def cosine(query: npt.ArrayLike, matrix: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Cosine of one query vector against every row of `matrix`."""
    q = normalize(query)[0]
    return normalize(matrix) @ q


def dot(query: npt.ArrayLike, matrix: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Dot product of one (unit) query with every (unit) row: cosine without the checks."""
    return np.asarray(matrix, dtype=np.float32) @ np.asarray(query, dtype=np.float32)


def top_k(scores: npt.ArrayLike, k: int) -> list[tuple[int, float]]:
    """The k best (index, score) pairs, best first; ties keep the lower index first."""
    s = np.asarray(scores, dtype=np.float32).ravel()
    if k <= 0 or s.size == 0:
        return []
    k = min(k, s.size)
    part = np.argpartition(-s, k - 1)[:k] if k < s.size else np.arange(s.size)
    order = sorted(part.tolist(), key=lambda i: (-float(s[i]), i))
    return [(i, float(s[i])) for i in order]


def batch_top_k(queries: npt.ArrayLike, matrix: npt.ArrayLike,
                k: int) -> list[list[tuple[int, float]]]:
    """For each query row, the k best rows of `matrix` by dot product."""
    scores = np.atleast_2d(np.asarray(queries, dtype=np.float32)) @ np.asarray(
        matrix, dtype=np.float32).T
    return [top_k(row, k) for row in scores]


def score_profile(scores: Sequence[float] | npt.ArrayLike) -> dict[str, float]:
    """Best score, its margin over the runner-up, and its z-score within `scores`.

    The inputs of a silence rule (see bench/embeddings/README.md): raw cosine
    alone does not tell an off-topic prompt from a paraphrase.
    """
    s = np.asarray(scores, dtype=np.float32).ravel()
    if s.size == 0:
        return {"best": 0.0, "margin": 0.0, "z": 0.0}
    ordered = np.sort(s)[::-1]
    best = float(ordered[0])
    second = float(ordered[1]) if s.size > 1 else 0.0
    sd = float(s.std())
    return {"best": best, "margin": best - second,
            "z": (best - float(s.mean())) / sd if sd > 0 else 0.0}
