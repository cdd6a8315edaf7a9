"""The hook log: one line per failure, in `<data dir>/logs/hook.log`, size-capped.

A hook must never write to the harness's stderr in a way that shows up as a
traceback, and never grow a file without bound; so failures are summarised
on one line each here, and the file is rotated to `hook.log.1` once it
passes `MAX_BYTES`.  Logging itself never raises.

Every line is scrubbed of secrets (`memory.scrub.scrub`, always `redact`,
whatever `scrub.policy` says: a log is not a memory) before it is written: a
directory, an argument or an error message may carry a credential.  The
scrubber is imported only when a line is written, never on a hook's silent
path (nor for a `plain` line: mnemo's own words and numbers).  At most
`SCRUB_CHARS` of a message are scrubbed (a line keeps `MAX_LINE` anyway);
when more came, the last `SCRUB_TAIL` characters of what was scrubbed are
dropped too, so no secret cut in half at that edge remains.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

MAX_BYTES = 256 * 1024
MAX_LINE = 600
LOG_NAME = "hook.log"
SCRUB_CHARS = 64 * 1024
SCRUB_TAIL = 512


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


def scrubbed(text: str) -> str:
    """`text` with its secrets redacted (imports the scrubber: only when a line is written)."""
    try:
        from ..memory.scrub import scrub

        if len(text) <= SCRUB_CHARS:
            return scrub(text).text
        cleaned = scrub(text[:SCRUB_CHARS]).text
        return cleaned[:max(0, len(cleaned) - SCRUB_TAIL)] + "…"
    except Exception as exc:  # noqa: BLE001 - never the unscrubbed text
        return f"(message withheld: the secret scrubber failed: {type(exc).__name__})"


def write(message: str, *, harness: str = "-", event: str = "-", level: str = "error",
          base: Path | None = None, plain: bool = False) -> None:
    """Append one line.  `plain`: the message is mnemo's own words and numbers only
    (no path, argument, event or error text), so it is not scrubbed: a hook past its
    deadline does not import the scrubber to write it."""
    try:
        path = log_path(base)
        if not path.parent.is_dir():
            # 0700 even when this hook fails before it set the private umask
            from ..fsutil import make_dirs

            make_dirs(path.parent)
        try:
            if path.stat().st_size > MAX_BYTES:
                os.replace(path, path.with_name(LOG_NAME + ".1"))
        except FileNotFoundError:
            pass
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        line = one_line(f"{stamp}Z {level} pid={os.getpid()} "
                        + (f"{harness} {event}: {message}" if plain
                           else scrubbed(f"{harness} {event}: {message}")))
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
