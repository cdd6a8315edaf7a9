"""What `status`, `doctor` and `serve --stop` learn about the resident server."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

from .. import paths
from ..record import field, record
from . import client


@record
class ServerState:
    running: bool
    pid: int | None = None
    version: str | None = None
    started: str | None = None
    uptime_seconds: float | None = None
    requests: int | None = None
    queued: int | None = None
    banks_open: int | None = None
    models: list[str] = field(default_factory=list)
    idle_seconds: int | None = None
    socket: str | None = None
    socket_mode: str | None = None  # octal permissions of the socket file
    directory_mode: str | None = None
    responding: bool = False
    problem: str | None = None


def folder(base: Path | None = None) -> Path:
    return Path(client.run_dir(str(base or paths.data_dir())))


def request(base: Path | None, event: str, timeout: float = 2.0) -> bytes | None:
    """Send a control request ("status", "stop"); the answer after OK, or None."""
    run = folder(base)
    message = client.encode_request({"event": event, "harness": "generic", "cwd": ""}, {}, b"")
    fd = None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        address, fd = client.socket_address(str(run))
        sock.settimeout(timeout)
        sock.connect(address)
        sock.sendall(message)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        sock.close()
        if fd is not None:
            os.close(fd)
    answer = b"".join(chunks)
    return answer[len(client.OK):] if answer.startswith(client.OK) else None


def _mode(path: Path) -> str | None:
    try:
        return oct(path.stat().st_mode & 0o777)
    except OSError:
        return None


def read(base: Path | None = None, *, timeout: float = 2.0) -> ServerState:
    """The server's state: from its state file, and live from the server when it answers."""
    run = folder(base)
    running = client.server_running(str(run))
    state = ServerState(running=running)
    if not running:
        return state
    try:
        saved: dict[str, Any] = json.loads((run / client.STATE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        saved = {}
    state.pid = saved.get("pid") if isinstance(saved.get("pid"), int) else None
    state.version = saved.get("version")
    state.started = saved.get("started")
    state.socket = str(run / client.SOCKET_NAME)
    state.socket_mode = _mode(run / client.SOCKET_NAME)
    state.directory_mode = _mode(run)
    answer = request(base, "status", timeout=timeout)
    if answer is None:
        state.problem = ("the server holds its lock but does not answer (starting, "
                         "stopping, or hung)")
        return state
    try:
        live = json.loads(answer)
    except ValueError:
        state.problem = "the server's answer could not be read"
        return state
    state.responding = True
    for key in ("pid", "version", "uptime_seconds", "requests", "queued", "banks_open",
                "idle_seconds"):
        if key in live:
            setattr(state, key, live[key])
    state.models = [str(m) for m in live.get("models") or []]
    return state


def stop(base: Path | None = None, *, timeout: float = 10.0) -> ServerState:
    """Ask the server to stop (SIGTERM if it does not answer); its state before."""
    before = read(base, timeout=1.0)
    if not before.running:
        return before
    if request(base, "stop", timeout=1.0) is None and before.pid:
        try:
            os.kill(before.pid, signal.SIGTERM)
        except OSError:
            pass
    run = folder(base)
    end = time.monotonic() + timeout
    while client.server_running(str(run)) and time.monotonic() < end:
        time.sleep(0.05)
    if client.server_running(str(run)):
        before.problem = f"the server did not stop within {timeout:g}s"
    return before


def wait_running(base: Path | None = None, timeout: float = 10.0) -> ServerState:
    """Wait until a server answers (after starting one); its state, running or not."""
    end = time.monotonic() + timeout
    state = read(base, timeout=0.5)
    while not state.responding and time.monotonic() < end:
        time.sleep(0.05)
        state = read(base, timeout=0.5)
    return state
