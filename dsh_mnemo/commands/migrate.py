"""`migrate plan|run|revert` as reports (the exit code of `--check` decided here)."""

from __future__ import annotations

from ..errors import ExitCode
from ..migrate import Plan, Selection, plan_migration, revert_migration, run_migration
from ..migrate import journal as journals
from ..migrate.api import RunResult
from ..migrate.journal import Journal
from ..report import Progress, Report
from ..workspace.index import Index


def plan(selection: Selection, *, check: bool = False) -> Report:
    index = Index()
    result = plan_migration(selection, index=index)
    report = Report("migrate-plan", result)
    for journal_id in result.unfinished:
        report.warn(_interrupted(journals.load(journal_id, index.base)))
    for note in result.notes:
        report.warn(note)
    if check and pending(result):
        report.exit_code = ExitCode.PENDING
    return report


def _interrupted(journal: Journal) -> str:
    if journal.status == "restoring":
        return (f"Restoring the backups of migration {journal.id} was interrupted; `mnemo "
                f"migrate revert --journal {journal.id} --from-backup` completes it.")
    if journal.status == "reverting":
        return (f"Reverting migration {journal.id} was interrupted; `mnemo migrate revert "
                f"--journal {journal.id}` completes it.")
    return f"Migration {journal.id} was interrupted; `mnemo migrate run` completes it first."


def pending(result: Plan) -> bool:
    return bool(result.pending or result.unfinished)


def run(selection: Selection, *, progress: Progress | None = None) -> Report:
    result = run_migration(selection, index=Index(), progress=progress)
    report = Report("migrate-run", result)
    missing = sum(g.missing for g in result.groups)
    if missing:
        report.warn(f"{missing} journaled rows were found in neither database.")
    for note in result.plan.notes:  # what the plan said, and what the copy did
        report.warn(note)
    if result.secrets:
        from ..migrate.api import secrets_note

        report.warn(secrets_note(result.secrets, result.plan.scrub_policy, done=True))
    unembedded = _without_vectors(result)
    if unembedded:
        report.warn(f"{unembedded} moved memories have no vector yet (an old store has none): "
                    "prompts recall a memory only by its vector, so run `mnemo reindex --all` "
                    "to embed them.")
    return report


def _without_vectors(result: RunResult) -> int:
    """Memories of the run's target namespaces that the configured model has not
    embedded (0 with `embeddings.backend: none`, or when the model does not load)."""
    if result.status != "moved":
        return 0
    from .. import paths
    from ..config import load_settings
    from ..memory import semantic

    embedder = semantic.embedder(load_settings())
    if embedder is None:
        return 0  # off, or it does not load (`mnemo doctor` says why)
    missing = 0
    for group in result.plan.groups:
        if group.target_namespace:
            db = paths.bank_db_path(group.target_bank)
            have, total = semantic.coverage(db, group.target_namespace, embedder.model_id)
            missing += total - have
    return missing


def revert(journal: str, *, from_backup: bool = False,
           progress: Progress | None = None) -> Report:
    result = revert_migration(journal, from_backup=from_backup, progress=progress)
    report = Report("migrate-revert", result)
    if result.missing:
        report.warn(f"{len(result.missing)} rows were deleted since the migration and could "
                    "not be moved back:\n" + "\n".join(
                        f"  {table} {key}" for table, key in result.missing[:20]))
    return report
