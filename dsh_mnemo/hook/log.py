"""The hook log: one line per failure, in `<data dir>/logs/hook.log`, size-capped.

A hook must never write to the harness's stderr in a way that shows up as a
traceback, and never grow a file without bound; so failures are summarised
on one line each here, and the file is rotated to `hook.log.1` once it
passes `MAX_BYTES`.  Logging itself never raises.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

MAX_BYTES = 256 * 1024
MAX_LINE = 600
LOG_NAME = "hook.log"


def log_path(base: Path | None = None) -> Path:
    if base is None:
        from .. import paths

        base = paths.data_dir()
    return base / "logs" / LOG_NAME


def one_line(text: str, limit: int = MAX_LINE) -> str:
    """Control characters escaped, so one entry is always one line."""
    cleaned = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" if ord(ch) < 256
                      else f"\\u{ord(ch):04x}" for ch in text)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def write(message: str, *, harness: str = "-", event: str = "-", level: str = "error",
          base: Path | None = None) -> None:
    try:
        path = log_path(base)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if path.stat().st_size > MAX_BYTES:
                os.replace(path, path.with_name(LOG_NAME + ".1"))
        except FileNotFoundError:
            pass
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        line = one_line(f"{stamp}Z {level} pid={os.getpid()} {harness} {event}: {message}")
        # O_APPEND keeps concurrent hooks' lines whole.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except Exception:  # noqa: BLE001 - logging must never break the hook
        pass


def describe(exc: BaseException) -> str:
    """`Type: message`, and the innermost frame in mnemo, without a traceback dump."""
    where = ""
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if "dsh_mnemo" in name:
            where = f" at {Path(name).name}:{tb.tb_lineno}"
        tb = tb.tb_next
    return f"{type(exc).__name__}: {exc}{where}"
