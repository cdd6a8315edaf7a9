"""Start-up cost of interactive `mnemo` commands, as ratios to `python3 -c pass`.

Each timed call is a new process, as a user's shell runs it, in a throwaway
data dir with one bound repository holding a few memories.  Every figure is
printed next to `python3 -c pass` measured in the same run (these machines
are noisy; only the ratios compare across runs).

    .venv/bin/python bench/bench_startup.py [--calls 15] [--compare OTHER_PYTHON]

`--compare` times the same commands under another interpreter that has mnemo
installed (for example a venv with another Typer release), side by side.
Prints p50/p95 in milliseconds and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--version",),
    ("status",),
    ("recall", "deploy"),
    ("remember", "We deploy with make release from the main branch."),
    ("config", "get", "prefetch.top_k"),
)


def timed(argv: list[str], *, env: dict[str, str], cwd: Path, calls: int) -> list[float]:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--compare", help="another python with mnemo installed")
    args = parser.parse_args()
    pythons = [("this", sys.executable)] + ([("compare", args.compare)] if args.compare else [])
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repo = base / "home" / "repo"
        (repo / ".git").mkdir(parents=True)
        env = {**os.environ, "HOME": str(base / "home"), "MNEMO_DATA_DIR": str(base / "data"),
               "MNEMO_CONFIG": str(base / "config.yaml"), "MNEMOSYNE_NO_EMBEDDINGS": "1"}
        subprocess.run([sys.executable, "-m", "dsh_mnemo", "bind"], env=env, cwd=repo,
                       check=True, stdout=subprocess.DEVNULL)
        for i in range(20):
            subprocess.run([sys.executable, "-m", "dsh_mnemo", "remember",
                            f"memory {i}: we deploy service {i} with make release"],
                           env=env, cwd=repo, check=True, stdout=subprocess.DEVNULL)
        rows: list[tuple[str, str, float, float]] = []
        # Interleave reference and commands, so drift in load hits both alike.
        # `python3 -c pass` with this very interpreter (a `python3` on PATH may be
        # a shim script that costs more than the interpreter itself).
        reference = timed([sys.executable, "-c", "pass"], env=env, cwd=repo, calls=args.calls)
        for command in COMMANDS:
            for label, python in pythons:
                samples = timed([python, "-m", "dsh_mnemo", *command], env=env, cwd=repo,
                                calls=args.calls)
                rows.append((" ".join(command)[:40], label, p(samples, 0.5), p(samples, 0.95)))
            reference += timed([sys.executable, "-c", "pass"], env=env, cwd=repo, calls=3)
    base_ms = statistics.median(reference)
    print(f"python3 -c pass: p50 {base_ms:.0f} ms (reference for the ratios)\n")
    print(f"{'command':<42}{'python':<9}{'p50 ms':>8}{'p95 ms':>8}{'x pass':>8}")
    for command, label, p50, p95 in rows:
        print(f"{command:<42}{label:<9}{p50:>8.0f}{p95:>8.0f}{p50 / base_ms:>8.1f}")
    if args.compare:
        print(f"\nthis = {sys.executable}\ncompare = {args.compare}")


if __name__ == "__main__":
    main()
