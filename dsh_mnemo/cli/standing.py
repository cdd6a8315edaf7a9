"""`standing list|remove` and `candidates list|accept|reject`."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

import typer

from .common import JsonOpt, escape, lazy, out, reports, settings, table, view

core = lazy("dsh_mnemo.commands.standing")

standing_app = typer.Typer(
    name="standing", no_args_is_help=False, invoke_without_command=True,
    help="The standing memories given to the model every session (rules, conventions, "
         "preferences, identity).")
candidates_app = typer.Typer(
    name="candidates", no_args_is_help=False, invoke_without_command=True,
    help="Standing statements found in captured turns (capture.standing: suggest), to "
         "accept or reject.")


class StandingScope(str, Enum):
    workspace = "workspace"
    global_ = "global"


IdArg = Annotated[str, typer.Argument(
    metavar="ID", show_default=False,
    help="Its id, as the list shows it, or its first 4 or more characters when no other "
         "id starts with them.")]


def register(app: typer.Typer) -> None:
    app.add_typer(standing_app)
    app.add_typer(candidates_app)


@standing_app.callback()
def standing_main(ctx: typer.Context, json: JsonOpt = False) -> None:
    """List the standing memories that apply here (the default), or remove one."""
    if ctx.invoked_subcommand is None:
        list_standing(json=json)


@standing_app.command("list")
@reports
def list_standing(json: JsonOpt = False):
    """The workspace's and the global standing memories, in the order a session gets them."""
    return core.list_(settings())


@view("standing")
def _standing(report: Any) -> None:
    if not report.standing:
        out.print("No standing memories. Add one with `mnemo remember --standing TEXT`.")
        return
    grid = table("id", "level", "importance", "at start", "memory")
    for item in report.standing:
        grid.add_row(item.id, item.level, f"{item.importance:.2f}",
                     "yes" if item.at_session_start else "[yellow]no[/]", escape(item.content))
    out.print(grid)
    out.print(f"Given once per session, in this order, within {report.budget_chars} characters.")


@standing_app.command("remove")
@reports
def remove(memory_id: IdArg, json: JsonOpt = False):
    """Delete one standing memory (of this workspace, or a global one)."""
    return core.remove(settings(), memory_id)


@candidates_app.callback()
def candidates_main(ctx: typer.Context, json: JsonOpt = False) -> None:
    """List the pending candidates (the default), or accept or reject one."""
    if ctx.invoked_subcommand is None:
        list_candidates(json=json)


@candidates_app.command("list")
@reports
def list_candidates(
    every: Annotated[bool, typer.Option("--all", help="Accepted and rejected ones too.")]
    = False,
    json: JsonOpt = False,
):
    """Standing statements found in this workspace's captured turns."""
    return core.candidates(settings(), status=None if every else "pending")


@view("candidates")
def _candidates(report: Any) -> None:
    if not report.candidates:
        out.print("No candidates. With `mnemo config set capture.standing suggest`, standing "
                  "statements in your turns are filed here.")
        return
    grid = table("id", "status", "found", "statement")
    if all(c.status == "rejected" for c in report.candidates) and len(report.candidates) == 1:
        out.print(f"Rejected {report.candidates[0].id}: it will not be suggested again.")
        return
    for item in report.candidates:
        grid.add_row(item.id, item.status, item.created_at[:10],
                     escape(item.text) or "[dim](its turn was forgotten)[/]")
    out.print(grid)


@candidates_app.command("accept")
@reports
def accept(candidate_id: IdArg,
           scope: Annotated[StandingScope, typer.Option(
               "--scope", help="workspace (the default) or global (every project).")]
           = StandingScope.workspace,
           json: JsonOpt = False):
    """Make a candidate a standing memory."""
    return core.accept(settings(), candidate_id, scope=scope.value)


@candidates_app.command("reject")
@reports
def reject(candidate_id: IdArg, json: JsonOpt = False):
    """Drop a candidate; it is never suggested again."""
    return core.reject(settings(), candidate_id)

