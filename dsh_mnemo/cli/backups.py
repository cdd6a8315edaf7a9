"""`backups [list]`, `backups prune`: the snapshots migrations take, and their retention."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from ..errors import ExitCode
from .common import (
    JsonOpt,
    err,
    escape,
    fail,
    lazy,
    out,
    render,
    reports,
    settings,
    table,
    usage_error,
    view,
)

core = lazy("dsh_mnemo.commands.backups")

app = typer.Typer(
    name="backups", no_args_is_help=False, invoke_without_command=True,
    help="List the snapshots migrations took (backups/), and prune them by the retention "
         "policy (backups.keep_days, backups.keep_migrations).")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="backups")


@app.callback()
def main(ctx: typer.Context, json: JsonOpt = False) -> None:
    """List (the default) or prune the snapshots of migrations."""
    if ctx.invoked_subcommand is None:
        list_cmd(json=json)
    elif json:
        command = f"mnemo backups {ctx.invoked_subcommand}"
        raise fail(usage_error(f"put the options after the subcommand: {command} [OPTIONS]",
                               f"`{command} --help` shows them."), as_json=json)


@app.command("list")
@reports
def list_cmd(json: JsonOpt = False):
    """List every set of snapshots, newest first: size, age, and what retention does."""
    return core.listing(settings())


@app.command("prune")
@reports
def prune(older_than: Annotated[int | None, typer.Option(
              "--older-than", min=0, metavar="DAYS", show_default=False,
              help="Prune every set older than DAYS days instead of applying the "
                   "configured policy (0: every set).")] = None,
          dry_run: Annotated[bool, typer.Option(
              "--dry-run", help="Show what would be deleted; delete nothing.")] = False,
          yes: Annotated[bool, typer.Option("--yes", "-y",
                                            help="Do not ask for confirmation.")] = False,
          json: JsonOpt = False):
    """Delete the snapshots the retention policy (or --older-than) says are due.

    Unfinished migrations keep theirs. A pruned migration can still be reverted
    from its journal, but no longer with `mnemo migrate revert --from-backup`.
    """
    loaded = settings()
    if not dry_run and not yes and not json and sys.stdin.isatty() and sys.stdout.isatty():
        preview = core.prune(loaded, older_than=older_than, dry_run=True)
        if not preview.data.pruned:
            render(preview, as_json=False)
            return None
        render(preview, as_json=False)
        if not typer.confirm("Delete these snapshots?", default=False):
            err.print("Nothing was deleted.")
            raise typer.Exit(int(ExitCode.REFUSED))
    return core.prune(loaded, older_than=older_than, dry_run=dry_run)


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"


STATES = {"kept": "kept", "due": "[yellow]due[/]", "protected": "[cyan]protected[/]",
          "pruned": "[dim]pruned[/]"}


def _grid(sets: list[Any]) -> Any:
    grid = table("journal", "status", "age", "size", "retention", "undo")
    grid.columns[0].min_width = 25  # a journal id, never folded: it is what gets copied
    for entry in sets:
        undo = "both" if entry.from_backup else "journal" if entry.revert_command else "-"
        grid.add_row(entry.journal, entry.status or "-", f"{entry.age_days:.0f} d",
                     _size(entry.bytes) if entry.exists else "-",
                     STATES.get(entry.state, entry.state), undo)
    return grid


UNDO_LEGEND = ("undo: journal = `mnemo migrate revert --journal ID`; both = that, or "
               "`--from-backup` too.")


@view("backups")
def _listed(result: Any) -> None:
    policy = result.policy
    days = f"{policy['keep_days']} days" if policy["keep_days"] else "no age limit"
    count = (f"the newest {policy['keep_migrations']}" if policy["keep_migrations"]
             else "no count limit")
    out.print(f"Snapshots in {escape(result.backups_dir)}: {_size(result.bytes)}; kept for "
              f"{days}, {count} (backups.keep_days, backups.keep_migrations).")
    if not result.backups:
        out.print("No migration has taken snapshots.")
        return
    out.print(_grid(result.backups))
    out.print(UNDO_LEGEND)


@view("backups-prune")
def _pruned(result: Any) -> None:
    verb = "Would delete" if result.dry_run else "Deleted"
    rule = (f"older than {result.older_than_days} days" if result.older_than_days is not None
            else "past the retention policy")
    if not result.pruned:
        out.print(f"No snapshots {rule}; nothing to delete.")
        return
    out.print(f"{verb} the snapshots of {len(result.pruned)} migration(s) {rule} "
              f"({_size(result.freed_bytes)}); {result.kept} set(s) kept.")
    out.print(_grid(result.pruned))
    out.print(UNDO_LEGEND)
