"""`bind`, `status`, `workspaces`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..workspace import binding as core
from ..workspace import listing
from ..workspace.index import Index
from .common import JsonOpt, emit_json, err, escape, out, run, settings

PathArg = Annotated[Path | None, typer.Argument(
    help="Directory to act on (default: the current directory).", show_default=False)]


def register(app: typer.Typer) -> None:
    app.command("bind")(bind)
    app.command("status")(status)
    app.command("workspaces")(workspaces)


BindPathArg = Annotated[Path | None, typer.Argument(
    help="Directory to bind (default: the top of the git repository around the current "
         "directory, else the current directory).", show_default=False)]


def bind(path: BindPathArg = None,
         decline: Annotated[bool, typer.Option(
             "--decline", help="Do not bind; silence the bind hint here for 30 days.")] = False,
         json: JsonOpt = False) -> None:
    """Bind a repository (or a directory) to a workspace memory, once per repository."""
    settings(json_errors=json)
    result = run(lambda: core.decline(path) if decline else core.bind(path), json_errors=json)
    if json:
        emit_json("bind", result)
        return
    if result.status == "declined":
        out.print(f"Declined: no marker written; the bind hint stays quiet for "
                  f"{escape(result.root)} for 30 days.")
        return
    if result.status == "already-bound":
        out.print(f"Already bound: {escape(result.root)} is workspace "
                  f"[bold]{escape(result.display_name or '')}[/]")
    else:
        out.print(f"Bound {escape(result.root)} as workspace "
                  f"[bold]{escape(result.display_name or '')}[/]")
    out.print(f"  namespace {result.namespace}\n  marker    {escape(result.marker_path or '')}")
    if result.status == "bound" and result.gitignore_hint:
        out.print("Commit .mnemosyne-id to share this memory with every checkout of the "
                  "repository; add it to .gitignore to keep the binding to this machine.")


def status(path: PathArg = None,
           session: Annotated[str | None, typer.Option(
               "--session", help="Session id, for session recall mode.")] = None,
           json: JsonOpt = False) -> None:
    """Show which memory this directory reads and writes."""
    loaded = settings(json_errors=json)
    report = run(lambda: core.status(path, loaded, session_id=session), json_errors=json)
    if json:
        emit_json("status", report)
        return
    if report.index_recovered_from:
        err.print(f"[yellow]The index was corrupt; it was moved to "
                  f"{escape(report.index_recovered_from)} and rebuilt.[/]")
    for problem in report.marker_problems:
        err.print(f"[yellow]Ignored {escape(problem['path'])}: {escape(problem['reason'])}[/]")
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


def workspaces(json: JsonOpt = False) -> None:
    """List known workspaces, orphaned namespaces and suggestions."""
    settings(json_errors=json)
    report = run(lambda: listing.list_workspaces(index=Index(), cwd=Path.cwd()),
                 json_errors=json)
    if json:
        emit_json("workspaces", report)
        return
    from rich.table import Table

    if report.index_recovered_from:
        err.print(f"[yellow]The index was corrupt; it was moved to "
                  f"{escape(report.index_recovered_from)} and rebuilt.[/]")
    if not report.workspaces and not report.orphans and not report.suggestions:
        out.print("No workspaces yet. Run `mnemo bind` in a project.")
        return
    if report.workspaces:
        table = Table("name", "state", "path", "namespace", box=None)
        for row in report.workspaces:
            table.add_row(escape(row.display_name), row.state, escape(row.last_seen_path),
                          row.namespace[:30] + "…")
        out.print(table)
    if report.orphans:
        out.print("\n[bold]Orphans[/]: namespaces with rows but no workspace "
                  "(recover with `mnemo adopt NAMESPACE PATH`)")
        for orphan in report.orphans:
            # One line per namespace: it is what the user copies into `adopt`.
            out.print(f"  {orphan.namespace}")
            seen = f", last seen at {escape(orphan.last_seen_path)}" \
                if orphan.last_seen_path else ""
            out.print(f"    {escape(orphan.where)}: {orphan.rows} memories, "
                      f"{orphan.first or '-'} .. {orphan.last or '-'}{seen}")
    if report.pending:
        rows = sum(p.rows for p in report.pending)
        out.print(f"\n{rows} memories of {len(report.pending)} workspace(s) still sit in the "
                  "default database; `mnemo migrate` shows them, `mnemo migrate run` moves "
                  "them.")
    for item in report.suggestions:
        out.print(f"\n[bold yellow]Candidate[/] for this directory ({item['kind']} "
                  f"{escape(str(item.get('display_name') or item['namespace']))}, last seen at "
                  f"{escape(str(item.get('last_seen_path') or '-'))}, {item['rows']} memories); "
                  "never merged automatically. If it is this project:\n  "
                  f"{escape(str(item['command']))}")
