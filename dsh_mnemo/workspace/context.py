"""`resolve_memory_context`: the one place that decides where memory goes.

Every read and write (commands and hooks alike) asks this module for its
context.  It never falls back silently: an unbound directory in workspace
mode, or a session-mode request without a session id, yields a context with
`bound=False` and no namespace, and callers must then do no recall at all.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import paths
from ..config import Settings
from ..record import field, record
from . import identity
from .index import Index, WorkspaceEntry

REASON_MARKER = "marker"
REASON_SESSION = "session"
REASON_UNBOUND = "unbound"
REASON_NO_SESSION = "no-session"
REASON_KNOWN = "known"  # the workspace a spooled turn named; its directory is gone


@record
class MemoryContext:
    mode: str  # "workspace" | "session"
    namespace: str | None
    identity_key: str | None
    root: str | None
    display_name: str | None
    bound: bool
    reason: str
    bank: str | None = None  # None with no namespace; "default" for unbound sessions
    session_id: str | None = None
    workspace: WorkspaceEntry | None = None  # the bound workspace, in either mode
    problems: list[identity.MarkerProblem] = field(default_factory=list)
    hint_root: str | None = None  # where `mnemo bind` would bind, when unbound

    def db_path(self, base: Path | None = None) -> Path | None:
        return paths.bank_db_path(self.bank, base) if self.bank else None


def _valid_session_id(session_id: str | None) -> str | None:
    if session_id is None:
        return None
    cleaned = str(session_id).strip()
    if not cleaned or len(cleaned) > 256 or any(ord(c) < 32 for c in cleaned):
        return None
    return cleaned


def register_seen(index: Index, location: identity.Location) -> WorkspaceEntry:
    """The index entry for a found marker, created or updated as needed.

    A marker not in the index (a fresh checkout of a repository that carries
    its marker, or an index rebuilt after corruption) gets its entry here:
    the namespace is minted from the identity key, exactly as at bind time.
    """
    assert location.workspace_uuid is not None and location.root is not None
    key = identity.identity_key_for(location.workspace_uuid)
    entry = index.load().active_for(key)
    if entry is not None and entry.lastSeenPath == str(location.root):
        return entry
    with index.transaction() as data:
        return data.register(key, location.root)


def hint_root_for(location: identity.Location) -> Path:
    """Where `mnemo bind` (no path) binds, and so where the bind hint points.

    The repository as a whole: its main work tree when this is a linked
    worktree (so that every worktree shares the binding, as docs/hooks.md
    wants), else the top of the enclosing git work tree, else the directory.
    """
    main = location.main_worktree
    if main is not None and main.is_dir() and main != paths.home_dir():
        return main
    return location.git_top or location.start


def resolve_memory_context(cwd: Path | str | None, session_id: str | None,
                           settings: Settings, *, mode: str | None = None,
                           index: Index | None = None,
                           register: bool = True) -> MemoryContext:
    """Decide the namespace and bank for a request from `cwd` and `session_id`.

    `mode` defaults to the configured `recall_mode` (the read boundary);
    writers pass `settings.auto_write_scope`.  With `register=False` nothing is
    written to the index (for read-only inspection).
    """
    mode = mode or settings.recall_mode
    if mode not in ("workspace", "session"):
        # A typo here would otherwise silently read or write workspace memory.
        raise ValueError(f"unknown memory mode {mode!r}")
    if cwd is None or str(cwd) == "":
        cwd = os.getcwd()
    location = identity.find_workspace(Path(cwd))
    index = index or Index()
    entry: WorkspaceEntry | None = None
    if location.found:
        if register:
            entry = register_seen(index, location)
        else:
            key = identity.identity_key_for(location.workspace_uuid or "")
            entry = index.peek().resolve(key, Path(str(location.root)))
    sid = _valid_session_id(session_id)
    common = dict(mode=mode, session_id=sid, workspace=entry, problems=location.problems)
    if mode == "session":
        if sid is None:
            return MemoryContext(namespace=None, identity_key=None, root=None,
                                 display_name=None, bound=False, reason=REASON_NO_SESSION,
                                 **common)
        return MemoryContext(
            namespace=identity.session_namespace(sid),
            identity_key=entry.identityKey if entry else None,
            root=str(location.root) if entry else None,
            display_name=entry.displayName if entry else None,
            bound=True, reason=REASON_SESSION,
            bank=entry.bank if entry else "default", **common)
    if entry is None:
        return MemoryContext(namespace=None, identity_key=None, root=None, display_name=None,
                             bound=False, reason=REASON_UNBOUND,
                             hint_root=str(hint_root_for(location)), **common)
    return MemoryContext(namespace=entry.namespace, identity_key=entry.identityKey,
                         root=str(location.root), display_name=entry.displayName,
                         bound=True, reason=REASON_MARKER, bank=entry.bank, **common)


def resolve_known_workspace(identity_key: str, session_id: str | None, *, mode: str,
                            index: Index | None = None) -> MemoryContext | None:
    """The context of the bound workspace `identity_key` (its active entry: a rebind
    is followed), for a turn spooled there whose directory is gone by the time it is
    stored.  None when the index does not know it (it was never bound, or was
    forgotten), or in session mode without a session id."""
    entry = (index or Index()).peek().active_for(identity_key)
    sid = _valid_session_id(session_id)
    if entry is None or (mode == "session" and sid is None):
        return None
    namespace = identity.session_namespace(sid) if mode == "session" else entry.namespace
    return MemoryContext(namespace=namespace, identity_key=entry.identityKey,
                         root=entry.lastSeenPath or None, display_name=entry.displayName,
                         bound=True, reason=REASON_KNOWN, bank=entry.bank, mode=mode,
                         session_id=sid, workspace=entry)
