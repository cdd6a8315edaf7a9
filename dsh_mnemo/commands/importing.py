"""`import`: past conversations into the workspace each belongs to (docs/import.md)."""

from __future__ import annotations

from pathlib import Path

from ..config import Settings
from ..errors import RefusedError
from ..importers.formats import EXPORT_SOURCES, HARNESS_SOURCES
from ..importers.run import run_import
from ..report import Progress, Report


def import_conversations(settings: Settings, sources: list[str] | None = None, *,
                         write: bool = False, source_path: Path | None = None,
                         into: str | None = None,
                         progress: Progress | None = None) -> Report:
    if source_path is not None and not sources:
        raise RefusedError("--from reads one source: name it",
                           hint="For example `mnemo import codex --from DIR`.")
    chosen = list(dict.fromkeys(sources or HARNESS_SOURCES))
    if source_path is not None and len(chosen) > 1:
        raise RefusedError("--from reads one source, not several",
                           hint="Import each source on its own.")
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
    if not write:
        if result.rows_new:
            report.note(f"Dry run: nothing was written. Add --write to import "
                        f"{result.rows_new} row{'s' if result.rows_new != 1 else ''}.")
        else:
            report.note("Dry run: nothing new to import.")
    return report
