"""`migrate plan|run|revert`: bring rows of the default database home."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import ExitCode, RefusedError
from .common import (
    ID,
    PATH,
    JsonOpt,
    err,
    escape,
    fail,
    json_asked,
    lazy,
    out,
    progress_bar,
    render,
    reports,
    settings,
    table,
    usage_error,
    view,
)

core = lazy("dsh_mnemo.commands.migrate")
migration = lazy("dsh_mnemo.migrate")

app = typer.Typer(
    name="migrate", no_args_is_help=False, invoke_without_command=True,
    help="Move rows of the default database (legacy DSH data) into workspace banks.")

SessionOpt = Annotated[list[str] | None, typer.Option(
    "--session", help="An exact session_id to move (repeatable).", show_default=False,
    click_type=ID)]
LegacyOpt = Annotated[bool, typer.Option(
    "--legacy-dsh", help="Every legacy DSH session (dsh_*, never dsh_v2_*).")]
GlobalOpt = Annotated[bool, typer.Option(
    "--default-to-global", help="The legacy 'default' pool into the global bank.")]
ToOpt = Annotated[Path | None, typer.Option(
    "--to", help="A directory of the target workspace (default: the current directory).",
    show_default=False, click_type=PATH)]
CheckOpt = Annotated[bool, typer.Option(
    "--check", help="Exit with code 8 when rows are pending (for CI).")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="migrate")


def _selection(sessions: list[str] | None, legacy: bool, to_global: bool,
               to: Path | None) -> Any:
    selection = migration.Selection(sessions=list(sessions or []), legacy_dsh=legacy,
                                    default_to_global=to_global, to=to)
    try:
        selection.check()  # the selectors alone: what it refuses is this command line
    except RefusedError as exc:
        raise usage_error(exc.message, exc.hint or "`mnemo migrate --help` shows the "
                                                   "selectors.") from None
    return selection


@app.callback()
def main(ctx: typer.Context, session: SessionOpt = None, legacy_dsh: LegacyOpt = False,
         default_to_global: GlobalOpt = False, to: ToOpt = None, check: CheckOpt = False,
         json: JsonOpt = False) -> None:
    """Plan (the default), run or revert a migration out of the default database."""
    if ctx.invoked_subcommand is None:
        plan(session=session, legacy_dsh=legacy_dsh, default_to_global=default_to_global,
             to=to, check=check, json=json)
    elif session or legacy_dsh or default_to_global or to or check or json:
        # Silently dropping a selector here would run a different class.
        command = f"mnemo migrate {ctx.invoked_subcommand}"
        raise fail(usage_error(f"put the options after the subcommand: {command} [OPTIONS]",
                               f"`{command} --help` shows them."),
                   as_json=json or json_asked(ctx))


@app.command("plan")
@reports
def plan(session: SessionOpt = None, legacy_dsh: LegacyOpt = False,
         default_to_global: GlobalOpt = False, to: ToOpt = None, check: CheckOpt = False,
         json: JsonOpt = False):
    """Show what would move, per namespace and table; writes nothing."""
    settings()
    return core.plan(_selection(session, legacy_dsh, default_to_global, to), check=check)


@app.command("run")
@reports
def run_cmd(session: SessionOpt = None, legacy_dsh: LegacyOpt = False,
            default_to_global: GlobalOpt = False, to: ToOpt = None, yes: YesOpt = False,
            json: JsonOpt = False):
    """Back up both databases, then move the rows (copy, verify, delete)."""
    settings()
    selection = _selection(session, legacy_dsh, default_to_global, to)
    if _interactive(json) and not yes:
        preview = core.plan(selection)
        render(preview, as_json=False)
        if not core.pending(preview.data):
            return None
        if not typer.confirm("Move these rows now?", default=False):
            err.print("Nothing was changed.")
            raise typer.Exit(int(ExitCode.REFUSED))
    with progress_bar(enabled=not json) as progress:
        return core.run(selection, progress=progress)


@app.command("revert")
@reports
def revert(journal: Annotated[str, typer.Option(
               "--journal", help="Journal id to revert, or 'latest'.")] = "latest",
           from_backup: Annotated[bool, typer.Option(
               "--from-backup", help="Restore the run's backups whole instead (loses "
               "later changes to those databases).")] = False,
           yes: YesOpt = False, json: JsonOpt = False):
    """Move a migration's rows back, from its journal (or restore its backups)."""
    settings()
    if _interactive(json) and not yes:
        what = ("restore the backups of" if from_backup else "move back the rows of")
        warning = (" Changes made to those databases since then will be lost."
                   if from_backup else "")
        if not typer.confirm(f"This will {what} migration {journal}.{warning} Continue?",
                             default=False):
            err.print("Nothing was changed.")
            raise typer.Exit(int(ExitCode.REFUSED))
    with progress_bar(enabled=not json) as progress:
        return core.revert(journal, from_backup=from_backup, progress=progress)


def _interactive(json: bool) -> bool:
    return not json and sys.stdin.isatty() and sys.stdout.isatty()


@view("migrate-run")
def _ran(result: Any) -> None:
    for journal_id in result.resumed:
        out.print(f"Completed the interrupted migration {journal_id}.")
    if result.status == "nothing-to-do":
        out.print("Nothing to migrate: no rows match (a finished migration is a no-op).")
        return
    moved = sum(sum(g.moved.values()) for g in result.groups)
    out.print(f"[bold green]Moved[/] {moved} rows ({result.plan.memories} memories and what "
              f"hangs off them); journal [bold]{result.journal}[/].")
    for item in result.backups:
        out.print(f"  backup of {escape(item['database'])}: {escape(item['backup'])}")
    out.print(f"Undo with: mnemo migrate revert --journal {result.journal}")


@view("migrate-revert")
def _reverted(result: Any) -> None:
    if result.status == "already-reverted":
        out.print(f"Migration {result.journal} is already reverted; nothing to do.")
        return
    if result.status == "restored":
        out.print(f"[bold green]Restored[/] the backups of migration {result.journal}:")
        for item in result.restored:
            out.print(f"  {escape(item['database'])} <- {escape(item['backup'])}")
        return
    moved = sum(result.moved_back.values())
    out.print(f"[bold green]Reverted[/] migration {result.journal}: {moved} rows moved back.")


@view("migrate-plan")
def _planned(plan: Any) -> None:
    if not plan.groups:
        out.print(f"Nothing to migrate for {plan.selector} in {escape(plan.source_db)}.")
    for group in plan.groups:
        target = group.target_bank + ("" if group.target_exists else " (new)")
        out.print(f"[bold]{group.memories}[/] memories ({group.rows} rows in all) -> bank "
                  f"[bold]{escape(target)}[/]"
                  + (f" with scope {group.scope_to}" if group.scope_to else ""))
        for ns in group.namespaces:
            arrow = "" if ns.target == ns.source else f" -> {ns.target}"
            out.print(f"  [bold]{escape(ns.source)}[/]{escape(arrow)}: {ns.memories} "
                      f"memories, {ns.rows} rows")
            # Three narrow columns fit 80 columns; the sample gets a line of its
            # own below its table, so no column is ever squeezed to nothing.
            grid = table("table", "rows", "first .. last", padding=(0, 2))
            grid.columns[0].min_width = 14
            for t in ns.tables:
                grid.add_row(t.table, str(t.rows), f"{_minute(t.first)} .. {_minute(t.last)}")
            from rich.padding import Padding

            out.print(Padding(grid, (0, 0, 0, 4)))
            samples = [t for t in ns.tables if t.sample]
            if samples:
                out.print(f"    e.g. ({samples[0].table}) {escape(_shorten(samples[0].sample))}",
                          overflow="ellipsis", no_wrap=True, soft_wrap=False)
    hints = {"legacy-dsh": "--legacy-dsh", "default": "--default-to-global",
             "owned-workspaces": "(no selector)", "orphan-workspaces": "mnemo adopt"}
    others = [f"{name} {count} ({hints[name]})" for name, count in plan.others.items()
              if count and name in hints and name != _class_key(plan.selector)]
    if others:
        out.print("Other memories in the default database: " + ", ".join(others))
    if plan.groups:
        out.print("Run it with: mnemo migrate run" + _flags(plan))


def _shorten(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _minute(stamp: str | None) -> str:
    # "2026-11-29T22:01:25.215279" -> "2026-11-29 22:01": enough to judge a range.
    return stamp[:16].replace("T", " ") if stamp else "-"


def _class_key(selector: str) -> str:
    return {"default-to-global": "default"}.get(selector, selector)


def _flags(plan: Any) -> str:
    if plan.selector == "legacy-dsh":
        return " --legacy-dsh"
    if plan.selector == "default-to-global":
        return " --default-to-global"
    if plan.selector == "sessions":
        return "".join(f" --session {ns.source}" for g in plan.groups for ns in g.namespaces)
    return ""
