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
    # Other directories this memory was at: earlier places of the entry and of the
    # entries it superseded (a moved project, the checkout a rebind replaced).
    previous_paths: list[str] = field(default_factory=list)


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
        state=_entry_state(e), db_exists=paths.bank_db_path(e.bank, index.base).exists(),
        previous_paths=[p for p in data.known_paths(e) if p != e.lastSeenPath])
        for e in grouped(data)]
    found = orphan_scan.find_orphans(index, data)
    return WorkspacesReport(workspaces=rows, orphans=found,
                            suggestions=(orphan_scan.suggestions(cwd, index, found, data)
                                         if cwd is not None else []),
                            pending=orphan_scan.pending_moves(index, data),
                            index_recovered_from=index.recovery.moved_to
                            if index.recovery else None)


def grouped(data: IndexData) -> list[WorkspaceEntry]:
    """The entries, each active one followed by those it superseded (whose memory
    it now holds); a superseded entry whose successor is gone comes last."""
    order: list[WorkspaceEntry] = []
    for entry in data.workspaces:
        if not entry.supersededBy:
            order += [entry, *data.predecessors(entry)]
    placed = {id(e) for e in order}
    return order + [e for e in data.workspaces if id(e) not in placed]


# ---------------------------------------------------------------------------
# One marker in two live directories: copies that share one memory


@record
class SharedMarker:
    """A workspace whose marker is in two or more existing directories."""

    identity_key: str
    display_name: str
    directories: list[str]  # every one of them; the first keeps the memory
    copies: list[str]  # the others
    # Every directory is a checkout of one git repository (a common first commit)
    # that has the marker committed: sharing it through git, as `bind` intends.
    through_git: bool = False

    def own_memory_commands(self) -> list[str]:
        """What gives each copy a memory of its own (the first keeps this one)."""
        return [own_memory_command(copy) for copy in self.copies]


def own_memory_command(directory: str) -> str:
    """The shell command that gives `directory` a new, empty memory of its own: its
    marker goes, and a bind writes a new one (the other directories keep the old)."""
    return (f"rm {shlex.quote(str(Path(directory) / identity.MARKER_NAME))} && "
            f"mnemo bind {shlex.quote(directory)}")


def live_directories(entry: WorkspaceEntry, data: IndexData) -> list[str]:
    """The directories recorded for `entry` (and for the entries it superseded)
    that exist now and hold a marker resolving to it; the one it was bound at
    first, then in the order seen.

    Only the paths the index recorded are looked at (a stat and a small read
    each): the disk is never searched.  One directory reached by two paths
    counts once.
    """
    found: list[str] = []
    seen: set[tuple[int, int]] = set()
    for path in data.known_paths(entry):
        try:
            stat = os.stat(path)
        except (OSError, ValueError):  # ValueError: a NUL in a damaged index's path
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


# A checkout's git answers within this (it reads the index and one commit); a
# git that hangs (a lock, a network file system) makes the copy a plain copy.
GIT_SECONDS = 5.0


def _git(directory: str, *args: str) -> str | None:
    import shutil
    import subprocess

    git = shutil.which("git")
    if git is None:
        return None
    try:
        done = subprocess.run([git, "-C", directory, *args], capture_output=True, text=True,
                              timeout=GIT_SECONDS, check=False,
                              env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def shared_through_git(directories: list[str]) -> bool:
    """Whether every directory is a git checkout of one repository (they share a
    first commit) with the marker committed: clones that share the memory on
    purpose.  A `cp -r` of an uncommitted marker, or a project made from a
    template (a history of its own) that carried the template's marker, is not."""
    roots: set[str] | None = None
    for directory in directories:
        if _git(directory, "ls-files", "--error-unmatch", "--", identity.MARKER_NAME) is None:
            return False
        first = _git(directory, "rev-list", "--max-parents=0", "HEAD")
        commits = set(first.split()) if first else set()
        if not commits:
            return False
        roots = commits if roots is None else roots & commits
        if not roots:
            return False
    return True


def mark_shared_through_git(shared: list[SharedMarker]) -> list[SharedMarker]:
    """`shared` with `through_git` set, and `copies` cut to the directories that do
    not share the first one's repository (a few git calls per shared workspace; the
    doctor's check only, never a hook)."""
    for item in shared:
        first = item.directories[0]
        copies = [c for c in item.copies if not shared_through_git([first, c])]
        item.through_git = not copies
        item.copies = copies or item.copies
    return shared
