"""`mnemo mcp` (the stdio server) and `mnemo mcp install|uninstall|status`."""

from __future__ import annotations

import json as json_module
from typing import Annotated, Any

import typer

from ..mcp import CLIENT_NAMES as NAMES
from .common import JsonOpt, choice, escape, lazy, out, reports, settings, view

core = lazy("dsh_mnemo.commands.mcp")

ClientOpt = Annotated[choice(NAMES), typer.Option(
    "--client", help=f"The MCP client: {', '.join(NAMES)}.", show_default=False)]

mcp_app = typer.Typer(
    name="mcp", invoke_without_command=True,
    help="Serve mnemo's memory as MCP tools: `mnemo mcp` alone runs the stdio server (what "
    "MCP clients start); `mnemo mcp install` adds it to a client's config.")


def register(app: typer.Typer) -> None:
    app.add_typer(mcp_app)


@mcp_app.callback()
def serve(ctx: typer.Context) -> None:
    """Run the MCP server on stdin/stdout (what MCP clients start).

    Tools: remember, recall, forget, stats, sleep, bind, status, workspaces.
    Each call works on the project of its `path` argument, else of the
    client's root, else of the server's directory; an unbound directory is
    an error that says how to bind it.  See docs/mcp.md.
    """
    if ctx.invoked_subcommand is not None:
        return
    from ..errors import MnemoError
    from .common import fail

    try:
        settings()
        from ..mcp.server import serve as run_server  # the SDK loads only here
    except MnemoError as exc:
        raise fail(exc, as_json=False) from None
    run_server()


@mcp_app.command("install")
@reports
def install(client: ClientOpt, json: JsonOpt = False):
    """Add mnemo's server to the client's MCP config (backed up first; idempotent)."""
    settings()
    return core.install(client)


def _entry(entry: dict[str, Any] | None) -> str:
    if not entry:
        return "-"
    return " ".join([entry.get("command", "")] + [str(a) for a in entry.get("args", [])])


@view("mcp-install")
def _installed(result: Any) -> None:
    if result.action == "unchanged":
        out.print(f"mnemo's MCP server is already in {escape(result.config_path)} for "
                  f"{result.client}; nothing changed.")
    else:
        out.print(f"{result.action.capitalize()} mnemo's MCP server for {result.client} in "
                  f"{escape(result.config_path)}")
    out.print(f"  command  {escape(_entry(result.entry))}")
    if result.entry and result.entry.get("env"):
        out.print(f"  env      {escape(json_module.dumps(result.entry['env']))}")
    if result.backup_path:
        out.print(f"  backup of the previous file: {escape(result.backup_path)}")
    if result.next_steps:
        out.print("[bold]Still to do:[/]")
        for step in result.next_steps:
            out.print(f"  - {escape(step)}")


@mcp_app.command("uninstall")
@reports
def uninstall(client: ClientOpt, json: JsonOpt = False):
    """Remove mnemo's server (and nothing else) from the client's MCP config."""
    settings()
    return core.uninstall(client)


@view("mcp-uninstall")
def _uninstalled(result: Any) -> None:
    if result.action == "removed":
        out.print(f"Removed mnemo's MCP server for {result.client} from "
                  f"{escape(result.config_path)}")
        if result.removed_file:
            from .common import removed_file_line

            out.print(removed_file_line(result.config_path))
        out.print(f"  backup of the previous file: {escape(result.backup_path or '')}")
    else:
        out.print(f"No mnemo MCP server for {result.client} in {escape(result.config_path)}; "
                  "nothing changed.")


@mcp_app.command("status")
@reports
def status(client: ClientOpt, json: JsonOpt = False):
    """Is mnemo's MCP server in the client's config, and does it run an existing mnemo?"""
    settings()
    return core.status(client)


@view("mcp-status")
def _status(report: Any) -> None:
    state = ("[bold green]installed[/]" if report.ok else
             "[bold yellow]installed, with problems[/]" if report.installed else
             "[bold yellow]not installed[/]")
    out.print(f"{report.client}: {state}")
    out.print(f"  config   {escape(report.config_path)}")
    out.print(f"  command  {escape(_entry(report.entry))}")
