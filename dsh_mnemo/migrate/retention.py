"""How long the snapshots of migrations are kept, and pruning them.

Every migration run (and `mnemo adopt`, which moves rows the same way) takes
full snapshots of the databases it changes into `backups/<journal id>/`, so
that `mnemo migrate revert --from-backup` can restore them whole.  A
snapshot holds every row of its database as it was, rows forgotten since
included, so it is not kept forever:

- a set of snapshots is kept while it is at most `backups.keep_days` days old
  **and** among the `backups.keep_migrations` newest sets (0 switches a
  limit off);
- the snapshots of a run that has not finished (a crash left it `planned`,
  `running`, `reverting` or `restoring`) are never pruned: re-running needs them;
- pruning happens after every migration run and with `mnemo backups prune`.

A pruned run keeps its journal: `mnemo migrate revert --journal ID` still
moves its rows back; only `--from-backup` is gone, and says so.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

from .. import paths
from ..errors import MnemoError
from ..record import field, record
from . import journal as journals
from .journal import Journal

DAY_MS = 86_400_000
UNFINISHED = ("planned", "running", "reverting", "restoring")


@record(frozen=True)
class Policy:
    keep_days: int = 30  # 0: no age limit
    keep_migrations: int = 10  # 0: no count limit

    @classmethod
    def from_settings(cls, settings: Any) -> Policy:
        return cls(keep_days=int(settings["backups.keep_days"]),
                   keep_migrations=int(settings["backups.keep_migrations"]))


@record
class BackupFile:
    backup: str  # the snapshot file
    database: str | None  # the database it is a copy of (from the journal)
    bytes: int


@record
class BackupSet:
    journal: str  # the journal id (the folder's name)
    kind: str | None  # "migrate" | "adopt"; None when no journal names the folder
    status: str | None  # the journal's status; None without a journal
    created_at: int  # epoch ms (the journal's, else the folder's modification time)
    age_days: float
    path: str  # backups/<journal id>
    exists: bool  # the folder is still there
    bytes: int
    files: list[BackupFile] = field(default_factory=list)
    # "kept" | "due" (the policy prunes it next time) | "protected" (an unfinished
    # run needs it) | "pruned" (deleted; the journal remains)
    state: str = "kept"
    pruned_at: int | None = None
    from_backup: bool = False  # `mnemo migrate revert --from-backup` can use it
    revert_command: str | None = None  # how this run can still be undone, if at all


@record
class BackupsReport:
    backups_dir: str
    policy: dict[str, int]
    backups: list[BackupSet]  # newest first
    bytes: int  # of every snapshot still on disk
    due: int  # sets the policy would prune now


@record
class PruneResult:
    dry_run: bool
    policy: dict[str, int]
    older_than_days: int | None  # --older-than, replacing the policy
    pruned: list[BackupSet]  # what was (or, with dry_run, would be) deleted
    freed_bytes: int
    kept: int  # sets left on disk
    errors: list[str] = field(default_factory=list)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _folder_files(folder: Path, journal: Journal | None) -> list[BackupFile]:
    databases = {b.get("backup"): b.get("database") for b in (journal.backups if journal else [])}
    found = []
    with contextlib.suppress(OSError):
        for item in sorted(folder.iterdir()):
            if item.is_file():
                found.append(BackupFile(backup=str(item), database=databases.get(str(item)),
                                        bytes=_size(item)))
    return found


def _load_journals(base: Path) -> dict[str, Journal]:
    found = {}
    for journal_id in journals.all_ids(base):
        try:
            found[journal_id] = journals.load(journal_id, base)
        except MnemoError:
            continue  # a damaged journal's folder is listed without it
    return found


def _revert_command(journal: Journal | None, from_backup: bool) -> str | None:
    if journal is None:
        return None
    if journal.status in ("reverted", "restored", "failed"):
        return None
    if journal.status == "restoring":  # only completing that restore undoes it
        return f"mnemo migrate revert --journal {journal.id} --from-backup"
    if journal.groups and any(g.rows_file for g in journal.groups):
        return f"mnemo migrate revert --journal {journal.id}"
    return f"mnemo migrate revert --journal {journal.id} --from-backup" if from_backup else None


def inventory(base: Path | None = None, policy: Policy | None = None, *,
              older_than_days: int | None = None, now_ms: int | None = None
              ) -> list[BackupSet]:
    """Every set of snapshots (and every run whose snapshots were pruned), newest first.

    Each set's `state` says what the policy (or `older_than_days`, which
    replaces it: only the age counts) would do with it now.
    """
    base = base or paths.data_dir()
    policy = policy or Policy()
    now = journals.now_ms() if now_ms is None else now_ms
    folder = paths.backups_dir(base)
    known = _load_journals(base)
    names = set()
    if folder.is_dir():
        # backups/ also holds copies of harness and MCP client config files
        # (`hooks/`, `mcp/`): only a folder named like a journal id is a snapshot.
        names = {p.name for p in folder.iterdir()
                 if p.is_dir() and journals.looks_like_id(p.name)}
    names |= {j.id for j in known.values() if j.backups}
    sets: list[BackupSet] = []
    for name in names:
        journal = known.get(name)
        where = folder / name
        exists = where.is_dir()
        if journal is not None:
            created = journal.created_at
        else:
            try:
                created = int(where.stat().st_mtime * 1000)
            except OSError:
                continue
        files = _folder_files(where, journal) if exists else []
        entry = BackupSet(
            journal=name, kind=journal.kind if journal else None,
            status=journal.status if journal else None, created_at=created,
            age_days=round(max(0, now - created) / DAY_MS, 2), path=str(where),
            exists=exists, bytes=sum(f.bytes for f in files), files=files,
            pruned_at=journal.backups_pruned_at if journal else None)
        sets.append(entry)
    sets.sort(key=lambda s: (s.created_at, s.journal), reverse=True)
    rank = 0
    for entry in sets:
        journal = known.get(entry.journal)
        if journal is not None and journal.status in UNFINISHED:
            entry.state = "protected"
        elif not entry.exists:
            entry.state = "pruned"
        else:
            rank += 1
            age_ms = now - entry.created_at
            if older_than_days is not None:
                due = age_ms > older_than_days * DAY_MS
            else:
                due = ((policy.keep_days > 0 and age_ms > policy.keep_days * DAY_MS)
                       or (policy.keep_migrations > 0 and rank > policy.keep_migrations))
            # A folder whose journal says "pruned" is what a killed prune left.
            entry.state = "due" if due or entry.pruned_at else "kept"
        entry.from_backup = bool(entry.exists and entry.state != "pruned" and journal
                                 and journal.backups and not entry.pruned_at
                                 and journal.status not in ("reverted", "restored", "failed"))
        entry.revert_command = _revert_command(journal, entry.from_backup)
    return sets


def report(base: Path | None = None, policy: Policy | None = None) -> BackupsReport:
    base = base or paths.data_dir()
    policy = policy or Policy()
    sets = inventory(base, policy)
    return BackupsReport(backups_dir=str(paths.backups_dir(base)), policy=_policy_dict(policy),
                         backups=sets, bytes=sum(s.bytes for s in sets),
                         due=sum(1 for s in sets if s.state == "due"))


def _policy_dict(policy: Policy) -> dict[str, int]:
    return {"keep_days": policy.keep_days, "keep_migrations": policy.keep_migrations}


def _remove(entry: BackupSet, base: Path, journal: Journal | None) -> None:
    """Mark the journal first, then delete: a kill in between leaves a folder the
    next prune deletes, never a journal that still promises its backups."""
    if journal is not None and not journal.backups_pruned_at:
        journal.backups_pruned_at = journals.now_ms()
        journal.save()
    folder = Path(entry.path)
    if folder.is_dir():
        # Refuse anything that is not a plain folder right under backups/.
        if folder.is_symlink() or folder.parent != paths.backups_dir(base):
            raise OSError(f"{folder} is not a backup folder")
        shutil.rmtree(folder)


def prune_unlocked(base: Path, policy: Policy, *, older_than_days: int | None = None,
                   dry_run: bool = False, keep: tuple[str, ...] = ()) -> PruneResult:
    """Prune what is due; the caller holds the migration lock."""
    sets = inventory(base, policy, older_than_days=older_than_days)
    due = [s for s in sets if s.state == "due" and s.journal not in keep]
    result = PruneResult(dry_run=dry_run, policy=_policy_dict(policy),
                         older_than_days=older_than_days, pruned=[], freed_bytes=0,
                         kept=sum(1 for s in sets if s.exists) - len(due))
    known = {} if dry_run else _load_journals(base)
    for entry in due:
        if not dry_run:
            try:
                _remove(entry, base, known.get(entry.journal))
            except (OSError, MnemoError) as exc:
                result.errors.append(f"{entry.path}: {exc}")
                result.kept += 1
                continue
            entry.state, entry.exists = "pruned", False
            entry.pruned_at = journals.now_ms()
            entry.from_backup = False
            journal = known.get(entry.journal)
            entry.revert_command = _revert_command(journal, False)
        result.pruned.append(entry)
        result.freed_bytes += entry.bytes
    return result


def prune(base: Path | None = None, policy: Policy | None = None, *,
          older_than_days: int | None = None, dry_run: bool = False) -> PruneResult:
    """`mnemo backups prune`: delete the snapshots the policy (or the age) says are due."""
    base = base or paths.data_dir()
    if dry_run:  # reads only (and creates no lock file in a fresh data dir)
        return prune_unlocked(base, policy or Policy(), older_than_days=older_than_days,
                              dry_run=True)
    with journals.migration_lock(base):
        return prune_unlocked(base, policy or Policy(), older_than_days=older_than_days)


def configured_policy() -> Policy | None:
    """The policy of the settings file; None when the file cannot be read (then nothing
    is pruned automatically: pruning must never follow a guess)."""
    from ..config import load_settings

    try:
        return Policy.from_settings(load_settings())
    except MnemoError:
        return None
