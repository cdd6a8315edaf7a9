"""`adopt` and `rebind`: pointing directories at existing memories.

- **adopt** pins an orphan namespace (rows without an index entry) to a
  directory: a new identity whose entry carries the orphan's namespace and
  bank, and a marker written by mnemo.  Rows of that namespace still in the
  default database are then moved into the bank through the migration
  machinery (backups, journal), unless the caller asks not to.
- **rebind** is a pointer switch with zero data movement:
  the directory's identity (new, or the one its marker already has) takes over
  an existing entry's namespace and bank, and the old entry gets
  `supersededBy`, so a copy of the old marker still resolves to the same
  memory.  It covers a lost or replaced marker and a checkout on a new machine.

Crash safety: the index is written first, the marker second.  A crash in
between leaves an entry whose directory has no marker; running the same
command again recognises it and writes the marker.
"""

from __future__ import annotations

from pathlib import Path

from .. import paths
from ..errors import RefusedError
from ..faults import fault
from ..record import record
from . import identity
from .index import Index, IndexData, WorkspaceEntry, mint_entry
from .orphans import aside_hints, default_stats, workspace_rows


@record
class AdoptResult:
    status: str  # "adopted" | "already-adopted"
    namespace: str
    bank: str
    identity_key: str
    root: str
    marker_path: str
    bank_rows: int  # memories in the workspace's bank (after the move, if any)
    default_rows: int  # memories of the namespace in the default database (before a move)
    moved_rows: int = 0
    journal: str | None = None
    migrate_command: str | None = None  # set when rows were left for a later move


@record
class RebindResult:
    status: str  # "rebound" | "already-bound"
    root: str
    identity_key: str
    namespace: str
    bank: str
    superseded: str | None  # identity key of the entry that handed over its namespace
    marker_path: str
    marker_written: bool
    rows: int


def _uuid_of(identity_key: str) -> str:
    return identity_key[len("id:"):] if identity_key.startswith("id:") else identity_key


def _marker_missing(root: Path) -> bool:
    marker = root / identity.MARKER_NAME
    return not (marker.exists() or marker.is_symlink())


def _refuse_foreign_marker(root: Path, location: identity.Location) -> None:
    if not location.found and not _marker_missing(root):
        identity.read_marker(root / identity.MARKER_NAME)  # raises MarkerError: say why


def adopt(namespace: str, path: Path | None = None, *, index: Index | None = None
          ) -> AdoptResult:
    """Pin `namespace` to the directory `path` (default: the current directory).

    Rows of the namespace still in the default database stay there; the
    result's `migrate_command` says so, and `commands.workspace.adopt` moves
    them with the migration machinery right after.
    """
    if not identity.is_workspace_namespace(namespace):
        raise RefusedError(f"{namespace!r} is not a workspace namespace",
                           hint="Use the full dsh_v2_workspace_<64 hex> name that "
                                "`mnemo workspaces` lists under orphans.")
    root = identity.check_bindable(path or Path.cwd())
    index = index or Index()
    base = index.base
    data = index.load()
    bank = identity.bank_for(namespace)
    location = identity.find_workspace(root)
    _refuse_foreign_marker(root, location)
    owner = next((e for e in data.by_namespace(namespace) if not e.supersededBy), None)
    if location.found:
        key = identity.identity_key_for(location.workspace_uuid or "")
        entry = data.active_for(key)
        if entry is None or entry.namespace != namespace:
            raise RefusedError(
                f"{location.root} already has a marker for another workspace"
                + (f" ({entry.displayName}, {entry.namespace})" if entry else ""),
                hint="Adopt into a directory without a marker, or use `mnemo rebind` to "
                     "point this directory at another workspace's memory.")
        root = location.root or root
        status = "already-adopted"
    elif owner is not None:
        if owner.lastSeenPath != str(root) or not _marker_missing(root):
            raise RefusedError(
                f"{namespace} already belongs to workspace {owner.displayName!r} at "
                f"{owner.lastSeenPath}",
                hint=f"To use that memory here: mnemo rebind {root} --from {namespace}")
        # A previous adopt stopped between the index and the marker: finish it.
        identity.write_marker(root, _uuid_of(owner.identityKey))
        entry, status = owner, "adopted"
    else:
        claimed = next((e for e in data.workspaces if not e.supersededBy
                        and e.lastSeenPath == str(root)), None)
        if claimed is not None:
            # Its marker is gone, but the index still gives this directory a workspace.
            raise RefusedError(
                f"{root} already belongs to workspace {claimed.displayName!r} "
                f"({claimed.namespace}), whose marker is missing",
                hint=f"Restore it with: mnemo rebind {root} --from {claimed.namespace}")
        default_rows = default_stats(index, namespace)
        bank_db = paths.bank_db_path(bank, base)
        if not bank_db.exists() and not (default_rows and default_rows.all_rows):
            raise RefusedError(f"no rows of {namespace} exist in any database: nothing "
                               "to adopt", hint="`mnemo workspaces` lists the orphans.")
        # Where the orphan lived, when a set-aside index still says so.
        hint = aside_hints(index).get(namespace)
        workspace_uuid = identity.new_workspace_uuid()
        key = identity.identity_key_for(workspace_uuid)
        with index.transaction() as fresh:
            if any(not e.supersededBy for e in fresh.by_namespace(namespace)):
                raise RefusedError(f"{namespace} was adopted by another process meanwhile")
            entry = mint_entry(key, root, namespace=namespace, bank=bank)
            if hint is not None and hint.last_seen_path:
                entry.add_previous(hint.last_seen_path)
            fresh.workspaces.append(entry)
        fault("adopt-after-index")
        identity.write_marker(root, workspace_uuid)
        status = "adopted"
    if entry.lastSeenPath != str(root):
        with index.transaction() as fresh:
            current = fresh.by_identity(entry.identityKey)
            if current is not None:
                current.see_at(str(root))
    stats = default_stats(index, namespace)
    in_default = stats.rows if stats else 0
    result = AdoptResult(
        status=status, namespace=namespace, bank=entry.bank, identity_key=entry.identityKey,
        root=str(root), marker_path=str(root / identity.MARKER_NAME),
        bank_rows=workspace_rows(index, namespace, entry.bank) - in_default,
        default_rows=in_default)
    if stats and stats.all_rows:
        result.migrate_command = f"mnemo migrate run --session {namespace}"
    return result


def _find_entry(data: IndexData, source: str) -> WorkspaceEntry | None:
    text = source.strip()
    if identity.is_workspace_namespace(text):
        entries = data.by_namespace(text)
        active = [e for e in entries if not e.supersededBy]
        return (active or entries or [None])[0]
    if text.startswith("id:"):
        return data.by_identity(text)
    by_uuid = data.by_identity(identity.identity_key_for(text))
    if by_uuid is not None:
        return by_uuid
    try:
        resolved = str(Path(text).expanduser().resolve())
    except (OSError, RuntimeError):
        resolved = text
    matches = [e for e in data.workspaces if resolved in (e.lastSeenPath, e.canonicalPath)]
    # A place the project was at before (moved twice, renamed): the paths recorded.
    matches = matches or [e for e in data.workspaces if resolved in e.previousPaths]
    active = [e for e in matches if not e.supersededBy]
    return (active or matches or [None])[0]


def rebind_candidates(root: Path, index: Index) -> list[WorkspaceEntry]:
    """Entries last seen in a directory with the same name (shown, never chosen)."""
    return [e for e in index.peek().workspaces
            if not e.supersededBy and e.lastSeenPath != str(root)
            and root.name in {Path(p).name for p in (e.lastSeenPath, e.canonicalPath) if p}]


def rebind(path: Path | None, source: str | None, *, index: Index | None = None
           ) -> RebindResult:
    """Make the directory `path` use the memory of the workspace `source`.

    `source` is the old workspace's namespace, identity key (or UUID), or the
    path where it was last seen (or seen before: `previousPaths`).
    """
    root = identity.check_bindable(path or Path.cwd())
    index = index or Index()
    if not source:
        shown = "; ".join(f"{e.displayName} ({e.lastSeenPath}): mnemo rebind {root} --from "
                          f"{e.namespace}" for e in rebind_candidates(root, index)[:5])
        raise RefusedError("rebind needs --from: the workspace whose memory this directory "
                           "should use",
                           hint=("Candidates by name: " + shown) if shown else
                           "`mnemo workspaces` lists the workspaces.")
    data = index.load()
    old = _find_entry(data, source)
    if old is None:
        raise RefusedError(f"no workspace matches {source!r}",
                           hint="Give a namespace, an identity key (id:<uuid>) or the "
                                "path where it was seen; see `mnemo workspaces`.")
    holder = data.active_for(old.identityKey) or old
    location = identity.find_workspace(root)
    _refuse_foreign_marker(root, location)
    if location.found and location.root != root:
        raise RefusedError(f"{root} is inside the workspace at {location.root}",
                           hint=f"Rebind that directory instead: mnemo rebind "
                                f"{location.root} --from {source}")
    new_uuid: str | None = None
    if location.found:
        key = identity.identity_key_for(location.workspace_uuid or "")
        current = data.active_for(key)
        if current is not None and current.namespace == holder.namespace:
            return _rebind_result("already-bound", root, current, None, False, index)
        if current is not None:
            rows = workspace_rows(index, current.namespace, current.bank)
            if rows:
                raise RefusedError(
                    f"this directory's workspace already has {rows} memories of its own "
                    f"({current.namespace}); rebinding would hide them",
                    hint="Rebind is a pointer switch; it never merges. Keep this workspace, "
                         "or move its marker away first.")
    elif holder.lastSeenPath == str(root) and any(
            e.supersededBy == holder.identityKey for e in data.workspaces):
        # A previous rebind stopped between the index and the marker: finish it.
        identity.write_marker(root, _uuid_of(holder.identityKey))
        predecessor = next(e for e in data.workspaces if e.supersededBy == holder.identityKey)
        return _rebind_result("rebound", root, holder, predecessor.identityKey, True, index)
    else:
        new_uuid = identity.new_workspace_uuid()
        key = identity.identity_key_for(new_uuid)
    with index.transaction() as fresh:
        previous = fresh.active_for(old.identityKey)
        if previous is None:
            raise RefusedError(f"the workspace {source!r} disappeared from the index meanwhile")
        entry = fresh.by_identity(key)
        if entry is None:
            entry = mint_entry(key, root, namespace=previous.namespace, bank=previous.bank)
            fresh.workspaces.append(entry)
        else:
            entry.namespace, entry.bank = previous.namespace, previous.bank
            entry.see_at(str(root))
            entry.supersededBy = None
        # The memory's earlier directories (the old checkout, where a moved project
        # was) stay with it: doctor finds a copy still holding the old marker.
        entry.add_previous(*fresh.known_paths(previous))
        previous.supersededBy = key
        superseded = previous.identityKey
    fault("rebind-after-index")
    if new_uuid is not None:
        identity.write_marker(root, new_uuid)
    return _rebind_result("rebound", root, entry, superseded, new_uuid is not None, index)


def _rebind_result(status: str, root: Path, entry: WorkspaceEntry, superseded: str | None,
                   marker_written: bool, index: Index) -> RebindResult:
    return RebindResult(status=status, root=str(root), identity_key=entry.identityKey,
                        namespace=entry.namespace, bank=entry.bank, superseded=superseded,
                        marker_path=str(root / identity.MARKER_NAME),
                        marker_written=marker_written,
                        rows=workspace_rows(index, entry.namespace, entry.bank))
