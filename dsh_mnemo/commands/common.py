"""What the command modules share (no command group of its own).

Ids as people type them (`forget`, `standing remove`, `candidates`): an
empty one, one that is not UTF-8, or a prefix too short to stand for an id,
is a bad command line (exit 2), not a row that was not found (exit 5).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import RefusedError, usage_error
from ..memory.store import MIN_ID_PREFIX


def given_id(given: str, what: str, hint: str) -> str:
    """The id a person gave, stripped; an empty one, or bytes that are not UTF-8
    (lone surrogates, which no database query takes), is a bad command line."""
    given = given.strip()
    if not given:
        raise usage_error(f"no {what} id given", hint=hint)
    try:
        given.encode("utf-8")
    except UnicodeEncodeError:
        raise usage_error(f"{given!r} is not a {what} id: it is not UTF-8 text",
                          hint=hint) from None
    return given


@contextmanager
def short_ids_explained(given: str, hint: str) -> Iterator[None]:
    """A refusal (no row has that id) of an id shorter than any prefix mnemo takes
    becomes the bad command line it is, saying how long a prefix must be."""
    try:
        yield
    except RefusedError:
        if len(given.strip()) >= MIN_ID_PREFIX:
            raise
        raise usage_error(f"{given.strip()} is too short for an id prefix: give the first "
                          f"{MIN_ID_PREFIX} or more characters of the id (or all of it)",
                          hint=hint) from None
