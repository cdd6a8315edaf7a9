"""When each harness last received context from mnemo's prompt hook.

A working install logs nothing (the hook log holds failures only), so this
is the sign that a harness really runs the hook: the prompt handler calls
`record_injection` each time it hands a block or hint to a harness, and
`mnemo hooks status` shows `last_injections`.  One small file per harness,
`<data dir>/hooks/last-injection/<harness>`, holding epoch milliseconds and
replaced atomically (`fsutil.atomic_write_bytes`, unsynced; concurrent hooks of
different harnesses never share a file; of the same harness, the last write
wins, which is the answer).

Cheap on the hook path: one unsynced write of a few bytes.
Runs of `mnemo hooks test` (their session ids start with TEST_SESSION_PREFIX)
are not recorded: they prove nothing about the harness.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

TEST_SESSION_PREFIX = "mnemo-hooks-test-"
FOLDER = ("hooks", "last-injection")


def _folder(base: Path) -> Path:
    return base.joinpath(*FOLDER)


def _safe(harness: str) -> bool:
    return bool(harness) and all(c.isalnum() or c in "-_" for c in harness)


def record_injection(base: Path, harness: str, *, session_id: str | None = None,
                     now_ms: int | None = None) -> None:
    """Note that `harness` was just given context.  Never raises."""
    if not _safe(harness) or (session_id or "").startswith(TEST_SESSION_PREFIX):
        return
    stamp = int(time.time() * 1000) if now_ms is None else now_ms
    from ..fsutil import atomic_write_bytes

    # Private (0600 in a 0700 folder), whatever the process's umask; not synced:
    # a stamp lost in a power cut costs nothing, an fsync per prompt would.
    with contextlib.suppress(OSError):
        atomic_write_bytes(_folder(base) / harness, f"{stamp}\n".encode("ascii"), sync=False)


def last_injection(base: Path, harness: str) -> int | None:
    """Epoch milliseconds of the last injection into `harness`, or None."""
    if not _safe(harness):
        return None
    try:
        return int((_folder(base) / harness).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


def last_injections(base: Path) -> dict[str, int]:
    """Harness name → epoch milliseconds of its last injection (recorded ones only)."""
    folder = _folder(base)
    found: dict[str, int] = {}
    try:
        names = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    except OSError:
        return found
    for name in names:
        stamp = last_injection(base, name)
        if stamp is not None:
            found[name] = stamp
    return found
