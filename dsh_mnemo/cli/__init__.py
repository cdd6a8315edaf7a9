"""The Typer application: one module per command group, composed here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from .. import __version__
from . import (
    backups,
    config,
    doctor,
    hooks,
    importing,
    mcp,
    memory,
    migrate,
    serve,
    standing,
    workspace,
)
from .common import PATH, Group

app = typer.Typer(
    name="mnemo",
    cls=Group,
    help="Workspace-scoped long-term memory for coding agents, on Mnemosyne.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mnemo {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    data_dir: Annotated[Path | None, typer.Option(
        "--data-dir", envvar="MNEMO_DATA_DIR", show_envvar=True,
        help="Data directory (index, banks, backups, logs).", click_type=PATH)] = None,
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Show the version and exit.")] = False,
) -> None:
    """mnemo: one shared memory per project, for every coding-agent harness."""
    if data_dir is not None:
        os.environ["MNEMO_DATA_DIR"] = str(data_dir.expanduser().absolute())
    from ..fsutil import secure_process

    # Private files from here on; an older install is made private once
    # (never by doctor, which only reports).
    secure_process(fix_existing=ctx.invoked_subcommand != "doctor")


workspace.register(app)
memory.register(app)
standing.register(app)
hooks.register(app)
migrate.register(app)
backups.register(app)
config.register(app)
doctor.register(app)
mcp.register(app)
importing.register(app)
serve.register(app)
