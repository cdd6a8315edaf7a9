"""`mnemo hook EVENT [--harness NAME]`: fail open, fast, and always exit 0.

Called by `dsh_mnemo.__main__` without Typer or Rich.  The work runs in a
daemon thread; the main thread waits at most `hooks.deadline_seconds` (from
process start) for it.  Past the deadline the hook prints nothing, writes
one log line and leaves with `os._exit(0)`, abandoning the thread (SQLite
rolls back whatever it had not committed).  No exception, message or
traceback ever reaches the harness: failures are one line each in
`<data dir>/logs/hook.log`.

`MNEMO_HOOK_TEST_DELAY` (seconds) makes the worker sleep before it starts:
a test-only switch to exercise the deadline from outside.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import IO, Any

from ..harnesses.registry import EVENTS, NAMES, neutral_output
from . import log, speed
from .speed import fast_yaml

MAX_STDIN_BYTES = 8 * 1024 * 1024
DEFAULT_DEADLINE = 2.0
TEST_DELAY_ENV = "MNEMO_HOOK_TEST_DELAY"

USAGE = ("usage: mnemo hook prompt|turn-end|session-end [--harness "
         + "|".join(NAMES) + "]")


class _Answer:
    """The worker's reply, handed to the main thread once."""

    def __init__(self) -> None:
        self.text: str | None = None
        self.ready = threading.Event()
        self.lock = threading.Lock()

    def emit(self, text: str) -> None:
        with self.lock:
            if self.text is None:
                self.text = text
        self.ready.set()


def parse_argv(argv: list[str]) -> tuple[str, str]:
    """(event, harness); raises ValueError with a usage message."""
    event: str | None = None
    harness = "generic"
    items = list(argv)
    while items:
        item = items.pop(0)
        if item in ("-h", "--help"):
            raise ValueError(USAGE)
        if item == "--harness":
            if not items:
                raise ValueError("--harness needs a value")
            harness = items.pop(0)
        elif item.startswith("--harness="):
            harness = item.split("=", 1)[1]
        elif event is None and not item.startswith("-"):
            event = item
        else:
            raise ValueError(f"unexpected argument {item!r}")
    if event not in EVENTS:
        raise ValueError(f"unknown event {event!r}; {USAGE}")
    if harness not in NAMES:
        raise ValueError(f"unknown harness {harness!r}; {USAGE}")
    return event, harness


def read_stdin(stream: Any) -> bytes:
    if stream is None:
        return b""
    try:
        if hasattr(stream, "isatty") and stream.isatty():
            return b""  # run by hand: no event
    except (OSError, ValueError):
        return b""
    source = getattr(stream, "buffer", stream)
    data = source.read(MAX_STDIN_BYTES + 1)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    return data or b""


def _work(answer: _Answer, kind: str, harness: str, stdin: Any, settings: Any, base: Any) -> None:
    try:
        delay = os.environ.get(TEST_DELAY_ENV)
        if delay:
            time.sleep(float(delay))
        raw = read_stdin(stdin)
        if len(raw) > MAX_STDIN_BYTES:
            raise ValueError(f"stdin larger than {MAX_STDIN_BYTES} bytes; ignored")
        from .events import decode_payload, parse_event
        from .handlers import HANDLERS, HookRun

        payload = decode_payload(raw)
        event = parse_event(payload, harness, kind)
        run = HookRun(harness=harness, kind=kind, settings=settings, base=base,
                      emit=answer.emit)
        HANDLERS[kind](run, event)
    except BaseException as exc:  # noqa: BLE001 - fail open, whatever happened
        level = "info" if type(exc).__name__ == "BadEvent" else "error"
        log.write(log.describe(exc), harness=harness, event=kind, level=level, base=base)
    finally:
        answer.emit(neutral_output(harness, kind))


def run_hook(argv: list[str], *, stdin: IO[Any] | None = None,
             stdout: IO[str] | None = None, hard_exit: bool | None = None) -> int:
    """Run one hook; always returns 0.

    `stdin`/`stdout` default to the process's; `hard_exit` (default: when
    using the process's streams) leaves with `os._exit(0)` on the deadline
    and after answering, so neither an abandoned thread nor interpreter
    teardown can hold the harness up.
    """
    started = time.monotonic()
    in_process = stdin is not None or stdout is not None
    hard_exit = (not in_process) if hard_exit is None else hard_exit
    speed.ENABLED = hard_exit
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    if any(a in ("-h", "--help") for a in argv):
        _write(stdout, USAGE + "\n")
        return 0
    try:
        kind, harness = parse_argv(argv)
    except ValueError as exc:
        log.write(str(exc), event="usage")
        return 0
    base = None
    try:
        from .. import paths
        from ..config import apply_environment, load_settings

        base = paths.data_dir()
        if paths.config_path().exists():
            fast_yaml()
        settings = load_settings()
        apply_environment(settings, base)
        deadline = float(settings["hooks.deadline_seconds"])
    except BaseException as exc:  # noqa: BLE001 - a bad config must not break the prompt
        log.write(f"settings: {log.describe(exc)}", harness=harness, event=kind, base=base)
        _write(stdout, neutral_output(harness, kind))
        return 0

    if hard_exit:
        _quiet_process()
    answer = _Answer()
    worker = threading.Thread(target=_work, name="mnemo-hook", daemon=True,
                              args=(answer, kind, harness, stdin, settings, base))
    worker.start()
    answered = answer.ready.wait(max(0.0, deadline - (time.monotonic() - started)))
    if answered:
        _write(stdout, answer.text or "")
        # Housekeeping after the answer (storing turns, consolidation) gets the rest.
        worker.join(max(0.0, deadline - (time.monotonic() - started)))
    if worker.is_alive():
        log.write(f"deadline of {deadline:g}s exceeded "
                  f"({'after' if answered else 'before'} answering); work abandoned",
                  harness=harness, event=kind, base=base)
        if not answered:
            # Nothing was said: the harness gets its neutral answer ({} for Codex Stop).
            _write(stdout, neutral_output(harness, kind))
    if hard_exit:
        _flush_and_exit(stdout)
    return 0


def _write(stdout: IO[str], text: str) -> None:
    if not text:
        return
    try:
        raw = getattr(stdout, "buffer", None)
        if raw is not None:
            # Harnesses read UTF-8 whatever the hook's locale says.
            stdout.flush()
            raw.write(text.encode("utf-8", "replace"))
            raw.flush()
        else:
            stdout.write(text)
            stdout.flush()
    except (OSError, ValueError):
        pass  # the harness closed our stdout: nothing left to tell it


def _quiet_process() -> None:
    """Keep library chatter (warnings, logging, prints) off the harness's stderr."""
    import warnings

    warnings.simplefilter("ignore")
    try:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives until os._exit
    except OSError:
        pass


def _flush_and_exit(stdout: IO[str]) -> None:
    try:
        stdout.flush()
    except (OSError, ValueError):
        pass
    os._exit(0)
