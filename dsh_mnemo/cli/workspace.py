"""`bind`, `status`, `workspaces`, `adopt`, `rebind`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from .common import (
    ID,
    PATH,
    JsonOpt,
    escape,
    lazy,
    out,
    progress_bar,
    reports,
    settings,
    table,
    view,
)

core = lazy("dsh_mnemo.commands.workspace")

PathArg = Annotated[Path | None, typer.Argument(
    help="Directory to act on (default: the current directory).", show_default=False,
    click_type=PATH)]
BindPathArg = Annotated[Path | None, typer.Argument(
    help="Directory to bind (default: the top of the git repository around the current "
         "directory, else the current directory).", show_default=False, click_type=PATH)]
WorkspacePathArg = Annotated[Path | None, typer.Argument(
    help="Workspace directory (default: the current directory).", show_default=False,
    click_type=PATH)]


def register(app: typer.Typer) -> None:
    app.command("bind")(bind)
    app.command("status")(status)
    app.command("workspaces")(workspaces)
    app.command("adopt")(adopt)
    app.command("rebind")(rebind)


@reports
def bind(path: BindPathArg = None,
         decline: Annotated[bool, typer.Option(
             "--decline", help="Do not bind; silence the bind hint here for "
             "`hint.decline_days` days (30 by default).")] = False,
         new: Annotated[bool, typer.Option(
             "--new", help="Bind a new, empty memory even where the index says this "
             "directory's workspace (with memories) lost its marker (without it, bind "
             "refuses and names the `mnemo rebind` that restores that memory), or for a "
             "PATH inside a bound workspace (a monorepo's package).")] = False,
         json: JsonOpt = False):
    """Bind a repository (or a directory) to a workspace memory, once per repository."""
    return core.bind(path, settings(), decline=decline, new=new)


@view("bind")
def _bound(result: Any) -> None:
    if result.status == "declined":
        return  # the report's note says it all
    if result.status == "already-bound":
        out.print(f"Already bound: {escape(result.root)} is workspace "
                  f"[bold]{escape(result.display_name or '')}[/]")
    else:
        out.print(f"Bound {escape(result.root)} as workspace "
                  f"[bold]{escape(result.display_name or '')}[/]")
    out.print(f"  namespace {result.namespace}\n  marker    {escape(result.marker_path or '')}")


@reports
def status(path: PathArg = None,
           session: Annotated[str | None, typer.Option(
               "--session", help="Session id, for session recall mode.", click_type=ID)]
           = None,
           json: JsonOpt = False):
    """Show which memory this directory reads and writes."""
    return core.status(path, settings(), session_id=session)


@view("status")
def _status(report: Any) -> None:
    if report.bound:
        out.print(f"[bold green]bound[/] ({report.mode} mode): "
                  f"[bold]{escape(report.display_name or '-')}[/]")
    elif report.reason == "no-session":
        out.print(f"[bold yellow]no-session[/] ({report.mode} mode): session recall needs a "
                  "session id; nothing is read or written without one. Pass --session ID.")
    else:
        out.print(f"[bold yellow]{report.reason}[/] ({report.mode} mode): no memory is "
                  "read or written here. Run `mnemo bind` to give this project a memory.")
    rows = [("root", report.root), ("namespace", report.namespace), ("bank", report.bank),
            ("database", report.db_path), ("data dir", report.data_dir),
            ("config", report.config_path)]
    for label, value in rows:
        out.print(f"  {label:<10} {escape(str(value) if value else '-')}")
    if report.server is not None:
        from .serve import render_server

        render_server(report.server)


@reports
def workspaces(json: JsonOpt = False):
    """List known workspaces, orphaned namespaces and suggestions."""
    settings()
    return core.workspaces(Path.cwd())


@view("workspaces")
def _workspaces(report: Any) -> None:
    if not report.workspaces and not report.orphans and not report.suggestions:
        out.print("No workspaces yet. Run `mnemo bind` in a project.")
        return
    sections = 0

    def section() -> None:  # a blank line between sections, none before the first
        nonlocal sections
        if sections:
            out.print()
        sections += 1

    if report.workspaces:
        section()
        grid = table("name", "state", "path", "namespace")
        for row in report.workspaces:
            # A superseded entry follows the one that took over its memory.
            name = f"└ {row.display_name}" if row.superseded_by else row.display_name
            where = escape(row.last_seen_path)
            if row.previous_paths and not row.superseded_by:
                where += "".join(f"\n[dim]was {escape(p)}[/]" for p in row.previous_paths)
            grid.add_row(escape(name), row.state, where, row.namespace[:30] + "…")
        out.print(grid)
    if report.orphans:
        section()
        out.print("[bold]Orphans[/]: namespaces with rows but no workspace "
                  "(recover with `mnemo adopt NAMESPACE PATH`)")
        for orphan in report.orphans:
            # One line per namespace: it is what the user copies into `adopt`.
            out.print(f"  {orphan.namespace}")
            seen = f", last seen at {escape(orphan.last_seen_path)}" \
                if orphan.last_seen_path else ""
            out.print(f"    {escape(_where(orphan.where))}: {orphan.rows} memories, "
                      f"{orphan.first or '-'} .. {orphan.last or '-'}{seen}")
    if report.pending:
        section()
        rows = sum(p.rows for p in report.pending)
        out.print(f"{rows} memories of {len(report.pending)} workspace(s) still sit in the "
                  "default database; `mnemo migrate` shows them, `mnemo migrate run` moves "
                  "them.")
    for item in report.suggestions:
        section()
        out.print(f"[bold yellow]Candidate[/] for this directory ({item['kind']} "
                  f"{escape(str(item.get('display_name') or item['namespace']))}, last seen at "
                  f"{escape(str(item.get('last_seen_path') or '-'))}, {item['rows']} memories); "
                  "never merged automatically. If it is this project:\n  "
                  f"{escape(str(item['command']))}")


def _where(where: str) -> str:
    """An orphan's `where` for people: `default` is the default database, not the
    legacy namespace of that name; `bank:<name>` is a bank of its own."""
    if where == "default":
        return "default database (mnemosyne.db)"
    return f"bank {where.removeprefix('bank:')}"


@reports
def adopt(namespace: Annotated[str, typer.Argument(
              help="The orphan namespace (dsh_v2_workspace_…) listed by `mnemo workspaces`.")],
          path: WorkspacePathArg = None,
          no_move: Annotated[bool, typer.Option(
              "--no-move", help="Only pin the namespace; leave rows of the default "
              "database for a later `mnemo migrate run`.")] = False,
          json: JsonOpt = False):
    """Pin an orphan namespace to a directory, so its memories become that workspace's.

    Rows of the namespace still in the default database are moved into the
    workspace's bank (with backups and a journal, revertible with
    `mnemo migrate revert`), unless --no-move.
    """
    settings()
    with progress_bar(enabled=not json) as progress:
        return core.adopt(namespace, path, move=not no_move, progress=progress)


@view("adopt")
def _adopted(result: Any) -> None:
    verb = "Adopted" if result.status == "adopted" else "Already adopted:"
    out.print(f"[bold green]{verb}[/] {result.namespace}\n  directory {escape(result.root)}\n"
              f"  marker    {escape(result.marker_path)}\n  bank      {result.bank} "
              f"({result.bank_rows} memories)")
    if result.journal:
        out.print(f"Moved {result.moved_rows} memories from the default database "
                  f"(journal {result.journal}; undo with `mnemo migrate revert --journal "
                  f"{result.journal}`).")
    if result.migrate_command:
        out.print(f"{result.default_rows} memories are still in the default database; move "
                  f"them with:\n  {result.migrate_command}")


@reports
def rebind(path: WorkspacePathArg = None,
           source: Annotated[str | None, typer.Option(
               "--from", help="The workspace whose memory this directory should use: its "
               "namespace, identity key (id:<uuid>) or a path it was seen at.",
               show_default=False)] = None,
           json: JsonOpt = False):
    """Point a directory at an existing workspace's memory (no data moves).

    For a directory whose marker was lost or replaced, a moved project, or a
    checkout on a new machine. The old entry is kept, marked superseded.
    """
    settings()
    return core.rebind(path, source)


@view("rebind")
def _rebound(result: Any) -> None:
    if result.status == "already-bound":
        out.print(f"{escape(result.root)} already uses that memory ({result.namespace}).")
        return
    out.print(f"[bold green]Rebound[/] {escape(result.root)} to {result.namespace} "
              f"({result.rows} memories); no data moved.")
    if result.marker_written:
        out.print(f"  new marker {escape(result.marker_path)}")
    if result.superseded:
        out.print(f"  {result.superseded} is now superseded by {result.identity_key}")
