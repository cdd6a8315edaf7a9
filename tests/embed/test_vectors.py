"""Vector helpers: bytes on disk, cosine, top-k; and the thread setting."""

from __future__ import annotations

import numpy as np
import pytest

from dsh_mnemo.embed import vectors
from dsh_mnemo.embed.threads import AUTO_MAX, ThreadPolicy, parse_threads


def test_a_vector_is_stored_as_float32_little_endian_bytes() -> None:
    blob = vectors.to_bytes([1.0, -2.0])
    assert blob == b"\x00\x00\x80\x3f\x00\x00\x00\xc0"
    back = vectors.from_bytes(blob, dim=2)
    assert back.dtype == np.float32 and back.tolist() == [1.0, -2.0]


def test_a_blob_of_the_wrong_size_is_refused() -> None:
    with pytest.raises(ValueError, match="expected 3"):
        vectors.from_bytes(vectors.to_bytes([1.0, 2.0]), dim=3)
    with pytest.raises(ValueError, match="not float32"):
        vectors.from_bytes(b"\x00\x01\x02")
    with pytest.raises(ValueError, match="one vector"):
        vectors.to_bytes([[1.0], [2.0]])


def test_stack_rebuilds_a_matrix_in_order() -> None:
    rows = [np.array([i, i + 0.5], dtype=np.float32) for i in range(3)]
    m = vectors.stack([vectors.to_bytes(r) for r in rows], dim=2)
    assert m.shape == (3, 2) and np.array_equal(m, np.stack(rows))
    with pytest.raises(ValueError):
        vectors.stack([b"\x00" * 12], dim=2)


def test_stack_decodes_straight_into_a_buffer_with_room() -> None:
    rows = [np.array([i, -i], dtype=np.float32) for i in range(3)]
    buffer = np.full((5, 2), 7.0, dtype=np.float32)
    out = vectors.stack([vectors.to_bytes(r) for r in rows], dim=2, into=buffer)
    assert np.shares_memory(out, buffer) and np.array_equal(out, np.stack(rows))
    assert np.array_equal(buffer[3:], np.full((2, 2), 7.0))  # the room is left alone
    with pytest.raises(ValueError):
        vectors.stack([vectors.to_bytes(r) for r in rows], dim=2,
                      into=np.zeros((2, 2), dtype=np.float32))


def test_cosine_normalises_and_dot_does_not() -> None:
    m = np.array([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0]], dtype=np.float32)
    assert np.allclose(vectors.cosine([5.0, 0.0], m), [1.0, 0.0, 2 ** -0.5])
    assert np.allclose(vectors.dot([1.0, 0.0], m), [2.0, 0.0, 1.0])
    assert np.allclose(np.linalg.norm(vectors.normalize(m), axis=1), 1.0)
    assert vectors.normalize([[0.0, 0.0]]).tolist() == [[0.0, 0.0]]


def test_top_k_is_best_first_with_ties_by_index() -> None:
    scores = [0.1, 0.9, 0.5, 0.9, -1.0]
    assert vectors.top_k(scores, 3) == [(1, pytest.approx(0.9)), (3, pytest.approx(0.9)),
                                        (2, pytest.approx(0.5))]
    assert [i for i, _ in vectors.top_k(scores, 10)] == [1, 3, 2, 0, 4]
    assert vectors.top_k(scores, 0) == [] and vectors.top_k([], 3) == []


def test_batch_top_k_ranks_each_query() -> None:
    m = np.eye(3, dtype=np.float32)
    result = vectors.batch_top_k(np.array([[0, 1, 0], [0.2, 0, 0.9]], dtype=np.float32), m, 2)
    assert [[i for i, _ in row] for row in result] == [[1, 0], [2, 0]]


def test_score_profile_gives_best_margin_and_z() -> None:
    p = vectors.score_profile([0.5, 0.9, 0.7, 0.5])
    assert p["best"] == pytest.approx(0.9) and p["margin"] == pytest.approx(0.2)
    assert p["z"] == pytest.approx((0.9 - 0.65) / np.std([0.5, 0.9, 0.7, 0.5]), rel=1e-5)
    assert vectors.score_profile([]) == {"best": 0.0, "margin": 0.0, "z": 0.0}


@pytest.mark.parametrize(("value", "expected"), [(None, 1), (1, 1), (3, 3), ("2", 2),
                                                 ("auto", "auto"), (" AUTO ", "auto")])
def test_thread_settings_parse(value: object, expected: object) -> None:
    assert parse_threads(value) == expected


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "two", ""])
def test_bad_thread_settings_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match="threads"):
        parse_threads(value)


def test_auto_threads_stay_within_bounds() -> None:
    assert ThreadPolicy(3).current() == 3
    assert 1 <= ThreadPolicy("auto").current() <= AUTO_MAX
