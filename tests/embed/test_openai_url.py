"""The OpenAI-compatible URL backend against a tiny local server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np
import pytest

from dsh_mnemo.embed import EmbedError, load_backend
from dsh_mnemo.embed.openai_url import endpoint

from .conftest import EmbedServer, fake_vector


def unit(vec: list[float]) -> np.ndarray:
    v = np.asarray(vec, dtype=np.float32)
    return v / np.linalg.norm(v)


def options(server: EmbedServer, **extra: object) -> dict[str, object]:
    return {"url": server.url, "model": "test-embed", **extra}


def test_it_learns_the_dimension_and_returns_unit_vectors_in_input_order(
        embed_server: EmbedServer) -> None:
    result = load_backend("openai-url", options(embed_server))
    assert result.ok, result.reason
    e = result.embedder
    assert e is not None and e.dim == 8
    vecs = e.embed_documents(["alpha", "beta", "gamma"])
    assert vecs.dtype == np.float32 and vecs.shape == (3, 8)
    for row, text in zip(vecs, ["alpha", "beta", "gamma"], strict=True):
        assert np.allclose(row, unit(fake_vector(text, 8)), atol=1e-6)
    assert embed_server.requests[-1] == {"model": "test-embed", "input": ["alpha", "beta", "gamma"],
                                         "encoding_format": "float"}
    assert embed_server.headers[-1]["Content-Type"] == "application/json"


def test_a_configured_dimension_means_no_request_at_load(embed_server: EmbedServer) -> None:
    assert load_backend("openai-url", options(embed_server, dim=8)).ok
    assert embed_server.requests == []


def test_prefixes_are_sent_and_change_the_model_id(embed_server: EmbedServer) -> None:
    e = load_backend("openai-url", options(embed_server, dim=8, query_prefix="query: ",
                                           document_prefix="passage: ")).embedder
    plain = load_backend("openai-url", options(embed_server, dim=8)).embedder
    assert e is not None and plain is not None
    e.embed_queries(["q"])
    e.embed_documents(["d"])
    assert [r["input"] for r in embed_server.requests] == [["query: q"], ["passage: d"]]
    assert e.model_id != plain.model_id and "test-embed" in e.model_id


def test_the_prefixes_come_from_the_settings(embed_server: EmbedServer) -> None:
    """`embeddings.query_prefix` / `document_prefix`, as `mnemo config set` writes them."""
    from dsh_mnemo.memory import semantic
    from tests.conftest import configure

    settings = configure(embeddings__backend="openai-url", embeddings__url=embed_server.url,
                         embeddings__model="test-embed", embeddings__query_prefix="query: ",
                         embeddings__document_prefix="passage: ")
    semantic.reset()
    try:
        e = semantic.embedder(settings)
        assert e is not None, semantic.load(settings).reason
        e.embed_queries(["q"])
        e.embed_documents(["d"])
    finally:
        semantic.reset()
    assert [r["input"] for r in embed_server.requests][-2:] == [["query: q"], ["passage: d"]]


def test_texts_are_sent_in_batches(embed_server: EmbedServer) -> None:
    e = load_backend("openai-url", options(embed_server, dim=8, batch=2)).embedder
    assert e is not None
    assert e.embed_documents([f"t{i}" for i in range(5)]).shape == (5, 8)
    assert [len(r["input"]) for r in embed_server.requests] == [2, 2, 1]


def test_base64_answers_are_decoded(embed_server: EmbedServer) -> None:
    embed_server.base64 = True
    e = load_backend("openai-url", options(embed_server, dim=8)).embedder
    assert e is not None
    assert np.allclose(e.embed_queries(["x"])[0], unit(fake_vector("x", 8)), atol=1e-6)


def test_the_api_key_comes_from_the_named_variable_and_is_never_kept(
        embed_server: EmbedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEMO_TEST_EMBED_KEY", "sk-test-not-a-real-key")
    e = load_backend("openai-url", options(embed_server, api_key_env="MNEMO_TEST_EMBED_KEY"))
    assert e.ok, e.reason
    assert embed_server.headers[-1]["Authorization"] == "Bearer sk-test-not-a-real-key"
    assert e.embedder is not None
    kept = repr(e.embedder) + e.embedder.model_id + repr(vars(e.embedder))
    assert "sk-test" not in kept
    monkeypatch.delenv("MNEMO_TEST_EMBED_KEY")
    with pytest.raises(EmbedError, match="MNEMO_TEST_EMBED_KEY is not set"):
        e.embedder.embed_queries(["x"])


KEY = "QryKeyZq8vT3mN9xQ"


def test_the_model_id_never_holds_the_query_of_the_url(embed_server: EmbedServer) -> None:
    """The id is written beside every vector and into calibration.json: a key in the
    URL's query (`?api-key=…`) must not be; the request still carries it."""
    def model_id(url: str) -> str:
        e = load_backend("openai-url", {"url": url, "model": "test-embed", "dim": 8}).embedder
        assert e is not None
        return e.model_id

    base = embed_server.url
    prefixes = hashlib.sha256(b"\0").hexdigest()[:8]
    # a URL without a query is named as before: the vectors stored with it stay valid
    assert model_id(base) == f"openai-url:{base}/embeddings:test-embed:prefix-{prefixes}:8"
    keyed = model_id(f"{base}?api-key={KEY}&api-version=2024-02-01")
    assert KEY not in keyed and "api-version" not in keyed
    assert keyed.startswith(f"openai-url:{base}/embeddings?query-")
    # a new key is the same model; another endpoint (the query's other values) is not
    assert model_id(f"{base}?api-version=2024-02-01&api-key=rotated") == keyed
    assert len({keyed, model_id(base), model_id(f"{base}?api-version=2024-06-01&api-key=x"),
                model_id(f"{base}?code={KEY}")}) == 4
    assert KEY not in model_id(f"{base}?code={KEY}")

    e = load_backend("openai-url", {"url": f"{base}?api-key={KEY}", "model": "m"}).embedder
    assert e is not None
    e.embed_documents(["x"])
    assert embed_server.paths[-1] == f"/v1/embeddings?api-key={KEY}"


def test_a_key_in_the_url_query_reaches_no_file(embed_server: EmbedServer, make_repo,
                                                data_dir: Path) -> None:
    """`mnemo remember` with such a URL: the vectors' model id and the model's scale
    in calibration.json hold no part of the key, and an entry an earlier mnemo kept
    under the whole URL is dropped."""
    from dsh_mnemo.embed import calibration
    from dsh_mnemo.memory import semantic
    from tests.conftest import bind_repo, configure
    from tests.memory.conftest import mnemo, query
    from tests.memory.test_forget_and_pins import raw_bytes

    url = f"{embed_server.url}?api-key={KEY}"
    repo = bind_repo(make_repo("app"))
    data_dir.mkdir(parents=True, exist_ok=True)
    earlier = f"openai-url:{embed_server.url}/embeddings?api-key={KEY}:test-embed:prefix-x:8"
    (data_dir / calibration.FILE_NAME).write_text(json.dumps(
        {earlier: {"centre": 0.1, "spread": 0.2, "texts": calibration.TEXTS_VERSION}}))
    configure(embeddings__backend="openai-url", embeddings__url=url,
              embeddings__model="test-embed")
    semantic.reset()
    calibration.forget_memo()
    try:
        done = mnemo("remember", "We deploy with make release.", "--json", cwd=repo.path)
    finally:
        semantic.reset()
        calibration.forget_memo()
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["embedded"] is True
    assert embed_server.paths and all(KEY in p for p in embed_server.paths)
    (model_id,) = query(repo.db(data_dir), "SELECT DISTINCT model_id FROM mnemo_vectors")[0]
    assert "?query-" in model_id and KEY not in model_id
    kept = json.loads((data_dir / calibration.FILE_NAME).read_text())
    assert list(kept) == [model_id]
    from dsh_mnemo.memory import driver

    driver.reset_cache()
    assert KEY.encode() not in raw_bytes(data_dir)


# A server far slower than the timeout: a loaded machine can stretch a 0.3 s wait
# to a few seconds, never to this, so the bound below still tells a request cut
# at its timeout from one that waited for the answer.
SLOW_SERVER = 20.0


def test_a_slow_server_costs_one_timeout_then_an_error(embed_server: EmbedServer) -> None:
    e = load_backend("openai-url", options(embed_server, dim=8, timeout=0.3)).embedder
    assert e is not None
    embed_server.delay = SLOW_SERVER
    started = time.monotonic()
    with pytest.raises(EmbedError, match="unreachable"):
        e.embed_queries(["slow"])
    assert time.monotonic() - started < SLOW_SERVER / 4


def test_a_slow_server_at_load_is_refused_within_the_timeout(embed_server: EmbedServer) -> None:
    embed_server.delay = SLOW_SERVER
    result = load_backend("openai-url", options(embed_server, timeout=0.3))
    assert result.embedder is None and result.reason and "unreachable" in result.reason
    assert result.seconds < SLOW_SERVER / 4


def test_a_closed_port_is_refused_at_once(embed_server: EmbedServer) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = load_backend("openai-url", {"url": f"http://127.0.0.1:{port}/v1", "model": "m"})
    assert result.embedder is None and result.reason and "unreachable" in result.reason
    assert not result.misconfigured
    assert result.seconds < 2.5


@pytest.mark.parametrize(("status", "body", "match"), [
    (500, b'{"error": "boom"}', "HTTP 500"),
    (200, b"not json", "not an embeddings list"),
    (200, b'{"data": [{"index": 0}]}', "not an embeddings list"),
    (200, b'{"data": []}', "0 vectors for 1 texts"),
    (200, b'{"data": [{"index": 0, "embedding": [1, 2]}, {"index": 1, "embedding": [1]}]}',
     "different sizes"),
    (200, b'{"data": [{"index": 0, "embedding": [0, 0, 0, 0, 0, 0, 0, 0]}]}', "all-zero"),
])
def test_a_bad_answer_is_an_embed_error(embed_server: EmbedServer, status: int, body: bytes,
                                        match: str) -> None:
    e = load_backend("openai-url", options(embed_server, dim=8)).embedder
    assert e is not None
    embed_server.status, embed_server.body = status, body
    with pytest.raises(EmbedError, match=match):
        e.embed_queries(["x"])


def test_a_dimension_change_is_an_embed_error(embed_server: EmbedServer) -> None:
    e = load_backend("openai-url", options(embed_server, dim=8)).embedder
    assert e is not None
    embed_server.dim = 4
    with pytest.raises(EmbedError, match="4-d vectors, expected 8"):
        e.embed_documents(["x"])


def test_a_dimension_change_between_batches_is_an_embed_error(embed_server: EmbedServer
                                                              ) -> None:
    e = load_backend("openai-url", options(embed_server, dim=8, batch=1)).embedder
    assert e is not None
    embed_server.model = lambda texts: [fake_vector(t, 4 if t == "b" else 8) for t in texts]
    with pytest.raises(EmbedError, match="4-d vectors, expected 8"):
        e.embed_documents(["a", "b"])


@pytest.mark.parametrize(("opts", "words"), [
    ({"model": "m"}, "url is required"),
    ({"url": "file:///etc/passwd", "model": "m"}, "http(s) URL"),
    ({"url": "http://user:pw@127.0.0.1/v1", "model": "m"}, "credentials"),
    ({"url": "http://127.0.0.1:9/v1"}, "model is required"),
    ({"url": "http://127.0.0.1:9/v1", "model": "m", "timeout": 0}, "timeout"),
    ({"url": "http://127.0.0.1:9/v1", "model": "m", "timeout": 300}, "timeout"),
    ({"url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "A=B"}, "api_key_env"),
    ({"url": "http://127.0.0.1:9/v1", "model": "m", "dim": "big"}, "dim"),
    ({"url": "http://127.0.0.1:9/v1", "model": "m", "key": "sk-x"}, "unknown option"),
])
def test_bad_options_are_refused_without_a_request(opts: dict[str, object], words: str) -> None:
    result = load_backend("openai-url", opts)
    assert result.embedder is None and result.reason and words in result.reason
    assert result.misconfigured  # the settings' fault: `mnemo reindex` exits 3


@pytest.mark.parametrize(("url", "expected"), [
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/embeddings"),
    ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1/embeddings"),
    ("https://api.example.test/v1/embeddings", "https://api.example.test/v1/embeddings"),
])
def test_the_endpoint_is_the_embeddings_path(url: str, expected: str) -> None:
    assert endpoint(url) == expected


def test_a_server_that_drips_its_answer_is_cut_off_at_the_deadline() -> None:
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    stop = threading.Event()

    def drip() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            while not stop.wait(0.1):  # one byte at a time, never done
                try:
                    conn.sendall(b" ")
                except OSError:
                    return

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    try:
        e = load_backend("openai-url", {"url": url, "model": "m", "dim": 8, "timeout": 0.5})
        assert e.embedder is not None
        started = time.monotonic()
        with pytest.raises(EmbedError, match="no answer within 0.5 s"):
            e.embedder.embed_queries(["x"])
        # Its answer would take hours at a byte a tick; seconds of a loaded machine
        # on top of the 0.5 s are not what this bound is about.
        assert time.monotonic() - started < 5.0
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=5)
