"""`embed.flat`: the numpy-free vector arithmetic gives what numpy gives."""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
import textwrap
from array import array
from typing import Any

import numpy as np
import pytest

from dsh_mnemo.embed import flat


def random_unit(rng: random.Random, dim: int) -> list[float]:
    values = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


@pytest.mark.parametrize("rows", [1, 2, 7, 300, 5000])
def test_scores_top_and_stats_match_numpy(rows: int) -> None:
    rng = random.Random(rows)
    dim = 384
    matrix = np.asarray([random_unit(rng, dim) for _ in range(rows)], dtype=np.float32)
    query = np.asarray(random_unit(rng, dim), dtype=np.float32)
    blobs = [r.astype("<f4").tobytes() for r in matrix]
    buffer = flat.from_blobs(blobs, dim)
    scores = flat.scores(buffer, dim, flat.vector(query), rows)
    expected = matrix @ query
    assert np.allclose(np.asarray(scores), expected, atol=1e-6)
    order = flat.top(scores, 5)
    assert order == sorted(range(rows), key=lambda i: -expected[i])[:5]
    best, mean, std = flat.stats(scores)
    assert best == pytest.approx(float(expected.max()), abs=1e-6)
    assert mean == pytest.approx(float(expected.mean()), abs=1e-6)
    assert std == pytest.approx(float(expected.std()), abs=1e-6)
    for at in (0, rows - 1):
        assert np.array_equal(np.asarray(flat.row(buffer, dim, at)), matrix[at])


def test_ties_keep_the_lower_position_first() -> None:
    assert flat.top(array("f", [0.5, 0.9, 0.5, 0.9, 0.1]), 4) == [1, 3, 0, 2]
    assert flat.top(array("f", [0.2]), 3) == [0]
    assert flat.top(array("f", []), 3) == []
    # many values (the cutoff first, then the positions reaching it): the same rule
    rng = random.Random(7)
    many = array("f", [rng.choice([0.1, 0.5, 0.7, 0.9]) for _ in range(5000)])
    for k in (1, 5, 15, 1400):
        assert flat.top(many, k) == sorted(range(len(many)), key=lambda i: -many[i])[:k]


def test_the_sums_of_the_stats_from_blas_are_all_but_exact(monkeypatch) -> None:
    """Far closer to the exact sums than numpy's float32 mean and std (about 1e-7
    off), which the resident server's gate reads: a cold and a warm prompt agree."""
    from dsh_mnemo.embed import blas

    library = blas.get()
    assert library is not None and library.sums(array("f")) == (0.0, 0.0)
    rng = random.Random(3)
    values = array("f", [rng.uniform(0.6, 0.95) for _ in range(100_000)])
    total, squares = library.sums(values)  # type: ignore[misc]
    assert total == pytest.approx(math.fsum(values), rel=1e-8)
    assert squares == pytest.approx(math.fsum(v * v for v in values), rel=1e-8)
    with_blas = flat.stats(values)
    monkeypatch.setattr(blas, "_loaded", [None])
    exact = flat.stats(values)
    assert with_blas[0] == exact[0]
    assert with_blas[1:] == pytest.approx(exact[1:], rel=1e-6)
    as_numpy = np.asarray(values, dtype=np.float32)
    assert abs(with_blas[1] - math.fsum(values) / len(values)) < \
        abs(float(as_numpy.mean()) - math.fsum(values) / len(values)) + 1e-12


def test_rows_are_mapped_from_their_file_without_a_copy(tmp_path) -> None:
    values = np.asarray([1.5, -2.25, 3.0, 0.5], dtype="<f4")
    stored = tmp_path / "rows"
    stored.write_bytes(b"head" + values.tobytes())
    with open(stored, "rb") as handle:
        mapped = flat.map_rows(handle, 4, 4)
    assert isinstance(mapped, memoryview) and flat.is_flat(mapped)
    assert list(mapped) == values.tolist() and list(flat.copy(mapped)) == values.tolist()
    mapped[0] = 9.0  # private pages: the file stays as it was
    assert stored.read_bytes()[4:8] == values[:1].tobytes()
    with open(stored, "rb") as handle, pytest.raises(EOFError):
        flat.map_rows(handle, 4, 5)  # a file cut short is not a matrix


def test_unit_dot_and_bytes_round_trip() -> None:
    v = flat.unit([3.0, 4.0])
    assert list(v) == pytest.approx([0.6, 0.8])
    assert list(flat.unit([0.0, 0.0])) == [0.0, 0.0]
    assert flat.dot(v, array("f", [1.0, 0.0])) == pytest.approx(0.6)
    assert flat.dot(np.asarray([1.0, 0.0], dtype=np.float32), v) == pytest.approx(0.6)
    assert flat.dot(v, np.asarray([0.0, 1.0], dtype=np.float32)) == pytest.approx(0.8)
    stored = np.asarray([1.5, -2.25, 3.0], dtype="<f4").tobytes()
    assert flat.to_bytes(flat.from_blobs([stored], 3)) == stored


def test_blobs_that_are_not_whole_vectors_are_refused() -> None:
    with pytest.raises(ValueError, match="whole 3-d"):
        flat.from_blobs([b"\0" * 8], 3)


@pytest.mark.parametrize(("env", "expected"), [
    ({}, ["False", "True", "True", "True", "False", "False"]),  # numpy's BLAS found
    ({"MNEMO_NO_BLAS": "1"}, ["False", "True", "False", "False", "False", "False"]),
])
def test_a_large_namespace_or_a_process_with_numpy_uses_numpy(
        env: dict[str, str], expected: list[str]) -> None:
    assert flat.numpy_loaded()  # this test module imported it
    assert not flat.wanted(10)
    code = textwrap.dedent("""
        import sys
        from dsh_mnemo.embed import flat
        print(flat.numpy_loaded(), flat.wanted(flat.MAX_ROWS), flat.wanted(flat.MAX_ROWS + 1),
              flat.wanted(flat.MAX_ROWS_BLAS), flat.wanted(flat.MAX_ROWS_BLAS + 1),
              "numpy" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, **env}, timeout=60, check=True).stdout.split()
    assert out == expected


@pytest.mark.parametrize("rows", [1, 2, 7, 300, 3001])
def test_numpys_blas_through_ctypes_gives_numpys_very_scores(rows: int) -> None:
    """The same routine with the same arguments as numpy's `matrix @ query`: the same
    bits, so a process without numpy ranks exactly as the resident server does."""
    from dsh_mnemo.embed import blas

    library = blas.get()
    assert library is not None and "openblas" in library.path
    rng = np.random.default_rng(rows)
    matrix = rng.standard_normal((rows, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    query = rng.standard_normal(384).astype(np.float32)
    query /= np.linalg.norm(query)
    got = library.scores(flat.from_blobs([matrix.tobytes()], 384), rows, 384,
                         flat.vector(query))
    assert np.asarray(got).tobytes() == (matrix @ query).tobytes()
    assert np.asarray(library.scores(bytearray(matrix.tobytes()), rows, 384,
                                     flat.vector(query))).tobytes() == \
        (matrix @ query).tobytes()  # any writable buffer (a mapped file) too


def test_without_numpys_blas_the_scores_are_computed_in_python(monkeypatch) -> None:
    from dsh_mnemo.embed import blas

    rng = random.Random(5)
    matrix = np.asarray([random_unit(rng, 64) for _ in range(500)], dtype=np.float32)
    query = np.asarray(random_unit(rng, 64), dtype=np.float32)
    buffer = flat.from_blobs([matrix.tobytes()], 64)
    monkeypatch.setattr(blas, "_loaded", [None])
    python = flat.scores(buffer, 64, flat.vector(query), 500)
    monkeypatch.setattr(blas, "_loaded", [])
    monkeypatch.setattr(blas, "library_paths", lambda: [])  # numpy built on another BLAS
    assert blas.get() is None
    assert np.allclose(np.asarray(python), matrix @ query, atol=1e-6)
    assert flat.top(python, 10) == flat.top(array("f", (matrix @ query).tolist()), 10)


def test_a_query_of_another_dimension_is_an_error_as_with_numpy() -> None:
    matrix = flat.from_blobs([np.ones(4, dtype="<f4").tobytes()], 4)
    with pytest.raises(ValueError, match="3-d query"):
        flat.scores(matrix, 4, array("f", [1.0, 0.0, 0.0]), 1)
    with pytest.raises(ValueError):
        np.ones((1, 4), dtype=np.float32) @ np.ones(3, dtype=np.float32)


def test_the_joint_profile_of_two_banks_is_the_same_flat_or_numpy() -> None:
    """A memory both banks scored (a global row the workspace bank also holds)
    counts once; an empty profile needs no numpy."""
    from dsh_mnemo.memory import semantic, store

    own = {"a": 0, "b": 1, "g1": 2}
    other = {"g1": 0, "g2": 1, "g3": 2}
    own_scores, other_scores = [0.9, 0.2, 0.5], [0.5, 0.7, 0.1]

    def profiles(make: Any) -> list[Any]:
        return [semantic.Profile(count=3, scores=make(own_scores), index=own),
                semantic.Profile(count=3, scores=make(other_scores), index=other)]

    as_numpy = store._joint_profile(profiles(lambda v: np.asarray(v, dtype=np.float32)))
    as_flat = store._joint_profile(profiles(lambda v: array("f", v)))
    expected = np.asarray([0.9, 0.2, 0.5, 0.7, 0.1], dtype=np.float32)
    assert as_numpy["count"] == as_flat["count"] == 5
    for key, value in (("best", expected.max()), ("mean", expected.mean()),
                       ("std", expected.std())):
        assert as_numpy[key] == pytest.approx(float(value), abs=1e-6)
        assert as_flat[key] == pytest.approx(float(value), abs=1e-6)
    empty = store._joint_profile([semantic.Profile(), semantic.Profile()])
    assert empty == {"best": 0.0, "mean": 0.0, "std": 0.0, "count": 0}


def test_rows_are_read_from_a_file_in_one_go(tmp_path) -> None:
    values = np.asarray([1.5, -2.25, 3.0, 0.5], dtype="<f4")
    stored = tmp_path / "rows"
    stored.write_bytes(b"head" + values.tobytes())
    with open(stored, "rb") as handle:
        handle.seek(4)
        assert list(flat.read_rows(handle, 4)) == values.tolist()
    with open(stored, "rb") as handle, pytest.raises(EOFError):
        handle.seek(4)
        flat.read_rows(handle, 5)  # a file cut short is not a matrix
