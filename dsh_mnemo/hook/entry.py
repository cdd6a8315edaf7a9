"""`mnemo hook EVENT [--harness NAME]`: fail open, fast, and always exit 0.

Called by `dsh_mnemo.__main__` without Typer or Rich.  As a harness runs it
(a process of its own, the process's own stdin and stdout) the work happens
in a **forked worker**: the parent reads the event, forks, and waits for the
answer on a pipe until `hooks.deadline_seconds` after the *harness started
the hook*: the wrapper's start (`MNEMO_HOOK_PID`, `server.client.hook_age`),
else this process's (interpreter start-up included).  Whatever the worker does — a regex that
holds the GIL, a database that stays locked — the parent is a separate
process that nothing can hold up: at the deadline it prints the neutral
answer, logs one line and exits 0.  The worker knows the deadline too
(`HookRun.answer_by`): past it, nobody waits for its answer, so it records
the event but skips what only the answer needs (the model, the recall, the
standing block), which on a loaded machine would only delay the other hooks,
and what it still does runs at a lower priority (`step_aside`).

The worker answers as soon as it knows what to say, closes the pipe (the
harness goes on at once) and then does the housekeeping in the background:
storing the turns the spool holds, consolidation.  It detaches from the
harness (new session, stdio on /dev/null), runs at most
`HOUSEKEEPING_SECONDS` (a kernel timer ends it even if Python cannot
react), and holds a `background` lock file meanwhile.  A worker that is
killed loses nothing: every turn it claimed is still in the spool and is
picked up again as a stale claim.

Run in-process (tests pass their own streams) the same work runs in a
thread instead, and the call returns after the housekeeping (or the
deadline).  No exception, message or traceback ever reaches the harness:
failures are one line each in `<data dir>/logs/hook.log`.

`MNEMO_HOOK_TEST_DELAY` (seconds) makes the worker sleep before it starts:
a test-only switch to exercise the deadline from outside.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
import time
from pathlib import Path

from ..harnesses.registry import EVENTS, NAMES, neutral_output
from ..server.client import STDIN_HEAD, hook_age, process_age, read_fd, run_dir
from . import log, speed

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import IO, Any

MAX_STDIN_BYTES = 8 * 1024 * 1024
DEFAULT_DEADLINE = 2.0
# What the background worker may spend on storing turns after it answered.
# Below the spool's stale-claim age, so a live worker's claims are never
# taken over by another hook.
HOUSEKEEPING_SECONDS = 60
# What the worker spends reading the rest of an event the harness was still
# writing at the deadline (the answer is given by then: the turn is kept).
LATE_READ_SECONDS = 10.0
TEST_DELAY_ENV = "MNEMO_HOOK_TEST_DELAY"

USAGE = "usage: mnemo hook " + "|".join(EVENTS) + " [--harness " + "|".join(NAMES) + "]"


class Answer:
    """A hook's reply, handed on once (to the main thread, down a pipe, or to a callback)."""

    def __init__(self, sink: Any = None, deliver: Any = None, after: Any = None) -> None:
        self.text: str | None = None
        self.ready = threading.Event()
        self.lock = threading.Lock()
        self.sink = sink  # a pipe fd in a forked worker
        self.deliver = deliver  # the resident server's: send it to the client
        self.after = after  # called once, after the answer went

    def emit(self, text: str) -> None:
        with self.lock:
            if self.text is not None:
                return
            self.text = text
            if self.sink is not None:
                _write_fd(self.sink, text)
                os.close(self.sink)
                self.sink = None
            if self.deliver is not None:
                deliver, self.deliver = self.deliver, None
                deliver(text)
            after, self.after = self.after, None
        self.ready.set()
        if after is not None:
            after()


# The flag the hook client adds when it falls back to this path: start the
# resident server for the next call, after answering this one.
START_SERVER = "--start-server"


def parse_argv(argv: list[str]) -> tuple[str, str]:
    """(event, harness); raises ValueError with a usage message."""
    event: str | None = None
    harness = "generic"
    items = [a for a in argv if a != START_SERVER]
    while items:
        item = items.pop(0)
        if item in ("-h", "--help"):
            raise ValueError(USAGE)
        if item == STDIN_HEAD and items:
            items.pop(0)  # the hook client's, read by `stdin_head`
        elif item == "--harness":
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


def stdin_head(argv: list[str]) -> bytes:
    """The start of the event the hook client read before it fell back to this
    process (`STDIN_HEAD FD`: the harness was still writing the rest), or b""."""
    try:
        fd = int(argv[argv.index(STDIN_HEAD) + 1])
    except (ValueError, IndexError):
        return b""
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        os.close(fd)
    except OSError:
        pass
    return b"".join(chunks)


def read_stdin(stream: Any, deadline_at: float | None = None,
               head: bytes = b"") -> tuple[bytes, bool]:
    """The event (after `head`, what the hook client read of it), at most
    MAX_STDIN_BYTES + 1 bytes (more is refused later), and whether it ended.

    A real file descriptor is read with `select` until `deadline_at`: a
    harness that never closes the hook's stdin must not hold it up (False:
    the deadline came first, the harness may still be writing).
    """
    if stream is None:
        return head, True
    try:
        if hasattr(stream, "isatty") and stream.isatty():
            return head, True  # run by hand: no event
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        fd = None
    if fd is not None and deadline_at is not None:
        data, ended = read_fd(fd, deadline_at, time.monotonic, MAX_STDIN_BYTES - len(head))
        return head + data, ended
    source = getattr(stream, "buffer", stream)
    try:
        data = source.read(MAX_STDIN_BYTES + 1)
    except (OSError, ValueError):
        return head, True
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    return head + (data or b""), True


def read_rest(raw: bytes, fd: int, base: Any, harness: str, kind: str) -> tuple[bytes, bool]:
    """The event `raw` began, read on from `fd` for up to LATE_READ_SECONDS (a
    forked worker, its parent gone with the neutral answer), and whether it ended.

    An event that already parses is whole: its harness just never closes stdin."""
    from .events import BadEvent, decode_payload

    try:
        decode_payload(raw)
        return raw, True
    except BadEvent:
        pass
    more, ended = read_fd(fd, time.monotonic() + LATE_READ_SECONDS, time.monotonic,
                          MAX_STDIN_BYTES - len(raw))
    log.write(f"the harness was still writing the event at the deadline ({len(raw)} bytes "
              f"read): answered nothing; the worker read on ({len(more)} more bytes"
              f"{'' if ended else ', still not the end'})", harness=harness, event=kind,
              level="warning", base=base)
    return raw + more, ended


def handle_event(answer: Answer, kind: str, harness: str, raw: bytes, settings: Any,
                 base: Any, *, environ: Any = None, process_cwd: str | None = None,
                 defer: Any = None, cut: bool = False, until: float | None = None,
                 answer_by: float | None = None) -> None:
    """Decode, parse and handle one event; always emits (the neutral answer at worst).

    The one implementation both transports share: a hook process calls it
    with its own environment, the resident server with its client's
    (`environ`, `process_cwd`) and a `defer` that queues the work after the
    answer for its housekeeping thread, and the `until` (epoch seconds) past
    which its client has given up and answers in process: the event is then
    not recorded by the server too.  `cut`: the read of `raw` ended at its
    deadline, not at the end of the event.  `answer_by` (`time.monotonic()`): a
    hook process's deadline, past which its answer is no longer waited for (the
    event is still recorded).
    """
    try:
        environ = os.environ if environ is None else environ
        delay = environ.get(TEST_DELAY_ENV)
        if delay:
            time.sleep(float(delay))
        if len(raw) > MAX_STDIN_BYTES:
            raise ValueError(f"stdin larger than {MAX_STDIN_BYTES} bytes; ignored, nothing "
                             "of the event is captured")
        from .events import SUBAGENT_EVENTS, decode_payload, parse_event
        from .handlers import HANDLERS, HookRun

        payload = decode_payload(raw)
        event = parse_event(payload, harness, kind, environ=environ, process_cwd=process_cwd)
        if event.event_name in SUBAGENT_EVENTS:
            # Its reply would pair with the user's open turn (and the user's real
            # reply be stored alone), its prompt be stored as the user's words.
            log.write(f"a subagent's {event.event_name} event is not the user's turn: "
                      "nothing captured or injected", harness=harness, event=kind,
                      level="info", base=base)
            return
        run = HookRun(harness=harness, kind=kind, settings=settings, base=base,
                      emit=answer.emit, defer=defer, until=until, answer_by=answer_by)
        HANDLERS[kind](run, event)
    except BaseException as exc:  # noqa: BLE001 - fail open, whatever happened
        bad = type(exc).__name__ == "BadEvent"
        message = log.describe(exc)
        if bad and cut:
            # Not a harness sending junk: a turn lost to a slow writer.
            message = (f"the harness had not finished writing the event by the read "
                       f"deadline ({len(raw)} bytes read), nothing of it is captured: "
                       f"{message}")
        log.write(message, harness=harness, event=kind,
                  level="info" if bad and not cut else "error", base=base)
    finally:
        answer.emit(neutral_output(harness, kind))


def _work(answer: Answer, kind: str, harness: str, raw: bytes, settings: Any, base: Any,
          start_environ: dict[str, str] | None = None, cut: bool = False,
          answer_by: float | None = None) -> None:
    starter = _Starter(start_environ, settings, base, harness, kind)
    try:
        handle_event(answer, kind, harness, raw, settings, base,
                     defer=starter.defer if starter.pending else None, cut=cut,
                     answer_by=answer_by)
    finally:
        starter.start()


class _Starter:
    """Starts the resident server once, after the answer and before the housekeeping."""

    def __init__(self, environ: dict[str, str] | None, settings: Any, base: Any,
                 harness: str, kind: str) -> None:
        self.environ = environ if environ is not None and _enabled(settings) else None
        self.base, self.harness, self.kind = base, harness, kind

    @property
    def pending(self) -> bool:
        return self.environ is not None

    def start(self) -> None:
        if self.environ is not None:
            environ, self.environ = self.environ, None
            start_server(environ, self.base, self.harness, self.kind)

    def defer(self, work: Any) -> None:
        self.start()
        work()


def _enabled(settings: Any) -> bool:
    try:
        return bool(settings["server.enabled"])
    except (KeyError, TypeError):
        return False


def start_server(environ: dict[str, str], base: Any, harness: str = "generic",
                 kind: str = "prompt") -> None:
    """Start `mnemo serve` for the next hook (with the harness's environment as it came)."""
    try:
        from ..server.client import server_running, spawn_server

        if not server_running(run_dir(str(base))):
            note_searched(base)
        if spawn_server(str(base), environ):
            log.write("started the resident server for the next hooks", harness=harness,
                      event=kind, level="info", base=base)
    except Exception as exc:  # noqa: BLE001 - this call is answered either way
        log.write(f"cannot start the resident server: {log.describe(exc)}", harness=harness,
                  event=kind, base=base)


def note_searched(base: Any) -> None:
    """Tell the server about to start which namespaces this process just searched."""
    if "dsh_mnemo.memory.semantic" not in sys.modules:
        return  # nothing searched: not worth importing it to learn that
    try:
        from ..memory import warm

        warm.note_searched(Path(base))
    except Exception as exc:  # noqa: BLE001 - the server then starts cold
        log.write(f"cannot note the namespaces to warm: {log.describe(exc)}",
                  harness="server", event="serve", base=base)


def run_hook(argv: list[str], *, stdin: IO[Any] | None = None,
             stdout: IO[str] | None = None, hard_exit: bool | None = None) -> int:
    """Run one hook; always returns 0.

    `stdin`/`stdout` default to the process's; `hard_exit` (default: when
    using the process's streams) forks the worker and leaves with
    `os._exit(0)`, so neither the worker nor interpreter teardown can hold
    the harness up.
    """
    in_process = stdin is not None or stdout is not None
    started = time.monotonic() - (0.0 if in_process else hook_age(os.environ))
    # The environment as the harness gave it, before settings are applied to it:
    # a server started from here must see what its clients will send.
    environ = dict(os.environ) if START_SERVER in argv else None
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
        from ..fsutil import secure_process

        secure_process(base)  # every file this hook creates is private (never raises)
        settings = load_settings()  # YAML parsed only when its kept parse is stale
        apply_environment(settings, base)
        deadline = float(settings["hooks.deadline_seconds"])
    except BaseException as exc:  # noqa: BLE001 - a bad config must not break the prompt
        log.write(f"settings: {log.describe(exc)}", harness=harness, event=kind, base=base)
        _write(stdout, neutral_output(harness, kind))
        return 0
    raw, ended = read_stdin(stdin, None if in_process else started + deadline,
                            stdin_head(argv))
    if hard_exit and hasattr(os, "fork"):
        _run_forked(kind, harness, raw, settings, base, stdout, started + deadline, deadline,
                    environ, rest=None if ended else stdin)
    return _run_threaded(kind, harness, raw, settings, base, stdout, started, deadline,
                         hard_exit, environ, cut=not ended)


def _run_threaded(kind: str, harness: str, raw: bytes, settings: Any, base: Any,
                  stdout: IO[str], started: float, deadline: float, hard_exit: bool,
                  environ: dict[str, str] | None = None, cut: bool = False) -> int:
    if hard_exit:
        _quiet_process()
    answer = Answer()
    worker = threading.Thread(target=_work, name="mnemo-hook", daemon=True,
                              args=(answer, kind, harness, raw, settings, base, environ, cut,
                                    started + deadline))
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


def _run_forked(kind: str, harness: str, raw: bytes, settings: Any, base: Any,
                stdout: IO[str], deadline_at: float, deadline: float,
                environ: dict[str, str] | None = None, rest: Any = None) -> None:
    """Fork the worker and wait for its answer until `deadline_at`; never returns.

    `rest`: the stdin the harness was still writing the event to at the
    deadline; the worker reads on from it (after its parent answered)."""
    try:
        read_end, write_end = os.pipe()
        pid = os.fork()
    except OSError as exc:
        log.write(f"cannot fork the worker ({exc}); working in process", harness=harness,
                  event=kind, base=base)
        return  # the caller falls back to the threaded path
    if pid == 0:  # the worker
        try:
            os.close(read_end)
            late = None
            if rest is not None:
                with contextlib.suppress(OSError, ValueError):
                    late = os.dup(rest.fileno())  # before _detach puts /dev/null there
            _detach()
            step_aside(deadline_at)
            from .background import hold

            with hold(base):
                ended = True
                if late is not None:
                    raw, ended = read_rest(raw, late, base, harness, kind)
                    os.close(late)
                answer = Answer(sink=write_end, after=lambda: step_aside(deadline_at))
                _work(answer, kind, harness, raw, settings, base, environ, cut=not ended,
                      answer_by=deadline_at)
        except BaseException as exc:  # noqa: BLE001
            log.write(f"worker: {log.describe(exc)}", harness=harness, event=kind, base=base)
        finally:
            os._exit(0)
    os.close(write_end)
    text = _await_answer(read_end, deadline_at)
    if text is None:
        # After the deadline every step counts: the line is mnemo's own words and
        # numbers, written without importing the scrubber.
        lag = _late_start(deadline_at - deadline)
        log.write(f"deadline of {deadline:g}s exceeded before answering{lag}; "
                  "the worker goes on in the background (its turns stay in the spool)",
                  harness=harness, event=kind, base=base, plain=True)
        text = neutral_output(harness, kind)
    _write(stdout, text)
    _flush_and_exit(stdout)


# The niceness of a worker past its deadline (`step_aside`).
LATE_NICENESS = 10


def step_aside(deadline_at: float) -> None:
    """A forked worker past its deadline: the harness had its neutral answer, and
    the machine is too busy to answer in time, so what the worker still does
    (spooling the event, storing turns) runs at a lower priority, behind the
    hooks that can still answer theirs.  It still runs: nothing is lost."""
    if time.monotonic() < deadline_at:
        return
    try:
        current = os.nice(0)
        if current < LATE_NICENESS:
            os.nice(LATE_NICENESS - current)
    except OSError:
        pass


def _late_start(started: float) -> str:
    """How long after the harness called it (`started`, `time.monotonic()`, from
    `hook_age`) this process started, when that counts."""
    lag = (time.monotonic() - started) - process_age()
    return f" (the hook process started {lag:.1f}s after its wrapper)" if lag >= 0.1 else ""


def _await_answer(fd: int, deadline_at: float) -> str | None:
    """Everything the worker writes before closing the pipe, or None past the deadline."""
    chunks: list[bytes] = []
    while True:
        remaining = deadline_at - time.monotonic()
        if remaining <= 0:
            return None
        try:
            ready, _, _ = select.select([fd], [], [], remaining)
        except InterruptedError:
            continue
        if not ready:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks).decode("utf-8", "replace")
        chunks.append(chunk)


def _detach() -> None:
    """Leave the harness's session; stdio to /dev/null; a kernel timer on the rest.

    The harness waits for its hook's stdout to close and may kill the hook's
    process group: the worker must hold neither.  SIGALRM's default action
    ends the process even while Python is stuck in C code.  (`_signal`, the C half
    of `signal`: the same calls without building its enums, 2 ms of every worker.)
    """
    import _signal

    try:
        os.setsid()
    except OSError:
        pass
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        try:
            os.dup2(devnull, fd)
        except OSError:
            pass
    _signal.signal(_signal.SIGALRM, _signal.SIG_DFL)
    _signal.setitimer(_signal.ITIMER_REAL, HOUSEKEEPING_SECONDS)
    import warnings

    warnings.simplefilter("ignore")


def _write_fd(fd: int, text: str) -> None:
    data = text.encode("utf-8", "replace")
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:
        pass  # the parent gave up waiting


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
