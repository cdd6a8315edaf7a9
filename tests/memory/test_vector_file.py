"""The matrix file a process leaves for the next one: its format, its checks, its clean-up."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from dsh_mnemo.memory import vector_file


def _bank(tmp_path: Path, name: str = "bank") -> Path:
    path = tmp_path / name / "mnemosyne.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def _key(db: Path, namespace: str = "ns") -> tuple[str, str, str, bool]:
    return (str(db), namespace, "model-a", True)


def _matrix(rows: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)


FILES = ((1, 2, 3), None)
COUNTS = (5, 9, 7)


def test_a_matrix_comes_back_as_written_with_room_for_more_rows(tmp_path: Path) -> None:
    db = _bank(tmp_path)
    matrix = _matrix(5)
    ids = [f"id-{n}" for n in range(5)]
    path = vector_file.write(_key(db), ids, matrix, FILES, COUNTS)
    assert path is not None and path.parent == vector_file.folder()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    found = vector_file.read(_key(db))
    assert found is not None
    assert found["ids"] == ids and found["dim"] == 8
    assert found["files"] == FILES and found["counts"] == COUNTS
    buffer = found["buffer"]
    assert buffer.shape[0] > 5 and not buffer[5:].any()  # the room reads as zeros
    assert np.array_equal(buffer[:5], matrix)
    buffer[5] = 1.0  # copy-on-write: the process's own, never the file's
    again = vector_file.read(_key(db))
    assert again is not None and not again["buffer"][5].any()


def test_a_file_is_used_only_for_its_own_key(tmp_path: Path) -> None:
    db = _bank(tmp_path)
    path = vector_file.write(_key(db), ["a"], _matrix(1), FILES, COUNTS)
    assert path is not None
    assert vector_file.read(_key(db, "other")) is None
    # a file under another key's name (copied by hand) says whose it is
    other = vector_file.path_for(_key(db, "other"))
    other.write_bytes(path.read_bytes())
    assert vector_file.read(_key(db, "other")) is None


@pytest.mark.parametrize("damage", ["truncated", "magic", "header", "longer"])
def test_a_damaged_file_is_ignored(tmp_path: Path, damage: str) -> None:
    db = _bank(tmp_path)
    path = vector_file.write(_key(db), ["a", "b"], _matrix(2), FILES, COUNTS)
    assert path is not None
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[:-4])
    elif damage == "magic":
        path.write_bytes(b"x" + data[1:])
    elif damage == "header":
        path.write_bytes(data[:len(vector_file.MAGIC) + 4] + b"{not json" + data[40:])
    else:
        path.write_bytes(data + b"\0" * 4)
    assert vector_file.read(_key(db)) is None


def test_which_rows_are_conversation_turns_is_kept_and_checked(tmp_path: Path) -> None:
    db = _bank(tmp_path)
    kinds = bytes([1, 0, 0, 1, 0])
    path = vector_file.write(_key(db), [f"id-{n}" for n in range(5)], _matrix(5), FILES,
                             COUNTS, facts=kinds)
    assert path is not None
    found = vector_file.read(_key(db))
    assert found is not None and bytes(found["facts"]) == kinds
    # without kinds every row is a memory
    assert vector_file.write(_key(db), ["a", "b"], _matrix(2), FILES, COUNTS) is not None
    assert bytes(vector_file.read(_key(db))["facts"]) == b"\x01\x01"
    # kinds of another length, or a byte that is neither 0 nor 1, are no file
    assert vector_file.write(_key(db), ["a", "b"], _matrix(2), FILES, COUNTS,
                             facts=b"\x01") is None
    path = vector_file.write(_key(db), ["a", "b"], _matrix(2), FILES, COUNTS, facts=b"\x01\x00")
    assert path is not None
    data = bytearray(path.read_bytes())
    at = data.index(b"a\nb") + 3
    data[at + 1] = 2
    path.write_bytes(bytes(data))
    assert vector_file.read(_key(db)) is None
    # a file of the first format (no kinds) is not read: the bank is
    path = vector_file.write(_key(db), ["a", "b"], _matrix(2), FILES, COUNTS)
    path.write_bytes(path.read_bytes().replace(vector_file.MAGIC, b"mnemo-vectors/1\n", 1))
    assert vector_file.read(_key(db)) is None


def test_ids_that_cannot_be_written_leave_no_file(tmp_path: Path) -> None:
    db = _bank(tmp_path)
    assert vector_file.write(_key(db), ["a\nb"], _matrix(1), FILES, COUNTS) is None
    assert vector_file.write(_key(db), ["a", "b"], _matrix(1), FILES, COUNTS) is None
    assert not vector_file.path_for(_key(db)).exists()


def test_files_of_a_bank_that_is_gone_and_the_oldest_past_the_limit_are_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_file, "MAX_FILES", 2)
    banks = [_bank(tmp_path, f"b{n}") for n in range(4)]
    written = []
    for n, db in enumerate(banks[:3]):
        path = vector_file.write(_key(db), ["a"], _matrix(1), FILES, COUNTS)
        assert path is not None
        os.utime(path, (1000 + n, 1000 + n))
        written.append(path)
    assert all(p.exists() for p in written[1:])
    banks[1].unlink()
    latest = vector_file.write(_key(banks[3]), ["a"], _matrix(1), FILES, COUNTS)
    assert latest is not None and latest.exists()
    assert not written[1].exists()  # its bank is gone
    assert not written[0].exists()  # the oldest, past the limit
    assert written[2].exists()


def test_remove_for_takes_every_file_of_one_bank_only(tmp_path: Path) -> None:
    mine, theirs = _bank(tmp_path, "mine"), _bank(tmp_path, "theirs")
    for namespace in ("ns", "ns2"):
        assert vector_file.write(_key(mine, namespace), ["a"], _matrix(1), FILES, COUNTS)
    kept = vector_file.write(_key(theirs), ["a"], _matrix(1), FILES, COUNTS)
    assert vector_file.remove_for(mine) == 2
    assert vector_file.read(_key(mine)) is None and vector_file.read(_key(mine, "ns2")) is None
    assert kept is not None and vector_file.read(_key(theirs)) is not None


def test_a_file_of_another_model_goes_when_the_namespace_gets_a_new_one(
        tmp_path: Path) -> None:
    """After a reindex with another model, the old model's matrix is not kept around."""
    db = _bank(tmp_path)
    old = vector_file.write((str(db), "ns", "model-old", True), ["a"], _matrix(1), FILES,
                            COUNTS)
    other_namespace = vector_file.write((str(db), "ns2", "model-old", True), ["a"],
                                        _matrix(1), FILES, COUNTS)
    new = vector_file.write((str(db), "ns", "model-new", True), ["a"], _matrix(1), FILES,
                            COUNTS)
    assert old is not None and other_namespace is not None and new is not None
    assert not old.exists()
    assert new.exists() and other_namespace.exists()



def test_a_small_file_mapped_without_numpy_holds_the_same_vectors(tmp_path: Path) -> None:
    from dsh_mnemo.embed import flat

    db = _bank(tmp_path)
    matrix = _matrix(5)
    ids = [f"id-{n}" for n in range(5)]
    assert vector_file.write(_key(db), ids, matrix, FILES, COUNTS) is not None
    found = vector_file.read(_key(db), flat_if=lambda rows: rows <= 5)
    assert found is not None and found["ids"] == ids and found["counts"] == COUNTS
    buffer = found["buffer"]
    # a float32 view of a private mapping of the file, nothing copied: the rows, then
    # the room for more (zeros), as numpy's mapping of it
    assert isinstance(buffer, memoryview) and buffer.format == "f" and flat.is_flat(buffer)
    assert len(buffer) == (5 + 5 // 4 + 64) * 8
    assert np.array_equal(np.frombuffer(buffer, dtype=np.float32)[:5 * 8].reshape(5, 8),
                          matrix)
    assert not any(buffer[5 * 8:])
    assert list(flat.row(buffer, 8, 3)) == [float(v) for v in matrix[3]]
    own = flat.copy(buffer[:5 * 8])
    assert own == flat.from_blobs([matrix.astype("<f4").tobytes()], 8)
    # written to, the view changes this process's pages only, never the file
    buffer[0] = 42.0
    again = vector_file.read(_key(db), flat_if=lambda rows: rows <= 5)
    assert again is not None and again["buffer"][0] == float(matrix[0][0]) != 42.0
    # a file shorter than its header says is not used
    path = vector_file.path_for(_key(db))
    path.write_bytes(path.read_bytes()[:-4 * 8 * 130])
    assert vector_file.read(_key(db), flat_if=lambda rows: rows <= 5) is None
    assert vector_file.write(_key(db), ids, matrix, FILES, COUNTS) is not None
    # one row more than flat_if takes: mapped as before
    mapped = vector_file.read(_key(db), flat_if=lambda rows: rows <= 4)
    assert mapped is not None and isinstance(mapped["buffer"], np.memmap)


def test_a_flat_matrix_is_written_as_the_same_file(tmp_path: Path) -> None:
    from dsh_mnemo.embed import flat

    db = _bank(tmp_path)
    matrix = _matrix(3)
    path = vector_file.write(_key(db), ["a", "b", "c"], matrix, FILES, COUNTS)
    assert path is not None
    written = path.read_bytes()
    path.unlink()
    as_flat = flat.from_blobs([matrix.astype("<f4").tobytes()], 8)
    assert vector_file.write(_key(db), ["a", "b", "c"], as_flat, FILES, COUNTS, dim=8) == path
    assert path.read_bytes() == written
    assert vector_file.write(_key(db), ["a", "b"], as_flat, FILES, COUNTS, dim=8) is None
    assert vector_file.write(_key(db), ["a", "b", "c"], as_flat, FILES, COUNTS, dim=5) is None
