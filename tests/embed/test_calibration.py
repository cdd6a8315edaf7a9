"""A model's scale for the prefetch gate: measured on the real packaged model, kept per model id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_mnemo.embed import Embedder, calibration
from dsh_mnemo.embed.calibration import REFERENCE, Scale
from tests.embed.conftest import Wider


@pytest.fixture(autouse=True)
def _fresh_memo():
    calibration.forget_memo()
    yield
    calibration.forget_memo()


def test_the_packaged_model_measures_as_the_reference(e5: Embedder) -> None:
    """REFERENCE is what the texts give with the packaged model (the gate's own units)."""
    measured = calibration.measure(e5)
    assert measured.centre == pytest.approx(REFERENCE.centre, abs=0.003)
    assert measured.spread == pytest.approx(REFERENCE.spread, abs=0.002)
    assert calibration.is_reference(e5.model_id)


def test_the_reference_model_is_never_measured_nor_converted(e5: Embedder,
                                                            tmp_path: Path) -> None:
    assert calibration.scale_for(e5, tmp_path) is None
    scale, said = calibration.ensure(e5, tmp_path)
    assert scale is None and "packaged" in said
    assert not (tmp_path / calibration.FILE_NAME).exists()


def test_a_reading_maps_the_models_centre_and_spread_onto_the_reference() -> None:
    wide = Scale(centre=0.1, spread=0.09)
    assert wide.to_reference(0.1) == pytest.approx(REFERENCE.centre)
    # one spread above the centre is one reference spread above the reference centre
    assert wide.to_reference(0.19) == pytest.approx(REFERENCE.centre + REFERENCE.spread)
    # a lift (a difference of two cosines) shrinks by the ratio of the spreads
    lift = wide.to_reference(0.4) - wide.to_reference(0.2)
    assert lift == pytest.approx(0.2 * REFERENCE.spread / 0.09)


def test_a_model_with_a_wider_band_is_measured_once_and_kept(e5: Embedder,
                                                             tmp_path: Path) -> None:
    wider = Wider(e5)
    scale, said = calibration.ensure(wider, tmp_path)
    assert scale is not None and "measured" in said
    assert scale.spread > 2 * REFERENCE.spread and scale.centre < REFERENCE.centre - 0.2
    assert wider.calls == 2  # the queries, then the passages: one batch each
    kept = json.loads((tmp_path / calibration.FILE_NAME).read_text())
    assert kept[wider.model_id]["spread"] == pytest.approx(scale.spread, abs=1e-6)
    # kept: a second call (any process) reads it instead of measuring again
    calibration.forget_memo()
    again, said = calibration.ensure(wider, tmp_path)
    assert wider.calls == 2 and "before" in said
    assert again is not None and again.spread == pytest.approx(scale.spread, abs=1e-6)
    assert calibration.scale_for(wider, tmp_path) is not None
    # asked to, it measures again
    calibration.ensure(wider, tmp_path, again=True)
    assert wider.calls == 4


@pytest.mark.parametrize("content", [
    "{not json",
    "[]",
    '{"test-wider-e5:1": {"centre": 0.1, "spread": 0.0, "texts": 1}}',
    '{"test-wider-e5:1": {"centre": "x", "spread": 0.1, "texts": 1}}',
    '{"test-wider-e5:1": {"centre": 0.1, "spread": 0.1, "texts": 0}}',  # other texts
    '{"test-wider-e5:1": {"centre": 7, "spread": 0.1, "texts": 1}}',
])
def test_a_damaged_or_outdated_entry_counts_as_none(tmp_path: Path, content: str) -> None:
    (tmp_path / calibration.FILE_NAME).write_text(content)
    assert calibration.stored(tmp_path, "test-wider-e5:1") is None


TOKEN = "ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL7zX9cV2b"


def test_a_model_that_fails_is_reported_not_raised_and_not_retried_at_once(
        tmp_path: Path) -> None:
    """A server that answers one text but times out on a batch would otherwise cost
    every `remember` its timeout: a failure waits a day, or `mnemo reindex` (`again`)."""
    from dsh_mnemo.embed import EmbedError

    class Broken:
        model_id = "test-broken:1"
        calls = 0

        def embed_queries(self, texts):
            Broken.calls += 1
            raise EmbedError(f"http://127.0.0.1:9/v1/{TOKEN} timed out")

        embed_documents = embed_queries

    scale, said = calibration.ensure(Broken(), tmp_path, now=1000.0)
    assert scale is None and "timed out" in said and Broken.calls == 1
    kept = (tmp_path / calibration.FILE_NAME).read_text()
    assert TOKEN not in kept and "timed out" in kept  # the reason, scrubbed
    assert calibration.stored(tmp_path, "test-broken:1") is None
    scale, said = calibration.ensure(Broken(), tmp_path, now=1000.0 + 3600)
    assert scale is None and "reindex" in said and Broken.calls == 1  # not tried again
    calibration.ensure(Broken(), tmp_path, now=1000.0 + 3600, again=True)
    assert Broken.calls == 2
    calibration.ensure(Broken(), tmp_path, now=1000.0 + 3600 + calibration.RETRY_AFTER_SECONDS)
    assert Broken.calls == 3


def _save_many(base: str, prefix: str) -> None:
    for n in range(60):
        calibration.save(Path(base), f"{prefix}:{n}", Scale(0.1, 0.05))


def test_two_processes_saving_at_once_keep_every_entry(tmp_path: Path) -> None:
    import multiprocessing

    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_save_many, args=(str(tmp_path), name))
               for name in ("a", "b")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    kept = json.loads((tmp_path / calibration.FILE_NAME).read_text())
    assert len(kept) == 120


def test_a_model_that_gives_every_text_the_same_vector_has_no_scale(tmp_path: Path) -> None:
    class Flat:
        model_id = "test-flat:1"

        def embed_queries(self, texts):
            return [[1.0, 0.0] for _ in texts]

        embed_documents = embed_queries

    scale, said = calibration.ensure(Flat(), tmp_path)
    assert scale is None and "same cosine" in said


def test_a_scale_measured_later_is_seen_by_a_process_that_looked_before(e5: Embedder,
                                                                        tmp_path: Path) -> None:
    """A resident server asked before `mnemo reindex` measured the model sees it after."""
    wider = Wider(e5)
    assert calibration.scale_for(wider, tmp_path) is None
    calibration.save(tmp_path, "another:1", Scale(0.2, 0.05))  # the file now exists
    assert calibration.scale_for(wider, tmp_path) is None
    calibration.ensure(wider, tmp_path)
    assert calibration.scale_for(wider, tmp_path) is not None
