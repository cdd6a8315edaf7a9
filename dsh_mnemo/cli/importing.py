"""`mnemo import`: past conversations of harnesses and chat exports."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from .common import (
    PATH,
    JsonOpt,
    err,
    escape,
    lazy,
    out,
    progress_bar,
    reports,
    settings,
    table,
    view,
)

core = lazy("dsh_mnemo.commands.importing")


class Source(str, Enum):
    claude_code = "claude-code"
    codex = "codex"
    gemini = "gemini"
    qwen = "qwen"
    chatgpt = "chatgpt"
    claude_ai = "claude-ai"


def register(app: typer.Typer) -> None:
    app.command("import")(import_command)


@reports
def import_command(
    sources: Annotated[list[Source] | None, typer.Argument(
        metavar="[SOURCE]...", show_default=False,
        help="claude-code, codex, gemini, qwen (default: all four), or one chat export: "
        "chatgpt, claude-ai.")] = None,
    source_path: Annotated[Path | None, typer.Option(
        "--from", show_default=False,
        help="Read this file or directory instead of the harness's own (required for a chat "
        "export: its conversations.json, folder or .zip).", click_type=PATH)] = None,
    into: Annotated[str | None, typer.Option(
        "--into", metavar="PATH|global", show_default=False,
        help="Where a chat export goes: a directory in a bound workspace, or global.")] = None,
    write: Annotated[bool, typer.Option(
        "--write", help="Import for real (without it: a dry run that writes nothing).")]
    = False,
    json: JsonOpt = False,
):
    """Import past conversations into the workspace of each session's directory.

    Cleaned as turn capture cleans (injected blocks stripped, secrets scrubbed,
    role prefixes and limits), de-duplicated (a second run imports nothing new).
    Sessions of unbound directories are reported and skipped.
    """
    loaded = settings()
    with progress_bar(enabled=not json) as progress:
        return core.import_conversations(
            loaded, [s.value for s in sources] if sources else None, write=write,
            source_path=source_path.expanduser().absolute() if source_path else None,
            into=into, progress=progress)


@view("import")
def _imported(report: Any) -> None:
    grid = table("source", "files", "sessions", "turns", "unknown records")
    for s in report.sources:
        unknown = str(s.unknown_records) + (f" ({s.unreadable_files} unreadable files)"
                                            if s.unreadable_files else "")
        grid.add_row(s.source, str(s.files), str(s.sessions), str(s.turns), unknown)
    out.print(grid)
    if report.targets:
        out.print()
        verb = "new" if report.dry_run else "written"
        grid = table("into", "sessions", "turns", verb, "already there", "filtered")
        for t in report.targets:
            name = t.target if t.level != "session" else f"{t.target} (session)"
            grid.add_row(escape(name), str(t.sessions), str(t.turns),
                         str(t.rows_new if report.dry_run else t.rows_written),
                         str(t.rows_already), str(t.rows_filtered))
        out.print(grid)
        for t in report.targets:
            if t.first_lines:
                out.print(f"[bold]{escape(t.display_name or t.target)}[/], first rows:")
                for line in t.first_lines:
                    out.print(f"  {escape(line)}")
    if report.skipped:
        out.print()
        count = len(report.skipped)
        err.print(f"[yellow]Skipped {count} session{'s' if count != 1 else ''}:[/]")
        for s in report.skipped[:10]:
            why = {"unbound": "directory not bound", "missing-directory":
                   "directory no longer exists", "no-directory": "no directory recorded",
                   "reused-directory": "another project lived in this directory before"
                   }.get(s.reason, s.reason)
            err.print(f"  {s.source} {escape(s.session_id[:36])}  {escape(s.cwd or '-')}: "
                      f"{why}" + (f" ({escape(s.hint)})" if s.hint else ""))
        if len(report.skipped) > 10:
            err.print(f"  … and {len(report.skipped) - 10} more (--json lists them all)")
