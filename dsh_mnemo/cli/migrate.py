"""`migrate plan|run|revert`: bring rows of the default database home."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from ..errors import ExitCode
from ..workspace.index import Index
from .common import JsonOpt, emit_json, err, escape, lazy, out, run, settings

core = lazy("dsh_mnemo.migrate")

app = typer.Typer(
    name="migrate", no_args_is_help=False, invoke_without_command=True,
    help="Move rows of the default database (legacy DSH data) into workspace banks.")

SessionOpt = Annotated[list[str] | None, typer.Option(
    "--session", help="An exact session_id to move (repeatable).", show_default=False)]
LegacyOpt = Annotated[bool, typer.Option(
    "--legacy-dsh", help="Every legacy DSH session (dsh_*, never dsh_v2_*).")]
GlobalOpt = Annotated[bool, typer.Option(
    "--default-to-global", help="The legacy 'default' pool into the global bank.")]
ToOpt = Annotated[Path | None, typer.Option(
    "--to", help="A directory of the target workspace (default: the current directory).",
    show_default=False)]
CheckOpt = Annotated[bool, typer.Option(
    "--check", help="Exit with code 8 when rows are pending (for CI).")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="migrate")


def _selection(sessions: list[str] | None, legacy: bool, to_global: bool,
               to: Path | None) -> core.Selection:
    return core.Selection(sessions=list(sessions or []), legacy_dsh=legacy,
                          default_to_global=to_global, to=to)


@app.callback()
def main(ctx: typer.Context, session: SessionOpt = None, legacy_dsh: LegacyOpt = False,
         default_to_global: GlobalOpt = False, to: ToOpt = None, check: CheckOpt = False,
         json: JsonOpt = False) -> None:
    """Plan (the default), run or revert a migration out of the default database."""
    if ctx.invoked_subcommand is None:
        plan(session, legacy_dsh, default_to_global, to, check, json)
    elif session or legacy_dsh or default_to_global or to or check or json:
        # Silently dropping a selector here would run a different class.
        err.print(f"[bold red]mnemo:[/] put the options after the subcommand: "
                  f"mnemo migrate {ctx.invoked_subcommand} [OPTIONS]")
        raise typer.Exit(int(ExitCode.USAGE))


@app.command("plan")
def plan(session: SessionOpt = None, legacy_dsh: LegacyOpt = False,
         default_to_global: GlobalOpt = False, to: ToOpt = None, check: CheckOpt = False,
         json: JsonOpt = False) -> None:
    """Show what would move, per namespace and table; writes nothing."""
    settings(json_errors=json)
    selection = _selection(session, legacy_dsh, default_to_global, to)
    result = run(lambda: core.plan_migration(selection, index=Index()), json_errors=json)
    if json:
        emit_json("migrate-plan", result)
    else:
        _render_plan(result)
    if check and (result.pending or result.unfinished):
        raise typer.Exit(int(ExitCode.PENDING))


@app.command("run")
def run_cmd(session: SessionOpt = None, legacy_dsh: LegacyOpt = False,
            default_to_global: GlobalOpt = False, to: ToOpt = None, yes: YesOpt = False,
            json: JsonOpt = False) -> None:
    """Back up both databases, then move the rows (copy, verify, delete)."""
    settings(json_errors=json)
    selection = _selection(session, legacy_dsh, default_to_global, to)
    if _interactive(json) and not yes:
        preview = run(lambda: core.plan_migration(selection, index=Index()))
        _render_plan(preview)
        if not preview.pending and not preview.unfinished:
            return
        if not typer.confirm("Move these rows now?", default=False):
            err.print("Nothing was changed.")
            raise typer.Exit(int(ExitCode.REFUSED))
    with _progress(enabled=not json) as progress:
        result = run(lambda: core.run_migration(selection, index=Index(), progress=progress),
                     json_errors=json)
    if json:
        emit_json("migrate-run", result)
        return
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
    missing = sum(g.missing for g in result.groups)
    if missing:
        err.print(f"[yellow]{missing} journaled rows were found in neither database.[/]")
    out.print(f"Undo with: mnemo migrate revert --journal {result.journal}")


@app.command("revert")
def revert(journal: Annotated[str, typer.Option(
               "--journal", help="Journal id to revert, or 'latest'.")] = "latest",
           from_backup: Annotated[bool, typer.Option(
               "--from-backup", help="Restore the run's backups whole instead (loses "
               "later changes to those databases).")] = False,
           yes: YesOpt = False, json: JsonOpt = False) -> None:
    """Move a migration's rows back, from its journal (or restore its backups)."""
    settings(json_errors=json)
    if _interactive(json) and not yes:
        what = ("restore the backups of" if from_backup else "move back the rows of")
        warning = (" Changes made to those databases since then will be lost."
                   if from_backup else "")
        if not typer.confirm(f"This will {what} migration {journal}.{warning} Continue?",
                             default=False):
            err.print("Nothing was changed.")
            raise typer.Exit(int(ExitCode.REFUSED))
    with _progress(enabled=not json) as progress:
        result = run(lambda: core.revert_migration(journal, from_backup=from_backup,
                                                   progress=progress), json_errors=json)
    if json:
        emit_json("migrate-revert", result)
        return
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
    if result.missing:
        err.print(f"[yellow]{len(result.missing)} rows were deleted since the migration "
                  "and could not be moved back:[/]")
        for table, key in result.missing[:20]:
            err.print(f"  {escape(str(table))} {escape(str(key))}")


def _interactive(json: bool) -> bool:
    return not json and sys.stdin.isatty() and sys.stdout.isatty()


@contextmanager
def _progress(*, enabled: bool) -> Iterator[Callable[[str, int, int], None] | None]:
    """A rich progress bar on a terminal; nothing otherwise."""
    if not enabled or not err.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    bar = Progress(TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(),
                   console=err, transient=True)
    tasks: dict[str, int] = {}

    def update(phase: str, done: int, total: int) -> None:
        if phase not in tasks:
            tasks[phase] = bar.add_task(phase, total=total)
        bar.update(tasks[phase], completed=done, total=total)

    with bar:
        yield update


def _render_plan(plan: core.Plan) -> None:
    from rich.table import Table

    for journal_id in plan.unfinished:
        err.print(f"[yellow]Migration {journal_id} was interrupted; `mnemo migrate run` "
                  "completes it first.[/]")
    for note in plan.notes:
        err.print(f"[yellow]{escape(note)}[/]")
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
            table = Table("table", "rows", "first", "last", "sample", box=None,
                          padding=(0, 1), pad_edge=False)
            table.columns[4].no_wrap = True
            table.columns[4].overflow = "ellipsis"
            for t in ns.tables:
                table.add_row("    " + t.table, str(t.rows), _minute(t.first), _minute(t.last),
                              escape((t.sample or "")[:60]))
            out.print(table)
    hints = {"legacy-dsh": "--legacy-dsh", "default": "--default-to-global",
             "owned-workspaces": "(no selector)", "orphan-workspaces": "mnemo adopt"}
    others = [f"{name} {count} ({hints[name]})" for name, count in plan.others.items()
              if count and name in hints and name != _class_key(plan.selector)]
    if others:
        out.print("Other memories in the default database: " + ", ".join(others))
    if plan.groups:
        out.print("Run it with: mnemo migrate run" + _flags(plan))


def _minute(stamp: str | None) -> str:
    # "2026-11-29T22:01:25.215279" -> "2026-11-29 22:01": enough to judge a range.
    return stamp[:16].replace("T", " ") if stamp else "-"


def _class_key(selector: str) -> str:
    return {"default-to-global": "default"}.get(selector, selector)


def _flags(plan: core.Plan) -> str:
    if plan.selector == "legacy-dsh":
        return " --legacy-dsh"
    if plan.selector == "default-to-global":
        return " --default-to-global"
    if plan.selector == "sessions":
        return "".join(f" --session {ns.source}" for g in plan.groups for ns in g.namespaces)
    return ""
