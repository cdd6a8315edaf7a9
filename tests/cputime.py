"""CPU time held to a yardstick measured in the same run.

The hostile-input tests ask "is this cheap and linear?".  A fixed limit ("1 MiB
in under 1 s of CPU") answers another question, "is this machine as fast and as
idle as the one the test was written on?": under CI load, with the suite on two
workers, the same scrub of 1 MiB took 0.65 s in one run and over 1 s in another.
So every limit here is a multiple of `yardstick()`, the CPU time `scrub` takes
on 1 MiB of ordinary text (the secret corpus's benign and secret lines,
repeated), measured once per process, best of three.

On a quiet 2-core x86-64 machine the yardstick is about 0.16 s.  The costliest
hostile shape for `scrub` (1 MiB of `密码是：ａ`, a phrase every five characters)
takes about 5.6 yardsticks, for `strip_injected` (a run of `</`) about 2.4, for
`sanitize` (surrogate pairs) about 1.9.  A regex that backtracks costs thousands.

A timing over its limit is taken twice more and the least of the three is
judged: noise only ever makes code slower, so a check that passes the first
time costs one run, and one that fails has been measured fairly.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable

from dsh_mnemo.memory.scrub import scrub
from tests.corpus.hostile import MB
from tests.corpus.secrets import BENIGN, SECRETS

HOSTILE_LIMIT = 8.0  # 1 MiB of hostile input may cost this many yardsticks
LINEAR_LIMIT = 8.0  # 4x the input may cost this many times as much (linear: 4, quadratic: 16)
TOO_SHORT = 0.03  # CPU seconds below which a ratio of two timings means nothing
WIDE = re.compile("[\uff01-\uff5e\u3000]")  # full-width forms, the ideographic space


def redact(text: str) -> object:
    return scrub(text, "redact")


def cpu(function: Callable[[str], object], text: str) -> float:
    started = time.process_time()
    function(text)
    return time.process_time() - started


def ordinary_text(size: int) -> str:
    """`size` characters of what scrub usually sees: prose, code, config, a few secrets.

    Lines with full-width forms are left out: they cost a second pass (`scrub`'s
    ASCII reading of them), which the hostile shapes with such forms pay for.
    """
    lines = [*BENIGN, *(secret.text for secret in SECRETS)]
    unit = "\n".join(line for line in lines if not WIDE.search(line)) + "\n"
    return (unit * (size // len(unit) + 1))[:size]


@functools.cache
def yardstick() -> float:
    """CPU seconds `scrub` takes on 1 MiB of ordinary text in this process, best of three."""
    text = ordinary_text(MB)
    return min(cpu(redact, text) for _ in range(3))


def least_cpu(function: Callable[[str], object], text: str, limit: float) -> float:
    """CPU seconds of `function(text)`; the least of three when the first is over `limit`."""
    first = cpu(function, text)
    if first < limit:
        return first
    return min(first, cpu(function, text), cpu(function, text))


def assert_cheap(function: Callable[[str], object], text: str, yardsticks: float,
                 label: str) -> float:
    """Assert `function(text)` costs under `yardsticks` x `yardstick()` of CPU; return its cost."""
    unit = yardstick()
    elapsed = least_cpu(function, text, yardsticks * unit)
    assert elapsed < yardsticks * unit, (
        f"{label}: {elapsed:.3f} s of CPU for {len(text):,} characters, over "
        f"{yardsticks:g} x {unit:.3f} s (scrub of 1 MiB of ordinary text in this run)")
    return elapsed


def assert_linear(function: Callable[[str], object], big: str, small: str, big_cpu: float,
                  label: str) -> None:
    """Assert `big`, 4x `small`, costs under `LINEAR_LIMIT` x `small`.

    `big_cpu` is a timing of `big` already taken (by `assert_cheap`).
    """
    if big_cpu < TOO_SHORT:
        return
    small_cpu = cpu(function, small)
    if big_cpu / max(small_cpu, 0.005) >= LINEAR_LIMIT:
        big_cpu = min(big_cpu, cpu(function, big), cpu(function, big))
        small_cpu = min(small_cpu, cpu(function, small), cpu(function, small))
    ratio = big_cpu / max(small_cpu, 0.005)
    assert ratio < LINEAR_LIMIT, f"{label}: 4x the input took {ratio:.1f}x the time"
