"""`mnemo hook …` (what harnesses run) and `mnemo hooks install|uninstall|status`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..harnesses.registry import EVENTS, NAMES
from .common import PATH, JsonOpt, choice, escape, lazy, out, reports, settings, view

core = lazy("dsh_mnemo.commands.hooks")

HarnessOpt = Annotated[choice(NAMES), typer.Option(
    "--harness", help=f"The harness: {', '.join(NAMES)}.", show_default=False)]
ProjectOpt = Annotated[Path | None, typer.Option(
    "--project", help="Use the project-level config of this directory instead of the "
    "user-level one.", show_default=False, click_type=PATH)]

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
def install(harness: HarnessOpt, project: ProjectOpt = None,
            trust: Annotated[bool, typer.Option(
                "--trust", help="Codex only: also record in Codex's config.toml that you "
                "trust mnemo's own entries (as its /hooks review would), so `codex exec` "
                "runs them. Nothing else is trusted.")] = False,
            json: JsonOpt = False):
    """Add mnemo's hooks to the harness's config, in place (backed up first; idempotent).

    Every other hook, key and comment stays where it was; running it again when
    nothing changed does not touch the file.
    """
    settings()
    return core.install(harness, project, trust)


@view("hooks-install")
def _installed(result: Any) -> None:
    if result.action == "unchanged":
        out.print(f"mnemo's hooks for {result.harness} are already installed in "
                  f"{escape(result.config_path or '-')}; the file was not changed.")
    elif result.config_path:
        out.print(f"{result.action.capitalize()} mnemo's hooks for {result.harness} in "
                  f"{escape(result.config_path)}")
    else:
        out.print(f"Wrote the hook wrapper {escape(result.wrapper_path or '')}")
    if result.backup_path:
        out.print(f"  backup of the previous file: {escape(result.backup_path)}")
    if result.trusted:
        out.print(f"  trusted in Codex's config.toml: {len(result.trusted)} of mnemo's "
                  "entries (only these)")
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
    if not result.config_path:  # generic: nothing of the harness's own to edit
        done = ("mnemo no longer counts the generic hooks as installed; "
                if result.action == "removed" else "The generic hooks were not installed; ")
        out.print(f"{done}stop calling {escape(result.wrapper_path or '')} from your harness.")
    elif result.action == "removed":
        out.print(f"Removed mnemo's hooks for {result.harness} from "
                  f"{escape(result.config_path or '')}")
        if result.removed_file:
            from .common import removed_file_line

            out.print(removed_file_line(result.config_path or ''))
        out.print(f"  backup of the previous file: {escape(result.backup_path or '')}")
        if result.untrusted:
            out.print(f"  removed the {len(result.untrusted)} records of Codex's config.toml "
                      "that trusted them")
    else:
        out.print(f"No mnemo hooks for {result.harness} in {escape(result.config_path)}; "
                  "nothing changed.")
    for step in result.next_steps:
        out.print(f"  - {escape(step)}")


@hooks_app.command("status")
@reports
def status(harness: HarnessOpt, project: ProjectOpt = None, json: JsonOpt = False):
    """Is mnemo installed in the harness's config, and does it reach a working mnemo?

    Exits 8 when mnemo's hooks are there but the harness would not run them, or they
    would not reach a working mnemo (Codex has not trusted them, Gemini CLI does not
    trust this folder, an event's entry, the wrapper or mnemo is missing), as `hooks
    test` does, and when the harness's config file is there but cannot be read or
    parsed (a symbolic link loop too); 0 when they work, and when they are not
    installed at all.
    """
    settings()
    return core.status(harness, project)


@view("hooks-status")
def _status(report: Any) -> None:
    state = ("[bold green]installed[/]" if report.ok else
             "[bold yellow]installed, with problems[/]" if report.installed
             or report.commands else
             "[bold yellow]not installed[/]")
    if report.installed and report.trusted is False:
        state = "[bold yellow]installed, but not trusted: it will not run[/]"
    elif report.ok and report.folder_trust is not None and not report.folder_trust["trusted"]:
        state = "[bold yellow]installed, but this folder is not trusted: it will not run here[/]"
    out.print(f"{report.harness}: {state}")
    moved = f" ({report.config_dir_env})" if report.config_dir_env else ""
    out.print(f"  config   {escape(report.config_path or '-')}{escape(moved)}")
    for kind, present in report.events.items():
        out.print(f"  {kind:<12} {'yes' if present else 'no'}")
    out.print(f"  mnemo    {escape(report.mnemo_path or '-')}")
    for entry in report.trust:
        if entry["ours"]:
            out.print(f"  trust    {entry['event']}: {entry['state']}")
    if report.last_injection is not None:
        import time

        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(report.last_injection / 1000))
        out.print(f"  last injection  {when}")
    elif report.installed:
        out.print("  last injection  none recorded yet")
    if report.folder_trust is not None:
        folder = report.folder_trust
        out.print(f"  folder   {escape(folder['path'])}: "
                  f"{'trusted' if folder['trusted'] else 'NOT trusted'} by Gemini CLI")


@hooks_app.command("test")
@reports
def test(harness: HarnessOpt, project: ProjectOpt = None,
         prompt: Annotated[str | None, typer.Option(
             "--prompt", help="The sample prompt (default: a general question about the "
             "project).", show_default=False)] = None,
         json: JsonOpt = False):
    """Run the installed prompt hook here, as the harness would, and show what the model gets.

    Sends a sample prompt event for the current directory to the command in the
    harness's config and says whether the harness would run it (Codex trust,
    Gemini folder trust, a moved config directory). Where the config has mnemo's
    session-start entry, a new session's start event goes first, in the same
    session, and what it adds (the standing block) is shown on its own. The
    sample prompt is never stored. Exits 8 when the harness would not run the hook.
    """
    settings()
    return core.test(harness, project, prompt)


@view("hooks-test")
def _tested(result: Any) -> None:
    verdict = "[bold green]yes[/]" if result.would_run else "[bold red]no[/]"
    out.print(f"{result.harness}: would the harness run mnemo's prompt hook here? {verdict}")
    moved = f" ({result.config_dir_env})" if result.config_dir_env else ""
    out.print(f"  config     {escape(result.config_path or '-')}{escape(moved)}")
    out.print(f"  command    {escape(result.command)}")
    out.print(f"  directory  {escape(result.cwd)}")
    start = result.session_start
    if start is not None:
        ran = "timed out" if start.timed_out else f"exit {start.exit_code}"
        out.print(f"  start      {ran}, {start.duration_ms} ms (the session-start hook, "
                  "first, in the same session)")
    ran = "timed out" if result.timed_out else f"exit {result.exit_code}"
    out.print(f"  ran        {ran}, {result.duration_ms} ms")
    for reason in result.blockers:
        out.print(f"  [bold red]why not:[/] {escape(reason)}")
    for note in result.notes:
        out.print(f"  note: {escape(note)}")
    if start is not None:
        out.print("  at the session's start, the model reads "
                  + ("nothing" if not start.model_view else "(once per session):"))
        for line in (start.model_view or "").splitlines():
            out.print(f"    {escape(line)}")
    if result.model_view:
        out.print("  with the prompt, the model reads:" if start is not None
                  else "  what the model reads:")
        for line in result.model_view.splitlines():
            out.print(f"    {escape(line)}")
    elif start is not None:
        out.print("  with the prompt, the model reads nothing")
    for line in result.hook_log:
        out.print(f"  hook log: {escape(line)}")
