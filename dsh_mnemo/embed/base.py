"""What every embedding backend is: the `Embedder` protocol, its error, and `LoadResult`.

Cheap to import (no numpy): the hook imports this on every prompt, and the
heavy parts of a backend load only inside `load_backend`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    #: rows are unit-length float32 vectors, one per input text, in input order
    Vectors = npt.NDArray[np.float32]


class EmbedError(Exception):
    """An embedding call failed (server down, timeout, bad answer).

    Callers fall back to lexical recall for that request; the message is one
    line, fit for a log.
    """


@runtime_checkable
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


@dataclass(frozen=True)
class LoadResult:
    """What `load_backend` gives back; `embedder is None` means: use lexical recall.

    `reason` is one line saying why there is no embedder (for the log and for
    `mnemo doctor`); `seconds` is how long the attempt took.
    """

    embedder: Embedder | None
    reason: str | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.embedder is not None
