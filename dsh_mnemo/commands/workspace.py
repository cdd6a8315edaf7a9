"""`bind`, `status`, `workspaces`, `adopt`, `rebind`: reports on workspaces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import MnemoError, RefusedError
from ..memory.banks import MEMORY_TABLES
from ..report import Progress, Report
from ..workspace import adopt as adopting
from ..workspace import binding, identity, listing
from ..workspace.index import Index
from ..workspace.orphans import workspace_rows
from .common import usage_error


def adopt(namespace: str, path: Path | None = None, *, move: bool = True,
          progress: Progress | None = None, index: Index | None = None) -> Report:
    """Pin an orphan namespace to a directory; move its rows out of the default database.

    The move is an ordinary migration (backups, journal, revertible with
    `mnemo migrate revert`); with `move=False` the rows stay and the result
    says how to move them later.
    """
    if not identity.is_workspace_namespace(namespace):
        raise usage_error(f"{namespace!r} is not a workspace namespace",
                          hint="Use the full dsh_v2_workspace_<64 hex> name that "
                               "`mnemo workspaces` lists under orphans.")
    index = index or Index()
    result = adopting.adopt(namespace, path, index=index)
    resumed: list[str] = []
    secrets, policy = 0, "redact"
    if move:
        from ..migrate import Selection, run_migration  # only adopt needs the machinery
        from ..migrate import journal as journals

        # A killed adopt may have moved the rows already but not closed its
        # journal: running it again completes that journal, as `migrate run` would.
        if result.migrate_command or journals.unfinished(index.base):
            moved = run_migration(Selection(sessions=[namespace]), index=index,
                                  progress=progress, kind="adopt")
            resumed = moved.resumed
            secrets, policy = moved.secrets, moved.plan.scrub_policy
            if moved.journal:
                result.journal = moved.journal
                result.moved_rows = result.default_rows
            else:
                mine = [journals.load(j, index.base) for j in resumed]
                mine = [j for j in mine if namespace in j.selection.get("sessions", [])]
                if mine:  # the rows this adopt moved before it was stopped
                    result.journal = mine[-1].id
                    result.moved_rows = sum(n for g in mine[-1].groups
                                            for table, n in g.counts.items()
                                            if table in MEMORY_TABLES)
            result.bank_rows = workspace_rows(index, namespace, result.bank)
            result.migrate_command = None
    report = Report("adopt", result)
    for journal_id in resumed:
        report.note(f"Completed the interrupted migration {journal_id}.")
    if secrets:
        from ..migrate.api import secrets_note

        report.warn(secrets_note(secrets, policy, done=True))
    return report


def bind(path: Path | None, settings: Settings, *, decline: bool = False,
         new: bool = False, index: Index | None = None) -> Report:
    """Bind the repository around `path` (or decline it: the bind hint goes quiet)."""
    if decline:
        result = binding.decline(path, index=index)
        days = int(settings["hint.decline_days"])
        report = Report("bind", result)
        if days > 0:
            return report.note(f"Declined: no marker written; the bind hint stays quiet for "
                               f"{result.root} for {days} day{'s' if days != 1 else ''}.")
        return report.note(f"Declined {result.root}, but `hint.decline_days` is 0: the bind "
                           "hint still shows there.")
    index = index or Index()
    result = binding.bind(path, index=index, new=new)
    report = Report("bind", result)
    if result.status == "bound" and result.gitignore_hint:
        report.note("Commit .mnemosyne-id to share this memory with every checkout of the "
                    "repository; add it to .gitignore to keep the binding to this machine.")
    if result.status == "already-bound" and path is not None and not new:
        asked = identity.check_bindable(path)
        if asked != Path(result.root) and asked.is_relative_to(result.root):
            report.note(f"{asked} is inside this workspace and shares its memory; "
                        f"`mnemo bind --new {asked}` gives it a memory of its own.")
    if result.status == "already-bound" and result.identity_key:
        data = index.peek()
        entry = data.active_for(result.identity_key)
        if entry is not None:
            result.shared_with = [d for d in listing.live_directories(entry, data)
                                  if d != result.root]
        if result.shared_with and listing.shared_through_git([result.root,
                                                               *result.shared_with]):
            # Checkouts of one repository (clones, linked worktrees) with the marker
            # committed: shared on purpose, and removing a tracked marker is no advice.
            report.note(f"{', '.join(result.shared_with)} "
                        f"{'is a checkout' if len(result.shared_with) == 1 else 'are checkouts'}"
                        " of the same repository with the marker committed: they share this "
                        "memory, as intended.")
        elif result.shared_with:
            one = len(result.shared_with) == 1
            report.warn(f"{', '.join(result.shared_with)} also {'holds' if one else 'hold'} "
                        f"this marker, so {'it shares' if one else 'they share'} one memory "
                        f"with {result.root}. If {result.root} is a copy that should have a "
                        "memory of its own (it starts empty), run: "
                        f"{listing.own_memory_command(result.root)}")
    return report


def status(path: Path | None, settings: Settings, *, session_id: str | None = None,
           index: Index | None = None) -> Report:
    index = index or Index()
    from ..server import state as server_state

    result = binding.status(path, settings, session_id=session_id, index=index)
    result.server = server_state.read(index.base, timeout=1.0)
    report = Report("status", result)
    for notice in result.notices:
        report.warn(notice["message"])
    recovery = index.recovery
    if recovery and not any(n["details"].get("moved_to") == recovery.moved_to
                            for n in result.notices):
        report.warn(recovery.describe())  # its notice could not be written
    for problem in result.marker_problems:
        report.warn(f"Ignored {problem['path']}: {problem['reason']}")
    if not result.bound and result.reason == "unbound":
        lost = _lost_here(path, index)
        if lost is not None:
            root, entry = lost
            report.warn(f"{root} was workspace {entry.displayName!r} ({entry.namespace}), "
                        f"but its marker {identity.MARKER_NAME} is missing, so that memory is "
                        f"not used. Restore it with: mnemo rebind {root} --from "
                        f"{entry.namespace}")
    return report


def _lost_here(path: Path | None, index: Index) -> tuple[Path, Any] | None:
    """The directory `mnemo bind` would bind here, and the workspace the index still
    gives it whose marker is gone (None when there is none)."""
    from ..workspace.context import hint_root_for

    try:
        root = hint_root_for(identity.find_workspace(path or Path.cwd()))
        entry = binding.lost_workspace(index, root)
    except (OSError, MnemoError):
        return None
    return (root, entry) if entry is not None else None


def workspaces(cwd: Path | None = None, *, index: Index | None = None) -> Report:
    index = index or Index()
    result = listing.list_workspaces(index=index, cwd=cwd or Path.cwd())
    report = Report("workspaces", result)
    if index.recovery:
        report.warn(index.recovery.describe())
    return report


def rebind(path: Path | None, source: str | None, *, index: Index | None = None) -> Report:
    if not source:
        identity.check_bindable(path or Path.cwd())  # a directory it refuses stays refused
    try:
        result = adopting.rebind(path, source, index=index or Index())
    except RefusedError as exc:
        if source:
            raise
        # Without --from there is nothing to do: a bad command line, whose hint
        # names the candidates.
        raise usage_error(exc.message, exc.hint) from None
    return Report("rebind", result)
