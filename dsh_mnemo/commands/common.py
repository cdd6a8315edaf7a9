"""What the command modules share (no command group of its own).

- ids as people type them (`forget`, `standing remove`, `candidates`): an
  empty one, or a prefix too short to stand for an id, is a bad command
  line (exit 2), not a row that was not found (exit 5);
- the `remember` report of every write a person asks for (`remember`,
  `candidates accept`): whether the text was already a memory there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import RefusedError, usage_error
from ..memory import banks
from ..memory.store import MIN_ID_PREFIX, WriteResult
from ..memory.targets import Target
from ..record import fields, record


def given_id(given: str, what: str, hint: str) -> str:
    """The id a person gave, stripped; an empty one is a bad command line."""
    given = given.strip()
    if not given:
        raise usage_error(f"no {what} id given", hint=hint)
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


@record
class Remembered(WriteResult):
    """A write's result, and whether the same text was already a memory there."""

    # Upstream keeps one row per text in a namespace: a write of a text it holds
    # stores nothing new and refreshes that row (its id is the one returned).
    existed: bool = False


def ids_holding(target: Target, text: str, policy: str) -> set[str]:
    """The ids of the rows of `target` whose text is what a write of `text` stores.

    Read before the write: afterwards the row is there either way.
    """
    from ..memory.scrub import clean_invisible, scrub

    stored = scrub(clean_invisible(text), policy).text  # what `store.remember_at` writes
    db_path = target.db_path()
    with banks.reader(db_path) as conn, banks.translate_sqlite_errors(db_path):
        if conn is None:
            return set()
        return {str(row[0]) for row in banks.rows(
            conn, "SELECT id FROM working_memory WHERE session_id = ? AND content = ?",
            (target.namespace, stored))}


def remembered(result: WriteResult, known: set[str]) -> Remembered:
    """`result` as the `remember` report: `known` are the ids `ids_holding` found."""
    values = {f.name: getattr(result, f.name) for f in fields(result)}
    return Remembered(**values, existed=result.id is not None and result.id in known)
