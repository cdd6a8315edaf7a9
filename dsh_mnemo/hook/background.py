"""Hook workers still storing turns after they answered, made visible.

A forked hook worker (see `entry`) holds an exclusive `flock` on a file of
its own in `<data dir>/hook-state/work/` until it exits; the kernel drops
the lock when the process dies however it dies.  `busy()` lists the workers
still at work, `wait_idle()` waits for them (the end-to-end tests use it to
know when captured turns are in the database; `mnemo status` can report it).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path


def work_dir(base: Path) -> Path:
    return base / "hook-state" / "work"


@contextlib.contextmanager
def hold(base: Path | None) -> Iterator[None]:
    """Mark this process as a hook worker at work for as long as the block runs."""
    if base is None:
        yield
        return
    path = work_dir(base) / f"{os.getpid()}.lock"
    fd = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pass  # bookkeeping only: the work goes on without it
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        if fd is not None:
            os.close(fd)


def busy(base: Path) -> list[int]:
    """Pids of hook workers still at work (files of finished ones are removed)."""
    folder = work_dir(base)
    found: list[int] = []
    if not folder.is_dir():
        return found
    for path in folder.glob("*.lock"):
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            found.append(int(path.stem) if path.stem.isdigit() else -1)
            continue
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()  # its worker is gone
    return found


def wait_idle(base: Path, timeout: float = 60.0) -> bool:
    """Wait until no hook worker is at work; False if some still are at `timeout`."""
    end = time.monotonic() + timeout
    while busy(base):
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)
    return True
