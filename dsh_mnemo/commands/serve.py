"""`mnemo serve [--foreground | --stop]`: the resident hook server."""

from __future__ import annotations

import os

from .. import paths
from ..config import Settings
from ..errors import ExitCode, MnemoError
from ..record import record
from ..report import Report
from ..server import state as server_state
from ..server.state import ServerState


@record
class ServeResult:
    action: str  # "started" | "running" | "stopped" | "not-running"
    server: ServerState


def start(settings: Settings) -> Report:
    """Start a detached server unless one runs; wait until it answers."""
    from ..server.client import spawn_server

    base = paths.data_dir()
    current = server_state.read(base, timeout=1.0)
    if current.running:
        report = Report("serve", ServeResult("running", current))
        if not current.responding and current.problem:
            report.warn(current.problem)
        return report
    if not settings["server.enabled"]:
        raise MnemoError("the resident server is off (server.enabled: false)",
                         hint="`mnemo config set server.enabled true`, or run it anyway "
                              "with `mnemo serve --foreground`.", exit_code=ExitCode.REFUSED)
    from ..fsutil import secure_process

    secure_process(base)
    spawn_server(str(base), dict(os.environ))
    started = server_state.wait_running(base, timeout=15.0)
    if not started.responding:
        raise MnemoError("the server did not start within 15 s",
                         hint=f"See {paths.logs_dir(base) / 'hook.log'}.")
    return Report("serve", ServeResult("started", started))


def stop() -> Report:
    before = server_state.stop(paths.data_dir())
    report = Report("serve", ServeResult("stopped" if before.running else "not-running",
                                         before))
    if before.problem and before.running:
        report.warn(before.problem)
        report.exit_code = ExitCode.ERROR
    return report


def foreground(settings: Settings, *, on_demand: bool = False) -> int:
    """Serve in this process (systemd, launchd, or a hook's on-demand start)."""
    from ..server.daemon import serve

    base = paths.data_dir()
    status = serve(base, settings)
    if status == 3 and not on_demand:
        raise MnemoError("a server already runs for this data directory",
                         hint="`mnemo serve --stop` stops it.", exit_code=ExitCode.REFUSED)
    return 0
