"""The cold path through upstream: open an existing bank and recall once, in a new process.

Every hook is a new process, so what it pays before its first recall is the
import of `mnemosyne` and the construction of one upstream instance per bank.
Side by side, in one run, each a fresh subprocess timed N times:

- `python -c pass` (this interpreter), the reference for every ratio;
- `import mnemosyne.core.memory`, upstream's import as it comes;
- **before**: what the driver used to do — a plain import, then
  `Mnemosyne(session_id=..., db_path=...)` (its whole DDL) and one recall;
- `driver, full DDL`: the driver with `MNEMO_DRIVER_FULL_DDL=1` (its import
  savings, upstream's DDL still run on every open);
- **after**: `driver.instance` and `driver.recall`, as a hook calls them.

The bank holds `--rows` memories written through the driver beforehand, and
is the same file for every case.  With `--fsyncs` (needs `strace`) each case
also runs once under strace and the fsync/fdatasync calls are counted.

    .venv/bin/python bench/bench_cold.py [--runs 21] [--rows 200] [--fsyncs]

Prints median/p95 in milliseconds and the ratios to `python -c pass` (these
machines are noisy; only the ratios compare across runs).  Asserts nothing.
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
"""

# What `driver.instance` + `driver.recall` did before the fast open: a plain
# import (its import-time init on the default bank), the constructor with its
# full DDL, the trim disarmed, one recall.
BEFORE = """
import sys
from pathlib import Path
from dsh_mnemo.memory import targets
from mnemosyne.core.memory import Mnemosyne
db = targets.Target(bank=sys.argv[1], namespace=sys.argv[2], level="workspace").db_path()
memory = Mnemosyne(session_id=sys.argv[2], db_path=db)
memory.beam._trim_working_memory = lambda: None
list(memory.recall(sys.argv[3], top_k=5))
"""

AFTER = """
import sys
from dsh_mnemo.memory import driver
from dsh_mnemo.memory.targets import Target
driver.recall(Target(bank=sys.argv[1], namespace=sys.argv[2], level="workspace"),
              sys.argv[3], top_k=5)
"""


def cases(python: str) -> list[tuple[str, list[str], dict[str, str]]]:
    args = [BANK, NAMESPACE, QUERY]
    return [
        ("python -c pass", [python, "-c", "pass"], {}),
        ("import mnemosyne.core.memory", [python, "-c", "import mnemosyne.core.memory"], {}),
        ("before: Mnemosyne() + recall", [python, "-c", BEFORE, *args], {}),
        ("driver, full DDL + recall", [python, "-c", AFTER, *args],
         {"MNEMO_DRIVER_FULL_DDL": "1"}),
        ("after: driver + recall", [python, "-c", AFTER, *args], {}),
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
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--fsyncs", action="store_true", help="count fsyncs under strace")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        data = base / "data"
        env = {**os.environ, "HOME": str(base / "home"), "MNEMO_DATA_DIR": str(data),
               "MNEMOSYNE_DATA_DIR": str(data), "HERMES_HOME": str(data / "hermes-home"),
               "MNEMOSYNE_NO_EMBEDDINGS": "1", "MNEMOSYNE_LLM_ENABLED": "false"}
        env.pop("MNEMO_DRIVER_FULL_DDL", None)
        (base / "home").mkdir()
        subprocess.run([sys.executable, "-c", SEED, BANK, NAMESPACE, str(args.rows)],
                       env=env, check=True)
        table = cases(sys.executable)
        samples: dict[str, list[float]] = {label: [] for label, _, _ in table}
        for _label, argv, extra in table:  # warm the page cache and .pyc files
            timed(argv, {**env, **extra})
        # Round-robin, so that drift in the machine's load hits every case alike.
        for _ in range(args.runs):
            for label, argv, extra in table:
                samples[label].append(timed(argv, {**env, **extra}))
        counts = {label: fsyncs(argv, {**env, **extra}, base) if args.fsyncs else None
                  for label, argv, extra in table}
    reference = statistics.median(samples["python -c pass"])
    print(f"{args.runs} runs each, bank of {args.rows} memories; "
          f"python -c pass median {reference:.1f} ms\n")
    header = f"{'case':<32}{'median ms':>10}{'p95 ms':>9}{'x pass':>8}"
    print(header + (f"{'fsyncs':>8}" if args.fsyncs else ""))
    for label, _, _ in table:
        median = statistics.median(samples[label])
        line = (f"{label:<32}{median:>10.1f}{pct(samples[label], 0.95):>9.1f}"
                f"{median / reference:>8.2f}")
        if args.fsyncs:
            line += f"{'-' if counts[label] is None else counts[label]:>8}"
        print(line)
    before = statistics.median(samples["before: Mnemosyne() + recall"])
    after = statistics.median(samples["after: driver + recall"])
    print(f"\nafter / before: {after / before:.2f} "
          f"(above python -c pass: {(after - reference) / (before - reference):.2f})")


if __name__ == "__main__":
    main()
