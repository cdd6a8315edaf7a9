"""`import`: past conversations into the workspace each belongs to (docs/import.md)."""

from __future__ import annotations

from pathlib import Path

from ..config import Settings
from ..importers.formats import EXPORT_SOURCES, HARNESS_SOURCES
from ..importers.run import run_import
from ..report import Progress, Report
from .common import usage_error


def import_conversations(settings: Settings, sources: list[str] | None = None, *,
                         write: bool = False, source_path: Path | None = None,
                         into: str | None = None,
                         progress: Progress | None = None) -> Report:
    chosen = list(dict.fromkeys(sources or HARNESS_SOURCES))
    _check_command_line(bool(sources), chosen, source_path, into)
    exports = [s for s in chosen if s in EXPORT_SOURCES]
    result = run_import(settings, chosen, dry_run=not write,
                        root=None if exports else source_path,
                        export=source_path if exports else None, into=into,
                        progress=progress)
    report = Report("import", result)
    unbound = [s for s in result.skipped if s.reason == "unbound"]
    if unbound:
        roots = sorted({s.cwd or "" for s in unbound})
        report.warn(f"{len(unbound)} session{'s' if len(unbound) != 1 else ''} skipped: "
                    f"{len(roots)} director{'ies are' if len(roots) != 1 else 'y is'} not "
                    "bound (`mnemo bind` there, then import again)")
    if result.secrets_kept:
        n = result.secrets_kept
        report.warn(f"{n} row{'s' if n != 1 else ''} {'hold' if n != 1 else 'holds'} a secret: "
                    f"{'stored' if write else 'to be stored'} as "
                    f"{'they are' if n != 1 else 'it is'} (scrub.policy: warn).")
    if not write:
        if result.rows_new:
            report.note(f"Dry run: nothing was written. Add --write to import "
                        f"{result.rows_new} row{'s' if result.rows_new != 1 else ''}.")
        else:
            report.note("Dry run: nothing new to import.")
    return report


def _check_command_line(named: bool, chosen: list[str], source_path: Path | None,
                        into: str | None) -> None:
    """Sources and options that cannot go together: a bad command line (exit 2)."""
    if source_path is not None and not named:
        raise usage_error("--from reads one source: name it",
                          hint="For example `mnemo import codex --from DIR`.")
    if source_path is not None and len(chosen) > 1:
        raise usage_error("--from reads one source, not several",
                          hint="Import each source on its own.")
    exports = [s for s in chosen if s in EXPORT_SOURCES]
    if exports and len(exports) < len(chosen):
        raise usage_error("import a chat export on its own, not with harness transcripts",
                          hint="Import each source on its own.")
    if exports and source_path is None:
        raise usage_error("a chat export needs its file",
                          hint="Pass the export's conversations.json (or its folder or "
                               ".zip) with --from.")
    if exports and not into:
        raise usage_error("a chat export records no project: say where it goes",
                          hint="Add --into PATH (a directory in a bound workspace) or "
                               "--into global.")
    if into and not exports:
        raise usage_error("harness transcripts go to the workspace of each session's own "
                          "directory; --into is only for chat exports",
                          hint="Leave out --into.")
