"""The cold path through upstream: open an existing bank and recall or write once, in a new process.

Every hook is a new process, so what it pays before its first recall (or,
at a turn's end, its first write) is the import of `mnemosyne` and the
construction of one upstream instance per bank.  Side by side, in one run,
each case a fresh subprocess timed N times, round-robin:

- references: `python -c pass` (this interpreter) and `raw sqlite3` (import
  sqlite3, open the bank, one full-text query: the floor for reading it);
- `import mnemosyne.core.memory`, upstream's import as it comes (with its
  `import mcp` and its init of the default bank);
- **before**: what the driver used to do — a plain import, then
  `Mnemosyne(session_id=..., db_path=...)` (its whole DDL) and one recall;
  for the write, the plain import of upstream's secret patterns (scrub),
  the constructor and one `remember`;
- `driver, full DDL`: the driver with `MNEMO_DRIVER_FULL_DDL=1` (its import
  savings, upstream's DDL still run on every open);
- **after**: `driver.recall`, or `scrub` then `driver.remember`, as mnemo
  calls them.

The bank holds `--rows` memories written through the driver beforehand, and
is the same file for every case.  With `--fsyncs` (needs `strace`) each case
also runs once under strace and its fsync/fdatasync calls are counted.

    .venv/bin/python bench/bench_cold.py [--runs 11] [--rows 200] [--fsyncs]

Prints median and p95 in milliseconds, each median as a ratio to
`python -c pass`, to the raw sqlite3 read and to the `before` case of its
kind, all measured in this run, then the open alone in one process, with
the fingerprint matched against the full DDL: on a shared, noisy machine
only ratios compare across runs.  Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "ws-bench"
BANK = "ws-" + "b" * 48
QUERY = "how do we deploy a release to production?"

SEED = """
import sys
from dsh_mnemo.memory import driver
from dsh_mnemo.memory.targets import Target
target = Target(bank=sys.argv[1], namespace=sys.argv[2], level="workspace")
words = ["deploy", "release", "cache", "schema", "queue", "retry", "oauth", "redis", "canary"]
for i in range(int(sys.argv[3])):
    text = f"note {i}: the {words[i % 9]} step uses {words[(i * 7) % 9]} and {words[(i * 5) % 9]}"
    driver.remember(target, text, source="user", importance=0.5)
print(target.db_path())
"""

RAW_SQLITE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.execute("SELECT w.id, w.content FROM fts_working f JOIN working_memory w ON w.id = f.id "
             "WHERE fts_working MATCH ? LIMIT 5", ("deploy OR release",)).fetchall()
"""

# What `driver.instance` + `driver.recall` did before the fast open: a plain
# import (its import-time init on the default bank), the constructor with its
# full DDL, the trim disarmed, one recall.
BEFORE_RECALL = """
import sys
from dsh_mnemo.memory import targets
from mnemosyne.core.memory import Mnemosyne
db = targets.Target(bank=sys.argv[1], namespace=sys.argv[2], level="workspace").db_path()
memory = Mnemosyne(session_id=sys.argv[2], db_path=db)
memory.beam._trim_working_memory = lambda: None
list(memory.recall(sys.argv[3], top_k=5))
"""

AFTER_RECALL = """
import sys
from dsh_mnemo.memory import driver
from dsh_mnemo.memory.targets import Target
driver.recall(Target(bank=sys.argv[1], namespace=sys.argv[2], level="workspace"),
              sys.argv[3], top_k=5)
"""

# The write path before: scrub's plain import of upstream's patterns, then
# the constructor and one remember (a new text each time: no dedup).
BEFORE_REMEMBER = """
import sys, time
from mnemosyne.core.filters import SECRET_LABELED_PATTERNS
from dsh_mnemo.memory import targets
from mnemosyne.core.memory import Mnemosyne
db = targets.Target(bank=sys.argv[1], namespace=sys.argv[2], level="workspace").db_path()
memory = Mnemosyne(session_id=sys.argv[2], db_path=db)
memory.beam._trim_working_memory = lambda: None
memory.remember(f"the release {time.time_ns()} was tagged from main", source="user")
"""

AFTER_REMEMBER = """
import sys, time
from dsh_mnemo.memory import driver
from dsh_mnemo.memory.scrub import scrub
from dsh_mnemo.memory.targets import Target
text = scrub(f"the release {time.time_ns()} was tagged from main").text
driver.remember(Target(bank=sys.argv[1], namespace=sys.argv[2], level="workspace"), text,
                source="user", importance=0.5)
"""

# The open alone, in one process, alternating: the DDL skip without the
# noise of a process start (`driver.reset_cache` closes, as a new process would).
OPENS = """
import os, statistics, sys, time
from dsh_mnemo.memory import driver
from dsh_mnemo.memory.targets import Target
target = Target(bank=sys.argv[1], namespace=sys.argv[2], level="workspace")
driver.instance(target)
times = {"0": [], "1": []}
for _ in range(int(sys.argv[3])):
    for full in ("0", "1"):
        os.environ[driver.FULL_DDL_ENV] = full
        driver.reset_cache()
        start = time.perf_counter()
        driver.instance(target)
        times[full].append((time.perf_counter() - start) * 1000)
print(statistics.median(times["0"]), statistics.median(times["1"]))
"""

PASS = "python -c pass"
RAW = "raw sqlite3: open + FTS query"
BEFORE = {"recall": "before: Mnemosyne() + recall", "remember": "before: Mnemosyne() + remember"}


def cases(python: str, db: str) -> list[tuple[str, str | None, list[str], dict[str, str]]]:
    """(label, kind, argv, extra environment); kind picks the `before` a case compares to."""
    args = [BANK, NAMESPACE, QUERY]
    return [
        (PASS, None, [python, "-c", "pass"], {}),
        (RAW, None, [python, "-c", RAW_SQLITE, db], {}),
        ("import mnemosyne.core.memory", None, [python, "-c", "import mnemosyne.core.memory"], {}),
        (BEFORE["recall"], "recall", [python, "-c", BEFORE_RECALL, *args], {}),
        ("driver, full DDL + recall", "recall", [python, "-c", AFTER_RECALL, *args],
         {"MNEMO_DRIVER_FULL_DDL": "1"}),
        ("after: driver.recall", "recall", [python, "-c", AFTER_RECALL, *args], {}),
        (BEFORE["remember"], "remember", [python, "-c", BEFORE_REMEMBER, *args], {}),
        ("after: scrub + driver.remember", "remember", [python, "-c", AFTER_REMEMBER, *args],
         {}),
    ]


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def fsyncs(argv: list[str], env: dict[str, str], scratch: Path) -> int | None:
    strace = shutil.which("strace")
    if strace is None:
        return None
    out = scratch / "strace.txt"
    subprocess.run([strace, "-f", "-qq", "-e", "trace=fsync,fdatasync", "-o", str(out), *argv],
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return sum(1 for line in out.read_text().splitlines()
               if "fsync(" in line or "fdatasync(" in line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--fsyncs", action="store_true", help="count fsyncs under strace")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-cold-") as tmp:
        base = Path(tmp)
        data = base / "data"
        env = {**os.environ, "HOME": str(base / "home"), "MNEMO_DATA_DIR": str(data),
               "MNEMOSYNE_DATA_DIR": str(data), "HERMES_HOME": str(data / "hermes-home"),
               "MNEMOSYNE_NO_EMBEDDINGS": "1", "MNEMOSYNE_LLM_ENABLED": "false",
               # This tree's dsh_mnemo, whatever is installed in the interpreter.
               "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get(
                   "PYTHONPATH", "")) if p)}
        env.pop("MNEMO_DRIVER_FULL_DDL", None)
        (base / "home").mkdir()
        seeded = subprocess.run([sys.executable, "-c", SEED, BANK, NAMESPACE, str(args.rows)],
                                env=env, check=True, capture_output=True, text=True)
        db = seeded.stdout.strip().splitlines()[-1]
        table = cases(sys.executable, db)
        samples: dict[str, list[float]] = {label: [] for label, *_ in table}
        for _label, _kind, argv, extra in table:  # warm the page cache and .pyc files
            timed(argv, {**env, **extra})
        # Round-robin, so that drift in the machine's load hits every case alike.
        for _ in range(args.runs):
            for label, _kind, argv, extra in table:
                samples[label].append(timed(argv, {**env, **extra}))
        counts = {label: fsyncs(argv, {**env, **extra}, base) if args.fsyncs else None
                  for label, _kind, argv, extra in table}
        opened = subprocess.run([sys.executable, "-c", OPENS, BANK, NAMESPACE,
                                 str(max(5, args.runs * 3))], env=env, check=True,
                                capture_output=True, text=True)
        fast_open, full_open = (float(v) for v in opened.stdout.split())
    medians = {label: statistics.median(values) for label, values in samples.items()}
    reference = medians[PASS]
    print(f"{args.runs} runs each, round-robin, bank of {args.rows} memories; "
          f"references measured in this run: {PASS} {reference:.1f} ms, "
          f"{RAW} {medians[RAW]:.1f} ms\n")
    header = (f"{'case':<34}{'median ms':>10}{'p95 ms':>9}{'x pass':>8}{'x raw':>7}"
              f"{'x before':>10}")
    print(header + (f"{'fsyncs':>8}" if args.fsyncs else ""))
    for label, kind, _argv, _extra in table:
        median = medians[label]
        versus = f"{median / medians[BEFORE[kind]]:>10.2f}" if kind else f"{'':>10}"
        line = (f"{label:<34}{median:>10.1f}{pct(samples[label], 0.95):>9.1f}"
                f"{median / reference:>8.2f}{median / medians[RAW]:>7.2f}{versus}")
        if args.fsyncs:
            line += f"{'-' if counts[label] is None else counts[label]:>8}"
        print(line)
    print()
    for kind, before_label in BEFORE.items():
        after_label = next(label for label, k, _a, extra in table
                           if k == kind and label.startswith("after") and not extra)
        before, after = medians[before_label], medians[after_label]
        print(f"{kind}: after / before {after / before:.2f}; above python -c pass "
              f"{(after - reference) / (before - reference):.2f} "
              f"({after - reference:.0f} ms vs {before - reference:.0f} ms)")
    print(f"open of the bank in one process (median of {max(5, args.runs * 3)}, alternating): "
          f"fingerprint matched {fast_open:.1f} ms, full DDL {full_open:.1f} ms, "
          f"ratio {fast_open / full_open:.2f}")


if __name__ == "__main__":
    main()
