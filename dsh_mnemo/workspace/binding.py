"""Binding directories to workspaces, and reporting on them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .. import paths
from ..config import Settings
from ..errors import MnemoError, RefusedError
from ..faults import fault
from ..record import field, record
from . import identity
from .context import MemoryContext, hint_root_for, resolve_memory_context
from .index import (
    DeclinedPath,
    Index,
    WorkspaceEntry,
    acknowledge_notices,
    now_ms,
    pending_notices,
)


@record
class BindResult:
    status: str  # "bound" | "already-bound" | "declined"
    root: str
    identity_key: str | None = None
    namespace: str | None = None
    bank: str | None = None
    display_name: str | None = None
    marker_path: str | None = None
    declined_at: int | None = None
    gitignore_hint: bool = False
    # Other existing directories holding the same marker (a copy): they share
    # this memory.  Filled by the bind command.
    shared_with: list[str] = field(default_factory=list)


def bind(path: Path | None = None, *, index: Index | None = None, new: bool = False
         ) -> BindResult:
    """Bind a directory to a new workspace, or report the one it already has.

    With no `path`, the directory bound is the repository around the
    current directory (its main work tree from a linked worktree, else the
    top of the git work tree; see `context.hint_root_for`, which the bind
    hint and `--decline` use too), else the current directory itself.  An
    explicit `path` is bound as given: a git submodule gets its own workspace
    (it shares its superproject's memory while unbound), and with `new` so
    does a directory inside a bound workspace (a monorepo's package).

    Idempotent: a directory inside a bound workspace reports it ("already
    bound") and adopts its marker into the index.  A broken marker on the
    way up is refused rather than overwritten or shadowed.  A directory the
    index still gives a workspace with memories, whose marker is gone (deleted
    by accident, `git clean`), is refused too: a new marker would hide that
    memory.  The refusal names the rebind that restores it; `new` binds a new,
    empty memory anyway.
    """
    index = index or Index()
    root = identity.check_bindable(path if path is not None else Path.cwd())
    location = identity.find_workspace(root)
    inner = location.submodule_top
    if (new and path is not None and location.found and location.root is not None
            and location.root != root and root.is_relative_to(location.root)):
        # Named with --new: a directory inside a bound workspace (a monorepo's
        # package) gets a memory of its own; its marker is the nearest from then on.
        location = identity.Location(start=root, problems=[
            p for p in location.problems if Path(p.path).parent.is_relative_to(root)])
    elif path is not None and location.found and inner is not None:
        # Named on purpose: the submodule gets a memory of its own instead of
        # sharing its superproject's (whose markers are none of its business).
        location = identity.Location(start=root, problems=[
            p for p in location.problems if Path(p.path).parent.is_relative_to(inner)])
    if not location.found:
        _refuse_broken_marker(location)
        if path is None and hint_root_for(location) != root:
            root = identity.check_bindable(hint_root_for(location))
            location = identity.find_workspace(root)
    if not location.found:
        _refuse_broken_marker(location)
        if not new:
            _refuse_lost_memory(index, root)
        workspace_uuid = identity.new_workspace_uuid()
        try:
            marker = identity.write_marker(root, workspace_uuid)
            fault("bind-after-marker")
        except identity.MarkerExistsError:
            # A concurrent bind of the same directory won: adopt its marker,
            # exactly as a re-run would.
            location = identity.find_workspace(root)
            if not location.found:
                _refuse_broken_marker(location)
                raise
        else:
            try:
                entry = _register(index, workspace_uuid, root, clear_decline=True)
            except BaseException:
                # Without its index entry the marker would still resolve (entries
                # are re-created when a marker is seen), but a failed bind should
                # leave the directory as it was.
                marker.unlink(missing_ok=True)
                raise
            return _result("bound", root, entry)
    assert location.root is not None
    entry = _register(index, location.workspace_uuid or "", location.root)
    return _result("already-bound", location.root, entry)


def _refuse_broken_marker(location: identity.Location) -> None:
    """An invalid marker where a bind would look: never overwrite or shadow it."""
    if location.problems:
        problem = location.problems[0]
        raise identity.MarkerError(Path(problem.path), problem.reason)


def lost_workspace(index: Index, root: Path | str) -> WorkspaceEntry | None:
    """The workspace the index gives the directory `root` (seen there last, or at a
    recorded path that is the same directory) whose marker no directory holds any
    more: a marker deleted by accident, or by `git clean -x`.

    A copy whose original still holds the marker is not one: giving the copy a
    memory of its own is what `listing.own_memory_command` asks for.  Reads the
    index and stats the recorded paths; never opens a bank.
    """
    root = Path(root)
    data = index.peek()
    try:
        here = os.stat(root)
    except (OSError, ValueError):
        return None
    mine = [e for e in data.workspaces if not e.supersededBy
            and _same_directory(root, (here.st_dev, here.st_ino), e.lastSeenPath,
                                data.known_paths(e))]
    if not mine:
        return None  # the usual case: the listing module is not even imported
    from .listing import live_directories

    return next((e for e in mine if not live_directories(e, data)), None)


def _refuse_lost_memory(index: Index, root: Path) -> None:
    """Refuse to give `root` a new memory over a lost workspace that has memories."""
    from .orphans import workspace_rows

    entry = lost_workspace(index, root)
    rows = workspace_rows(index, entry.namespace, entry.bank) if entry else 0
    if entry is not None and rows:
        raise RefusedError(
            f"{root} is the directory of workspace {entry.displayName!r} ({rows} "
            f"memories, {entry.namespace}), but its marker {identity.MARKER_NAME} is "
            "missing; a new marker would hide that memory",
            hint=f"To use that memory again: mnemo rebind {root} --from "
                 f"{entry.namespace} (or, for a new, empty memory here instead: "
                 f"mnemo bind --new {root})")


def _same_directory(root: Path, here: tuple[int, int], last_seen: str,
                    recorded: list[str]) -> bool:
    """Whether `root` (device and inode `here`) is where the workspace was last seen,
    or is one of its recorded directories reached by another path (a bind mount).

    A recorded path spelled as `root` that is not the last seen one is a place the
    project left (moved away): another project may live there now.
    """
    if last_seen == str(root):
        return True
    for path in recorded:
        if path == str(root):
            continue
        try:
            there = os.stat(path)
        except (OSError, ValueError):  # ValueError: a NUL in a damaged index's path
            continue
        if (there.st_dev, there.st_ino) == here:
            return True
    return False


def _register(index: Index, workspace_uuid: str, root: Path, *,
              clear_decline: bool = False) -> WorkspaceEntry:
    key = identity.identity_key_for(workspace_uuid)
    with index.transaction() as data:
        if clear_decline:
            data.declined = [d for d in data.declined if d.path != str(root)]
        return data.register(key, root)


def _result(status: str, root: Path, entry: WorkspaceEntry) -> BindResult:
    return BindResult(status=status, root=str(root), identity_key=entry.identityKey,
                      namespace=entry.namespace, bank=entry.bank,
                      display_name=entry.displayName,
                      marker_path=str(root / identity.MARKER_NAME),
                      gitignore_hint=(root / ".git").exists())


def decline(path: Path | None = None, *, index: Index | None = None) -> BindResult:
    """Record that the user does not want `path` bound: silences the bind hint."""
    start = identity.check_bindable(path or Path.cwd())
    location = identity.find_workspace(start)
    if location.found:
        raise RefusedError(f"{location.root} is already bound; nothing to decline")
    root = hint_root_for(location)  # the path the hint checks
    index = index or Index()
    stamp = now_ms()
    with index.transaction() as data:
        data.declined = [d for d in data.declined if d.path != str(root)]
        data.declined.append(DeclinedPath(path=str(root), declinedAt=stamp))
    return BindResult(status="declined", root=str(root), declined_at=stamp)


def declined_recently(index: Index, root: str, days: int) -> bool:
    if days <= 0:
        return False
    horizon = now_ms() - days * 86_400_000
    return any(d.path == root and d.declinedAt >= horizon for d in index.peek().declined)


@record
class StatusReport:
    mode: str
    bound: bool
    reason: str
    namespace: str | None
    root: str | None
    display_name: str | None
    bank: str | None
    db_path: str | None
    data_dir: str
    config_path: str
    identity_key: str | None
    session_id: str | None
    recall_mode: str
    auto_write_scope: str
    marker_path: str | None
    marker_problems: list[dict[str, str]] = field(default_factory=list)
    index_recovered_from: str | None = None
    # Notices nobody had seen (an index recovered by any command or hook);
    # `status` shows them once and marks them seen.
    notices: list[dict[str, Any]] = field(default_factory=list)
    # The resident hook server's state (filled in by the status command).
    server: Any = None


def status(path: Path | None, settings: Settings, *, session_id: str | None = None,
           index: Index | None = None, acknowledge: bool = True) -> StatusReport:
    """Which memory `path` reads and writes, plus the notices not yet seen.

    With `acknowledge` (the default), the notices returned are marked seen.
    """
    index = index or Index()
    base = index.base
    ctx: MemoryContext = resolve_memory_context(path or Path.cwd(), session_id, settings,
                                                index=index)
    db = ctx.db_path(base)
    return StatusReport(
        mode=ctx.mode, bound=ctx.bound, reason=ctx.reason, namespace=ctx.namespace,
        root=ctx.root, display_name=ctx.display_name, bank=ctx.bank,
        db_path=str(db) if db else None, data_dir=str(base),
        config_path=str(settings.source or paths.config_path()),
        identity_key=ctx.identity_key, session_id=ctx.session_id,
        recall_mode=settings.recall_mode, auto_write_scope=settings.auto_write_scope,
        marker_path=(str(Path(ctx.workspace.lastSeenPath) / identity.MARKER_NAME)
                     if ctx.workspace else None),
        marker_problems=[{"path": p.path, "reason": p.reason} for p in ctx.problems],
        index_recovered_from=index.recovery.moved_to if index.recovery else None,
        notices=_take_notices(index, acknowledge))


def _take_notices(index: Index, acknowledge: bool) -> list[dict[str, Any]]:
    pending = pending_notices(index.base)
    if acknowledge and pending:
        try:
            acknowledge_notices(index, [n.id for n in pending])
        except (OSError, MnemoError):
            pass  # shown now, shown again next time: never lost
    return [{"id": n.id, "kind": n.kind, "at": n.at, "message": n.message,
             "details": n.details} for n in pending]
