"""`serve`: the resident hook server (start, run in the foreground, stop)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from .common import JsonOpt, escape, lazy, out, reports, settings, usage_error, view

core = lazy("dsh_mnemo.commands.serve")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)


@reports
def serve(foreground: Annotated[bool, typer.Option(
              "--foreground", help="Serve in this process until stopped (for systemd or "
                                   "launchd units; see docs/server.md).")] = False,
          stop: Annotated[bool, typer.Option(
              "--stop", help="Stop the running server (queued stores finish first).")] = False,
          on_demand: Annotated[bool, typer.Option(
              "--on-demand", hidden=True,
              help="Started by a hook: leave quietly if a server already runs.")] = False,
          json: JsonOpt = False):
    """Run the resident hook server: hooks answered from a warm process.

    Without options it starts the server detached (if none runs) and returns
    once it answers. Hooks also start it on demand; it exits after
    server.idle_seconds without a hook.
    """
    if foreground and stop:
        raise usage_error("--foreground and --stop exclude each other",
                          hint="`mnemo serve --stop` stops the server; `mnemo serve "
                               "--foreground` runs one in this process.")
    if stop:
        return core.stop()
    loaded = settings()
    if foreground:
        raise typer.Exit(core.foreground(loaded, on_demand=on_demand))
    return core.start(loaded)


@view("serve")
def _serve(report: Any) -> None:
    server = report.server
    if report.action == "not-running":
        out.print("No server is running.")
        return
    if report.action == "stopped":
        out.print(f"Stopped the server (pid {server.pid}).")
        return
    verb = "Started" if report.action == "started" else "Already running:"
    out.print(f"{verb} the resident server, pid {server.pid}, mnemo {escape(str(server.version))}.")
    render_server(server)


def render_server(server: Any) -> None:
    """The server's lines, as `status` and `serve` show them."""
    if not server.running:
        out.print("  server     not running (the next hook starts it)")
        return
    if not server.responding:
        out.print(f"  server     pid {server.pid}: {escape(server.problem or 'not answering')}")
        return
    models = ", ".join(server.models) or "none loaded"
    out.print(f"  server     pid {server.pid}, up {_duration(server.uptime_seconds)}, "
              f"{server.requests} request(s), {server.banks_open} bank(s) open")
    out.print(f"  model      {escape(models)}")


def _duration(seconds: float | None) -> str:
    value = int(seconds or 0)
    if value < 120:
        return f"{value}s"
    if value < 7200:
        return f"{value // 60}m"
    return f"{value // 3600}h{(value % 3600) // 60:02d}m"
