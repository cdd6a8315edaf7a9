"""`adopt` and `rebind` as commands: pin, then bring the rows home."""

from __future__ import annotations

from pathlib import Path

from ..migrate import Selection, run_migration
from ..report import Progress
from ..workspace import adopt as adopting
from ..workspace.index import Index
from ..workspace.orphans import workspace_rows


def adopt(namespace: str, path: Path | None = None, *, move: bool = True,
          progress: Progress | None = None, index: Index | None = None
          ) -> adopting.AdoptResult:
    """Pin an orphan namespace to a directory; move its rows out of the default database.

    The move is an ordinary migration (backups, journal, revertible with
    `mnemo migrate revert`); with `move=False` the rows stay and the result
    says how to move them later.
    """
    index = index or Index()
    result = adopting.adopt(namespace, path, index=index)
    if move and result.migrate_command:
        moved = run_migration(Selection(sessions=[namespace]), index=index, progress=progress,
                              kind="adopt")
        result.journal = moved.journal
        result.moved_rows = result.default_rows
        result.bank_rows = workspace_rows(index, namespace, result.bank)
        result.migrate_command = None
    return result
