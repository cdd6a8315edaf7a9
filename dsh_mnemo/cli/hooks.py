"""`mnemo hook …` (what harnesses run) and `mnemo hooks install|uninstall|status`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..harnesses.registry import EVENTS
from ..harnesses.registry import NAMES as HARNESSES
from .common import JsonOpt, emit_json, err, escape, lazy, out, run, settings

core = lazy("dsh_mnemo.harnesses.install")

HarnessOpt = Annotated[str, typer.Option(
    "--harness", help=f"The harness: {', '.join(HARNESSES)}.", show_default=False)]
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
        "--harness", help=f"The harness sending the event: {', '.join(HARNESSES)}.")]
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
def install(harness: HarnessOpt, project: ProjectOpt = None, json: JsonOpt = False) -> None:
    """Merge mnemo's hooks into the harness's config (backed up first; idempotent)."""
    settings()
    result = run(lambda: core.install(harness, project), json_errors=json)
    if json:
        emit_json("hooks-install", result)
        return
    if result.action == "unchanged":
        out.print(f"mnemo's hooks for {harness} are already installed in "
                  f"{escape(result.config_path or '-')}; nothing changed.")
    elif result.config_path:
        out.print(f"{result.action.capitalize()} mnemo's hooks for {harness} in "
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
def uninstall(harness: HarnessOpt, project: ProjectOpt = None, json: JsonOpt = False) -> None:
    """Remove mnemo's hooks (and nothing else) from the harness's config."""
    settings()
    result = run(lambda: core.uninstall(harness, project), json_errors=json)
    if json:
        emit_json("hooks-uninstall", result)
        return
    if result.action == "removed":
        out.print(f"Removed mnemo's hooks for {harness} from {escape(result.config_path or '')}")
        out.print(f"  backup of the previous file: {escape(result.backup_path or '')}")
    elif result.config_path:
        out.print(f"No mnemo hooks for {harness} in {escape(result.config_path)}; "
                  "nothing changed.")
    else:
        out.print(f"The {harness} harness has no config file; stop calling "
                  f"{escape(result.wrapper_path or '')} from your harness.")


@hooks_app.command("status")
def status(harness: HarnessOpt, project: ProjectOpt = None, json: JsonOpt = False) -> None:
    """Is mnemo installed in the harness's config, and does it reach a working mnemo?"""
    settings()
    report = run(lambda: core.harness_status(harness, project), json_errors=json)
    if json:
        emit_json("hooks-status", report)
    else:
        state = ("[bold green]installed[/]" if report.ok else
                 "[bold yellow]installed, with problems[/]" if report.installed else
                 "[bold yellow]not installed[/]")
        out.print(f"{harness}: {state}")
        out.print(f"  config   {escape(report.config_path or '-')}")
        for kind, present in report.events.items():
            out.print(f"  {kind:<8} {'yes' if present else 'no'}")
        out.print(f"  mnemo    {escape(report.mnemo_path or '-')}")
        for problem in report.problems:
            err.print(f"[yellow]{escape(problem)}[/]")
