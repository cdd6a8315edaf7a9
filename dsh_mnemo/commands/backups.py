"""`backups [list]` and `backups prune`: the migration snapshots and their retention."""

from __future__ import annotations

from ..config import Settings
from ..migrate import retention
from ..report import Report


def listing(settings: Settings) -> Report:
    result = retention.report(policy=retention.Policy.from_settings(settings))
    report = Report("backups", result)
    if any(s.state == "pruned" for s in result.backups):
        report.note("Pruned runs can still be reverted from their journal "
                    "(mnemo migrate revert --journal ID), no longer with --from-backup.")
    if result.due:
        report.note(f"{result.due} set(s) of snapshots are past the retention policy; "
                    "`mnemo backups prune` deletes them (so does the next migration run).")
    return report


def prune(settings: Settings, *, older_than: int | None = None,
          dry_run: bool = False) -> Report:
    result = retention.prune(policy=retention.Policy.from_settings(settings),
                             older_than_days=older_than, dry_run=dry_run)
    report = Report("backups-prune", result)
    for problem in result.errors:
        report.warn(f"Could not delete {problem}")
    if result.pruned and not dry_run:
        report.note("Those runs can still be reverted from their journal "
                    "(mnemo migrate revert --journal ID), no longer with --from-backup.")
    return report
