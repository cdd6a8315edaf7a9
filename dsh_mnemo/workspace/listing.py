"""`mnemo workspaces`: every index entry, the orphans, and suggestions for a directory."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from .. import paths
from ..record import field, record
from . import identity
from . import orphans as orphan_scan
from .index import Index, IndexData, WorkspaceEntry
from .orphans import Orphan


@record
class WorkspaceRow:
    identity_key: str
    namespace: str
    bank: str
    display_name: str
    canonical_path: str
    last_seen_path: str
    bound_at: int
    superseded_by: str | None
    state: str  # "bound" | "missing" | "marker-mismatch" | "superseded"
    db_exists: bool


@record
class WorkspacesReport:
    workspaces: list[WorkspaceRow]
    orphans: list[Orphan] = field(default_factory=list)
    suggestions: list[dict[str, object]] = field(default_factory=list)
    index_recovered_from: str | None = None
    pending: list[Orphan] = field(default_factory=list)  # owned rows still in the default db


def _entry_state(entry: WorkspaceEntry) -> str:
    if entry.supersededBy:
        return "superseded"
    if not entry.lastSeenPath:
        return "missing"
    marker = Path(entry.lastSeenPath) / identity.MARKER_NAME
    if not marker.exists():
        return "missing"
    try:
        found = identity.read_marker(marker)
    except identity.MarkerError:
        return "marker-mismatch"
    return "bound" if identity.identity_key_for(found) == entry.identityKey else "marker-mismatch"


def list_workspaces(*, index: Index | None = None, cwd: Path | None = None
                    ) -> WorkspacesReport:
    """Index entries, orphans (rows without an entry), and, for `cwd`, suggestions."""
    index = index or Index()
    data = index.load()
    rows = [WorkspaceRow(
        identity_key=e.identityKey, namespace=e.namespace, bank=e.bank,
        display_name=e.displayName, canonical_path=e.canonicalPath,
        last_seen_path=e.lastSeenPath, bound_at=e.boundAt, superseded_by=e.supersededBy,
        state=_entry_state(e), db_exists=paths.bank_db_path(e.bank, index.base).exists())
        for e in data.workspaces]
    found = orphan_scan.find_orphans(index, data)
    return WorkspacesReport(workspaces=rows, orphans=found,
                            suggestions=(orphan_scan.suggestions(cwd, index, found, data)
                                         if cwd is not None else []),
                            pending=orphan_scan.pending_moves(index, data),
                            index_recovered_from=index.recovery.moved_to
                            if index.recovery else None)


# ---------------------------------------------------------------------------
# One marker in two live directories: copies that share one memory


@record
class SharedMarker:
    """A workspace whose marker is in two or more existing directories."""

    identity_key: str
    display_name: str
    directories: list[str]  # every one of them; the first keeps the memory
    copies: list[str]  # the others

    def own_memory_commands(self) -> list[str]:
        """What gives each copy a memory of its own (the first keeps this one)."""
        return [own_memory_command(copy) for copy in self.copies]


def own_memory_command(directory: str) -> str:
    """The shell command that gives `directory` a new, empty memory of its own: its
    marker goes, and a bind writes a new one (the other directories keep the old)."""
    return (f"rm {shlex.quote(str(Path(directory) / identity.MARKER_NAME))} && "
            f"mnemo bind {shlex.quote(directory)}")


def live_directories(entry: WorkspaceEntry, data: IndexData) -> list[str]:
    """The directories recorded for `entry` that exist now and hold a marker
    resolving to it; the one it was bound at first, then in the order seen.

    Only the paths the index recorded are looked at (a stat and a small read
    each): the disk is never searched.  One directory reached by two paths
    counts once.
    """
    found: list[str] = []
    seen: set[tuple[int, int]] = set()
    for path in dict.fromkeys((entry.canonicalPath, *entry.previousPaths,
                               entry.lastSeenPath)):
        if not path:
            continue
        try:
            stat = os.stat(path)
        except OSError:
            continue
        if (stat.st_dev, stat.st_ino) in seen:
            continue
        try:
            found_uuid = identity.read_marker(Path(path) / identity.MARKER_NAME)
        except identity.MarkerError:
            continue
        if data.active_for(identity.identity_key_for(found_uuid)) is not entry:
            continue
        seen.add((stat.st_dev, stat.st_ino))
        found.append(path)
    return found


def shared_markers(data: IndexData) -> list[SharedMarker]:
    """Every workspace whose marker is in two or more existing directories
    (a copied checkout, a template that carried its marker): they share one
    memory, which is deliberate only if the user meant it."""
    found = []
    for entry in data.workspaces:
        if entry.supersededBy:
            continue  # its markers resolve to the entry that superseded it
        live = live_directories(entry, data)
        if len(live) >= 2:
            found.append(SharedMarker(identity_key=entry.identityKey,
                                      display_name=entry.displayName,
                                      directories=live, copies=live[1:]))
    return found
