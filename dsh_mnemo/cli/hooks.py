"""`mnemo hook …` (what harnesses run) and `mnemo hooks install|uninstall|status`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..harnesses.registry import EVENTS, NAMES
from .common import JsonOpt, escape, lazy, out, reports, settings, view

core = lazy("dsh_mnemo.commands.hooks")

HarnessOpt = Annotated[str, typer.Option(
    "--harness", help=f"The harness: {', '.join(NAMES)}.", show_default=False)]
ProjectOpt = Annotated[Path | None, typer.Option(
    "--project", help="Use the project-level config of this directory instead of the "
    "user-level one.", show_default=False)]

hooks_app = typer.Typer(
    name="hooks", no_args_is_help=True,
    help="Install, remove or check mnemo's hooks in a harness's config.")


def register(app: typer.Typer) -> None:
    app.command("hook", context_settings={"ignore_unknown_options": True,
                                          "allow_extra_args": True})(hook)
    app.add_typer(hooks_app)


def hook(
    event: Annotated[str, typer.Argument(
        help=f"The event: {', '.join(EVENTS)}.", show_default=False)],
    harness: Annotated[str, typer.Option(
        "--harness", help=f"The harness sending the event: {', '.join(NAMES)}.")]
    = "generic",
) -> None:
    """Run by harnesses: read the event JSON on stdin, answer in the harness's format.

    Always exits 0 and prints nothing on any failure (see the hook log in the
    data dir).  The `generic` harness takes {"cwd", "session_id", "prompt"} or
    {"cwd", "session_id", "user", "assistant"} and prints plain text.
    """
    import sys

    from ..hook.entry import run_hook

    # `mnemo hook` normally never gets here (__main__ dispatches it before Typer
    # loads); when it does, stay in-process: no os._exit under a caller.
    raise typer.Exit(run_hook([event, "--harness", harness], stdin=sys.stdin,
                              stdout=sys.stdout, hard_exit=False))


@hooks_app.command("install")
@reports
def install(harness: HarnessOpt, project: ProjectOpt = None, json: JsonOpt = False):
    """Merge mnemo's hooks into the harness's config (backed up first; idempotent)."""
    settings()
    return core.install(harness, project)


@view("hooks-install")
def _installed(result: Any) -> None:
    if result.action == "unchanged":
        out.print(f"mnemo's hooks for {result.harness} are already installed in "
                  f"{escape(result.config_path or '-')}; nothing changed.")
    elif result.config_path:
        out.print(f"{result.action.capitalize()} mnemo's hooks for {result.harness} in "
                  f"{escape(result.config_path)}")
    else:
        out.print(f"Wrote the hook wrapper {escape(result.wrapper_path or '')}")
    if result.backup_path:
        out.print(f"  backup of the previous file: {escape(result.backup_path)}")
    for kind, command in result.commands.items():
        out.print(f"  {kind:<12} {escape(command)}")
    if result.next_steps:
        out.print("[bold]Still to do:[/]")
        for step in result.next_steps:
            out.print(f"  - {escape(step)}")


@hooks_app.command("uninstall")
@reports
def uninstall(harness: HarnessOpt, project: ProjectOpt = None, json: JsonOpt = False):
    """Remove mnemo's hooks (and nothing else) from the harness's config."""
    settings()
    return core.uninstall(harness, project)


@view("hooks-uninstall")
def _uninstalled(result: Any) -> None:
    if result.action == "removed":
        out.print(f"Removed mnemo's hooks for {result.harness} from "
                  f"{escape(result.config_path or '')}")
        out.print(f"  backup of the previous file: {escape(result.backup_path or '')}")
    elif result.config_path:
        out.print(f"No mnemo hooks for {result.harness} in {escape(result.config_path)}; "
                  "nothing changed.")
    else:
        out.print(f"The {result.harness} harness has no config file; stop calling "
                  f"{escape(result.wrapper_path or '')} from your harness.")


@hooks_app.command("status")
@reports
def status(harness: HarnessOpt, project: ProjectOpt = None, json: JsonOpt = False):
    """Is mnemo installed in the harness's config, and does it reach a working mnemo?"""
    settings()
    return core.status(harness, project)


@view("hooks-status")
def _status(report: Any) -> None:
    state = ("[bold green]installed[/]" if report.ok else
             "[bold yellow]installed, with problems[/]" if report.installed else
             "[bold yellow]not installed[/]")
    out.print(f"{report.harness}: {state}")
    out.print(f"  config   {escape(report.config_path or '-')}")
    for kind, present in report.events.items():
        out.print(f"  {kind:<8} {'yes' if present else 'no'}")
    out.print(f"  mnemo    {escape(report.mnemo_path or '-')}")
