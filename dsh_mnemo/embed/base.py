"""What every embedding backend is: the `Embedder` protocol, its error, and `LoadResult`.

Cheap to import (no numpy): the hook imports this on every prompt, and the
heavy parts of a backend load only inside `load_backend`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..record import record

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any, Protocol

    import numpy as np
    import numpy.typing as npt

    #: rows are unit-length float32 vectors, one per input text, in input order
    Vectors = npt.NDArray[np.float32]
else:
    Protocol = object  # `Embedder` is checked at run time by `missing_members`


class EmbedError(Exception):
    """An embedding call failed (server down, timeout, bad answer).

    Callers fall back to lexical recall for that request; the message is one
    line, fit for a log.
    """


class OptionsError(ValueError):
    """A backend's options cannot work (no URL, a bad value): the configuration's
    fault, not the model's; `load_backend` says so in `LoadResult.misconfigured`."""


class Embedder(Protocol):
    """A loaded embedding model.

    `model_id` names everything that decides a vector's value (model, its
    version or quantisation, the prefix scheme, the dimension): store it next
    to every vector, and treat a stored vector whose model_id differs from the
    loaded embedder's as stale.
    """

    name: str
    model_id: str
    dim: int

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Vectors for prompts (the side that asks). Raises EmbedError."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Vectors for memories (the side that is found). Raises EmbedError."""
        ...


# What `Embedder` declares: its attributes and its methods, read off the class.
_MEMBERS = (*Embedder.__annotations__,
            *(name for name, value in vars(Embedder).items()
              if callable(value) and not name.startswith("_")))


def missing_members(value: object) -> list[str]:
    """The members of `Embedder` that `value` lacks (what `isinstance` of a
    runtime-checkable protocol would check, without importing typing)."""
    return [name for name in _MEMBERS if not hasattr(value, name)]


@record(frozen=True)
class LoadResult:
    """What `load_backend` gives back; `embedder is None` means: use lexical recall.

    `reason` is one line saying why there is no embedder (for the log and for
    `mnemo doctor`); `seconds` is how long the attempt took; `misconfigured`:
    the reason is the backend's name or options, not the model.
    """

    embedder: Embedder | None
    reason: str | None
    seconds: float
    misconfigured: bool = False

    @property
    def ok(self) -> bool:
        return self.embedder is not None


class PendingQuery:
    """A prompt's query vector, computed in a thread of its own from the moment it exists.

    The embedding is C with the GIL released, so whatever the caller does
    meanwhile (the spool, the context, the full-text candidates) runs beside
    it, and a prompt waits for the slower of the two rather than for both.
    Unless the backend would spread this call over several cores right now
    (its `spreads()` says so: `embed.threads`): then the call is made at once
    and the caller waits for it, since anything the caller ran beside it
    would take a core the embedding counted on.  `result()` is
    the unit vector (a numpy row, or an `array('f')` from a backend with an
    `embed_query(text)` method, which needs no numpy: see `flat`), or None
    when the model failed (`EmbedError`: recall is lexical); any other error
    is raised in the caller's thread.
    """

    def __init__(self, embed: Embedder, text: str) -> None:
        from ..threads import Done, InThread

        self.embed = embed
        self.text = text
        spreads = getattr(embed, "spreads", None)
        self._call = (Done.of(self._vector) if spreads is not None and spreads()
                      else InThread(self._vector, "mnemo-query-embedding"))

    def _vector(self) -> Any:
        try:
            one = getattr(self.embed, "embed_query", None)
            return one(self.text) if one is not None else self.embed.embed_queries([self.text])[0]
        except EmbedError:
            return None

    def result(self) -> Any:
        return self._call.result()

    def serves(self, embed: Embedder, text: str) -> bool:
        """Is this the vector `embed` would give `text`?"""
        return self.embed is embed and self.text == text

    @classmethod
    def reuse(cls, pending: PendingQuery | None, embed: Embedder, text: str) -> PendingQuery:
        """`pending` if it is `text`'s vector from `embed`, else one started now."""
        if pending is not None and pending.serves(embed, text):
            return pending
        return cls(embed, text)
