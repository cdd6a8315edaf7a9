"""`mnemo serve`: one resident process per user and data dir that answers hooks.

A hook process pays for its interpreter, mnemo's modules, upstream's import,
opening two banks and loading the embedding model on every prompt; the
server pays once and answers from memory.  It runs the **same handler
code** as a hook process (`hook.entry.handle_event`): one implementation,
two transports.  What differs is where work after the answer goes: a hook
process does it itself, the server queues it for its one housekeeping
thread, so a prompt is never answered behind another session's stores or a
consolidation (the prompt path only reads), and that thread starts no job
while a prompt is being answered (it waits up to `YIELD_SECONDS` for a gap).

- **Socket**: `<data dir>/run/mnemo.sock`, 0600 in a 0700 directory; each
  peer's uid is checked (`SO_PEERCRED`) and another user's is refused.
- **One server**: an exclusive `flock` on `run/server.lock`, held for the
  process's life (the kernel releases it however the process ends); a
  server that cannot take it leaves at once.  A stale socket file (a
  server that was killed) is replaced by the next one.  Of a burst of hooks
  that find no server, only the first starts one (`client.claim_spawn`);
  the server clears that claim once it has won or lost the lock.
- **Lifetime**: started on demand by a hook that found none (detached, see
  `client.spawn_server`), or by `mnemo serve`; exits after
  `server.idle_seconds` without a hook, on `mnemo serve --stop` or
  SIGTERM, and *retires* when a client's environment (`client.ENV_*`) or
  its own installed code differs from what it started with: it answers
  that client "fall back", stops listening, finishes its queue and exits,
  and the next hook starts a fresh one.  A changed config file is simply
  reloaded.
- **Nothing lost**: a turn end is spooled before it is acknowledged
  (`handlers.on_turn_end`); a server killed before storing it leaves
  claims of a dead pid, which the next hook of that session or the next
  server's start-up replays.

State for humans and `status`: `run/server.json` (pid, start, version);
live figures come from asking the server itself (`state.query`).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import queue
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import __version__, paths
from ..fsutil import try_lock
from ..hook import log
from . import client

ANSWER_THREADS = 4
# Housekeeping starts no job while a prompt is being answered (the CPU is the
# prompt's), but waits at most this long for a gap between prompts.
YIELD_SECONDS = 2.0
ANSWERED_FIRST = ("prompt", "session-start")
REQUEST_READ_SECONDS = 5.0
DRAIN_SECONDS = 60.0  # what a stopping server gives its queued stores
MAX_REQUEST_BYTES = client.MAX_STDIN_BYTES + 1024 * 1024
ACCEPT_POLL_SECONDS = 0.5
TEST_DELAY_ENV = "MNEMO_SERVER_TEST_DELAY"  # test-only, sent by the client like any MNEMO_*


# Not resolved: stat follows a swapped symlink (a reinstalled prefix) at each call.
_CODE_FILES = (Path(os.path.abspath(__file__)).parent.parent / "__init__.py",
               Path(os.path.abspath(__file__)))


def code_stamp() -> tuple[Any, ...]:
    """What identifies the installed code: its version and its files' identity.

    An upgrade rewrites these files; a server whose stamp no longer matches
    the disk retires at the next call.
    """
    stamp: list[Any] = [__version__]
    for path in _CODE_FILES:
        try:
            info = path.stat()
            stamp.append((info.st_mtime_ns, info.st_size, info.st_ino))
        except OSError:
            stamp.append(None)
    return tuple(stamp)


def _config_stamp() -> tuple[Any, ...] | None:
    try:
        info = paths.config_path().stat()
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino)


class Busy:
    """Requests in flight and queued work; while any, a work lock file is held.

    It is the file a hook worker holds (`hook.background`), so `busy()` and
    `wait_idle()` (status, tests) see a server still storing turns.
    """

    def __init__(self, base: Path) -> None:
        from ..hook.background import work_dir

        self.path = work_dir(base) / f"{os.getpid()}.lock"
        self.count = 0
        self.lock = threading.Lock()
        self.fd: int | None = None

    def enter(self) -> None:
        with self.lock:
            self.count += 1
            if self.count == 1:
                with contextlib.suppress(OSError):  # bookkeeping only
                    self.fd = try_lock(self.path)

    def leave(self) -> None:
        with self.lock:
            self.count -= 1
            if self.count == 0 and self.fd is not None:
                with contextlib.suppress(OSError):
                    self.path.unlink()
                os.close(self.fd)
                self.fd = None


class Server:
    def __init__(self, base: Path, settings: Any) -> None:
        self.base = base
        self.folder = Path(client.run_dir(str(base)))
        self.settings = settings
        self.config_stamp = _config_stamp()
        self.code = code_stamp()
        self.env_key = client.environment_key(dict(os.environ))
        self.started_wall = time.time()
        self.started = time.monotonic()
        self.last_activity = time.monotonic()
        self.requests = 0
        self.stop_reason: str | None = None
        self.stopping = threading.Event()
        self.jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self.busy = Busy(base)
        self.listener: socket.socket | None = None
        self.socket_identity: tuple[int, int] | None = None
        self.settings_lock = threading.Lock()
        self.prompts = 0  # prompts (and session starts) being answered
        self.prompts_done = threading.Condition()

    # ─── Lifetime ──────────────────────────────────────────────────────────

    def run(self) -> int:
        """Serve until idle, stopped or retired; returns the exit status."""
        self._listen()
        self._clear_hung()
        self._write_state()
        housekeeper = threading.Thread(target=self._housekeeping, name="mnemo-housekeeping",
                                       daemon=True)
        housekeeper.start()
        self.enqueue(self._warm_up)
        self.enqueue(self._replay)
        with ThreadPoolExecutor(max_workers=ANSWER_THREADS,
                                thread_name_prefix="mnemo-answer") as pool:
            while not self.stopping.is_set():
                try:
                    conn, _ = self.listener.accept()  # type: ignore[union-attr]
                except TimeoutError:
                    if self._idle():
                        self.stop("idle")
                    elif self._unreachable():
                        self.stop("its socket is gone")
                    continue
                except OSError:
                    if self.stopping.is_set():
                        break
                    raise
                self.last_activity = time.monotonic()
                self.busy.enter()
                pool.submit(self._serve_connection, conn)
        self._close_listener()
        self.jobs.put(None)
        housekeeper.join(DRAIN_SECONDS)
        if not self.base.is_dir():
            return 0  # the data directory was removed: nothing to write there, not even a log
        self._note_searched()
        self._remove_state()
        log.write(f"resident server exits ({self.stop_reason or 'stopped'}) after "
                  f"{self.requests} request(s)", harness="server", event="serve",
                  level="info", base=self.base)
        return 0

    def stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self.stopping.set()
        self._close_listener()

    def _idle(self) -> bool:
        idle = int(self.settings["server.idle_seconds"])
        return (idle > 0 and self.busy.count == 0 and self.jobs.empty()
                and time.monotonic() - self.last_activity >= idle)

    def _unreachable(self) -> bool:
        """Whether no hook can reach this server any more: its socket was removed or
        replaced (the data directory deleted or moved away under it). Without this
        it would sit idle for `server.idle_seconds`."""
        return self._socket_is_ours() is False

    def _socket_is_ours(self) -> bool | None:
        """Whether the socket file is still the one this server bound (False: gone or
        another's; None: it cannot be told, an unreadable directory for a moment)."""
        try:
            info = (self.folder / client.SOCKET_NAME).stat()
        except FileNotFoundError:
            return False
        except OSError:
            return None
        return (info.st_dev, info.st_ino) == self.socket_identity

    def _listen(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        address, fd = client.socket_address(str(self.folder))
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(address)  # a killed server's socket: we hold the lock now
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            old = os.umask(0o177)
            try:
                listener.bind(address)
            finally:
                os.umask(old)
            os.chmod(address, 0o600)
            info = os.stat(address)
        finally:
            if fd is not None:
                os.close(fd)
        listener.listen(64)
        listener.settimeout(ACCEPT_POLL_SECONDS)
        self.listener = listener
        self.socket_identity = (info.st_dev, info.st_ino)

    def _close_listener(self) -> None:
        listener, self.listener = self.listener, None
        if listener is None:
            return
        with contextlib.suppress(OSError):
            listener.close()
        # Remove the socket only if it is still ours: new clients then fall back
        # (and start a successor) instead of queueing on a server that is leaving.
        if self._socket_is_ours():
            with contextlib.suppress(OSError):
                (self.folder / client.SOCKET_NAME).unlink()

    def _write_state(self) -> None:
        from ..fsutil import atomic_write_text

        state = {"pid": os.getpid(), "version": __version__,
                 "started": datetime.fromtimestamp(self.started_wall, timezone.utc)
                 .isoformat(timespec="seconds"),
                 "socket": str(self.folder / client.SOCKET_NAME),
                 "data_dir": str(self.base)}
        atomic_write_text(self.folder / client.STATE_NAME, json.dumps(state) + "\n", mode=0o600)
        self._write_conf()

    def _write_conf(self) -> None:
        from ..fsutil import atomic_write_text

        atomic_write_text(self.folder / client.CONF_NAME,
                          f"deadline_seconds={float(self.settings['hooks.deadline_seconds'])}\n",
                          mode=0o600)

    def _remove_state(self) -> None:
        for name in (client.STATE_NAME,):
            path = self.folder / name
            with contextlib.suppress(OSError):
                if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
                    path.unlink()

    # ─── Answering ─────────────────────────────────────────────────────────

    def _serve_connection(self, conn: socket.socket) -> None:
        try:
            self._answer(conn)
        except Exception as exc:  # noqa: BLE001 - one bad request never stops the server
            log.write(f"request: {log.describe(exc)}", harness="server", event="serve",
                      base=self.base)
        finally:
            with contextlib.suppress(OSError):
                conn.close()
            self.last_activity = time.monotonic()
            self.busy.leave()

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(REQUEST_READ_SECONDS)
        uid = peer_uid(conn)
        if uid is not None and uid != os.getuid():
            log.write(f"refused a client of uid {uid}", harness="server", event="serve",
                      level="warning", base=self.base)
            return
        fields, environ, body = client.decode_request(_read_request(conn))
        self._clear_hung()  # whatever a client concluded, this server answers again
        event = fields.get("event", "")
        if event == "status":
            _send(conn, client.OK + json.dumps(self.status()).encode())
            return
        if event == "stop":
            _send(conn, client.OK)
            self.stop("stopped")
            return
        try:
            until = float(fields.get("until", "inf"))
        except ValueError:
            until = float("inf")
        if time.time() > until:
            # The client gave up waiting (this server was stopped or swamped) and
            # its fallback handled the event: doing it again could double a turn.
            log.write(f"dropped a {event} its client gave up on "
                      f"{time.time() - until:.1f}s ago", harness=fields.get("harness", "?"),
                      event="serve", level="warning", base=self.base)
            return
        reason = self._mismatch(environ)
        if reason is not None:
            _send(conn, client.FALLBACK)
            log.write(f"retiring: {reason}", harness="server", event="serve", level="info",
                      base=self.base)
            self.stop(f"retired: {reason}")
            return
        settings = self._current_settings()
        if settings is None:
            _send(conn, client.FALLBACK)  # a broken config: the hook process says why
            return
        delay = environ.get(TEST_DELAY_ENV)
        if delay:
            time.sleep(float(delay))  # tests: a server that is slow to answer, or dies meanwhile
        from ..hook.entry import Answer, handle_event, parse_argv

        kind, harness = parse_argv([event, "--harness", fields.get("harness", "generic")])
        self.requests += 1
        first = kind in ANSWERED_FIRST
        answer = Answer(deliver=lambda text: _send(conn, client.OK
                                                   + text.encode("utf-8", "replace")))
        if first:
            with self.prompts_done:
                self.prompts += 1
        try:
            # The client's directory, "" if it had none: never this server's own
            # (that of whichever hook started it, another repository).
            handle_event(answer, kind, harness, body, settings, self.base, environ=environ,
                         process_cwd=fields.get("cwd", ""), defer=self._after_answer,
                         # Past it the client answers in process: a request that stalls
                         # here must not spool the event a second time (`Spool.until`).
                         until=until if until != float("inf") else None)
        finally:
            if first:
                with self.prompts_done:
                    self.prompts -= 1
                    self.prompts_done.notify_all()
            self._end_transactions(f"{harness} {kind}")

    def _after_answer(self, work: Callable[[], None]) -> None:
        from ..faults import fault

        fault("server-after-answer")  # tests: killed after answering, the work not yet queued
        self.enqueue(work)

    def _clear_hung(self) -> None:
        with contextlib.suppress(FileNotFoundError, OSError):
            os.unlink(self.folder / client.HUNG_NAME)

    def _mismatch(self, environ: dict[str, str]) -> str | None:
        if client.environment_key(environ) != self.env_key:
            return "a client's environment differs from the server's"
        if code_stamp() != self.code:
            return "mnemo was upgraded"
        return None

    def _current_settings(self) -> Any:
        stamp = _config_stamp()
        with self.settings_lock:
            if stamp != self.config_stamp:
                from ..config import ConfigError, apply_environment, load_settings

                try:
                    self.settings = load_settings()
                except ConfigError as exc:
                    log.write(f"settings: {exc}", harness="server", event="serve",
                              base=self.base)
                    return None
                apply_environment(self.settings, self.base)
                self.config_stamp = stamp
                self._write_conf()
            return self.settings

    def status(self) -> dict[str, Any]:
        from ..memory import driver, semantic

        return {"pid": os.getpid(), "version": __version__,
                "uptime_seconds": round(time.monotonic() - self.started, 1),
                "requests": self.requests, "queued": self.jobs.qsize(),
                "banks_open": driver.open_banks(), "models": semantic.loaded_models(),
                "idle_seconds": int(self.settings["server.idle_seconds"])}

    # ─── Housekeeping ──────────────────────────────────────────────────────

    def enqueue(self, work: Callable[[], None]) -> None:
        self.busy.enter()
        self.jobs.put(work)

    def _housekeeping(self) -> None:
        while True:
            work = self.jobs.get()
            if work is None:
                return
            with self.prompts_done:
                self.prompts_done.wait_for(lambda: self.prompts == 0, timeout=YIELD_SECONDS)
            try:
                work()
            except BaseException as exc:  # noqa: BLE001 - the next job still runs
                log.write(f"housekeeping: {log.describe(exc)}", harness="server",
                          event="serve", base=self.base)
            finally:
                self._end_transactions("housekeeping")
                self.last_activity = time.monotonic()
                self.busy.leave()

    def _end_transactions(self, what: str) -> None:
        """No connection this thread keeps may hold a bank's write lock between jobs."""
        from ..memory import driver

        try:
            ended = driver.end_open_transactions()
        except Exception as exc:  # noqa: BLE001 - never fatal to the server
            ended = [log.describe(exc)]
        if ended:
            log.write(f"{what} left a transaction open on {', '.join(ended)}: rolled back",
                      harness="server", event="serve", level="warning", base=self.base)

    def _warm_up(self) -> None:
        """Load what the first prompt would otherwise wait for: upstream, the
        model, numpy, and the matrices of the namespaces searched last (`warm`).

        A process without numpy searches small namespaces in pure Python
        (`embed.flat`: 11 ms for 1,000 vectors, against 0.1 ms with numpy);
        a resident server has the time to import it once."""
        from ..hook.handlers import _storage
        from ..memory import semantic, warm

        with contextlib.suppress(ImportError):
            importlib.import_module("numpy")
        _storage()
        if self.settings["embeddings.backend"] == "none":
            return
        embed = semantic.load(self.settings).embedder
        if embed is None:
            return
        started = time.monotonic()
        read = semantic.warm(warm.load(self.base), model_id=embed.model_id, base=self.base)
        if read:
            log.write(f"read the vectors of {read} namespace(s) searched last in "
                      f"{time.monotonic() - started:.2f}s", harness="server", event="serve",
                      level="info", base=self.base)
            semantic.persist(self.base)

    def _note_searched(self) -> None:
        from ..memory import warm

        with contextlib.suppress(Exception):  # the next server then starts cold
            warm.note_searched(self.base)

    def _replay(self) -> None:
        """Store the turns a killed server or worker had claimed."""
        from ..hook.handlers import HookRun, store_turns
        from ..hook.spool import stale_claims

        for spool in stale_claims(self.base):
            turns = spool.take_stale()
            if not turns:
                continue
            run = HookRun(harness="server", kind="replay", settings=self.settings,
                          base=self.base, emit=lambda _text: None)
            stored = store_turns(run, spool, turns)
            log.write(f"replayed {len(turns)} turn(s) a stopped process had claimed "
                      f"({stored} stored)", harness="server", event="serve", level="info",
                      base=self.base)


def peer_uid(conn: socket.socket) -> int | None:
    """The connecting process's uid (None where the system cannot say)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None  # the 0700 directory is the fence there
    size = struct.calcsize("3i")
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option, size))
    return uid


def _read_request(conn: socket.socket) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            raise ValueError("request too large")


def _send(conn: socket.socket, data: bytes) -> None:
    try:
        conn.sendall(data)
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # the client gave up waiting: it answered through its fallback


def take_lock(folder: Path) -> int | None:
    """The server lock's fd, or None if another server holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return try_lock(folder / client.LOCK_NAME)


def serve(base: Path, settings: Any) -> int:
    """Run a server in this process until it stops; 3 if another one already runs."""
    folder = Path(client.run_dir(str(base)))
    lock = take_lock(folder)
    client.clear_spawn_claim(str(folder))  # won or lost, the start is over
    if lock is None:
        return 3
    server = Server(base, settings)
    signal.signal(signal.SIGTERM, lambda *_: server.stop("SIGTERM"))
    signal.signal(signal.SIGINT, lambda *_: server.stop("interrupted"))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        return server.run()
    finally:
        os.close(lock)
