"""`mnemo workspaces`: every index entry, the orphans, and suggestions for a directory."""

from __future__ import annotations

from pathlib import Path

from .. import paths
from ..record import field, record
from . import identity
from . import orphans as orphan_scan
from .index import Index, WorkspaceEntry
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
