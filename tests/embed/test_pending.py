"""A prompt's query vector computed beside the rest of the prompt's work."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from dsh_mnemo.embed import EmbedError, PendingQuery


class Embedder:
    name = "test"
    model_id = "test:2"
    dim = 2

    def __init__(self, fail: BaseException | None = None) -> None:
        self.fail = fail
        self.called = threading.Event()
        self.release = threading.Event()
        self.texts: list[str] = []

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        self.called.set()
        self.release.wait(5)
        self.texts += texts
        if self.fail is not None:
            raise self.fail
        return np.array([[1.0, 0.0]] * len(texts), dtype=np.float32)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self.embed_queries(texts)


def test_the_embedding_starts_at_once_and_result_waits_for_it() -> None:
    embed = Embedder()
    pending = PendingQuery(embed, "how do we deploy?")
    assert embed.called.wait(5)  # running before anyone asked for the result
    embed.release.set()
    assert pending.result().tolist() == [1.0, 0.0]
    assert embed.texts == ["how do we deploy?"]
    assert pending.serves(embed, "how do we deploy?")
    assert not pending.serves(embed, "something else")
    assert not pending.serves(Embedder(), "how do we deploy?")


def test_a_model_that_fails_gives_no_vector() -> None:
    embed = Embedder(fail=EmbedError("server down"))
    embed.release.set()
    assert PendingQuery(embed, "q").result() is None


def test_any_other_error_is_raised_where_the_result_is_asked_for() -> None:
    embed = Embedder(fail=ValueError("a bug"))
    embed.release.set()
    pending = PendingQuery(embed, "q")
    with pytest.raises(ValueError, match="a bug"):
        pending.result()


def test_reuse_keeps_the_vector_on_its_way_only_for_the_same_model_and_text() -> None:
    embed = Embedder()
    embed.release.set()
    pending = PendingQuery(embed, "q")
    assert PendingQuery.reuse(pending, embed, "q") is pending
    other_text = PendingQuery.reuse(pending, embed, "another prompt")
    other_model = PendingQuery.reuse(pending, Embedder(), "q")
    assert other_text is not pending and other_text.serves(embed, "another prompt")
    assert other_model is not pending
    assert PendingQuery.reuse(None, embed, "q").serves(embed, "q")
    other_model.embed.release.set()
