"""`adopt` and `rebind`: point a directory at memories that already exist."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..workspace.index import Index
from .common import JsonOpt, emit_json, escape, lazy, out, run, settings
from .migrate import _progress

core = lazy("dsh_mnemo.commands.workspace")
rebinding = lazy("dsh_mnemo.workspace.adopt")

PathArg = Annotated[Path | None, typer.Argument(
    help="Workspace directory (default: the current directory).", show_default=False)]


def register(app: typer.Typer) -> None:
    app.command("adopt")(adopt)
    app.command("rebind")(rebind)


def adopt(namespace: Annotated[str, typer.Argument(
              help="The orphan namespace (dsh_v2_workspace_…) listed by `mnemo workspaces`.")],
          path: PathArg = None,
          no_move: Annotated[bool, typer.Option(
              "--no-move", help="Only pin the namespace; leave rows of the default "
              "database for a later `mnemo migrate run`.")] = False,
          json: JsonOpt = False) -> None:
    """Pin an orphan namespace to a directory, so its memories become that workspace's.

    Rows of the namespace still in the default database are moved into the
    workspace's bank (with backups and a journal, revertible with
    `mnemo migrate revert`), unless --no-move.
    """
    settings(json_errors=json)
    with _progress(enabled=not json) as progress:
        result = run(lambda: core.adopt(namespace, path, index=Index(), move=not no_move,
                                        progress=progress), json_errors=json)
    if json:
        emit_json("adopt", result)
        return
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


def rebind(path: PathArg = None,
           source: Annotated[str | None, typer.Option(
               "--from", help="The workspace whose memory this directory should use: its "
               "namespace, identity key (id:<uuid>) or last seen path.",
               show_default=False)] = None,
           json: JsonOpt = False) -> None:
    """Point a directory at an existing workspace's memory (no data moves).

    For a directory whose marker was lost or replaced, a moved project, or a
    checkout on a new machine. The old entry is kept, marked superseded.
    """
    settings(json_errors=json)
    result = run(lambda: rebinding.rebind(path, source, index=Index()), json_errors=json)
    if json:
        emit_json("rebind", result)
        return
    if result.status == "already-bound":
        out.print(f"{escape(result.root)} already uses that memory ({result.namespace}).")
        return
    out.print(f"[bold green]Rebound[/] {escape(result.root)} to {result.namespace} "
              f"({result.rows} memories); no data moved.")
    if result.marker_written:
        out.print(f"  new marker {escape(result.marker_path)}")
    if result.superseded:
        out.print(f"  {result.superseded} is now superseded by {result.identity_key}")
