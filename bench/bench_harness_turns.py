"""Wall time of one non-interactive turn in each real harness, with and without mnemo.

Each harness runs against the fake model server of tests/real_harness (the
model answers at once, so the figures are the harness's own start-up and turn
overhead plus what mnemo's hooks add).  Setup per harness: a temporary HOME, a
bound repository holding one memory, the harness pointed at the fake server;
then `--runs` turns without mnemo's hooks, `mnemo hooks install --harness
NAME` (plus the trust step of docs/harnesses-real.md), and `--runs` turns
with them.  The first run of each kind is a warm-up and is not counted.

    .venv/bin/python bench/bench_harness_turns.py [--runs 5] [--harness codex ...]

Needs the harness CLIs (scripts/install_harnesses.sh, run here).  Prints a
table in seconds; asserts nothing.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.real_harness.fake_model import FakeModel  # noqa: E402
from tests.real_harness.harnesses import NAMES, SETUPS  # noqa: E402

FACT = "The zephyr-quokka deploy key rotates every Tuesday at 04:00 UTC."
PROMPT = "When does the zephyr-quokka deploy key rotate?"


def mnemo_bin() -> str:
    beside = Path(sys.executable).with_name("mnemo")
    return str(beside) if beside.exists() else (shutil.which("mnemo") or "mnemo")


def timed_runs(name: str, harness_bin: Path, model: FakeModel, home: Path, repo: Path,
               runs: int) -> list[float]:
    setup = SETUPS[name]
    env = setup.env(home, harness_bin, model.url)
    times = []
    for _ in range(runs + 1):
        started = time.perf_counter()
        done = subprocess.run(setup.command(harness_bin, PROMPT), cwd=repo, env=env,
                              capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"{name} failed: {done.stderr[-1500:]}")
    return times[1:]


def bench(name: str, harness_bin: Path, runs: int) -> tuple[list[float], list[float], bool]:
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        root = Path(tmp)
        home = root / "home"
        repo = home / "src" / "app"
        repo.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        os.environ.update(HOME=str(home), MNEMO_DATA_DIR=str(root / "data"),
                          MNEMOSYNE_DATA_DIR=str(root / "data"),
                          MNEMO_CONFIG=str(root / "config" / "config.yaml"),
                          MNEMOSYNE_NO_EMBEDDINGS="1", MNEMOSYNE_LLM_ENABLED="false",
                          HERMES_HOME=str(root / "hermes"))
        mnemo = mnemo_bin()
        subprocess.run([mnemo, "bind"], cwd=repo, check=True, capture_output=True)
        subprocess.run([mnemo, "remember", FACT], cwd=repo, check=True, capture_output=True)
        setup = SETUPS[name]
        with FakeModel(reply="Noted, thanks.") as model:
            setup.prepare(home, model.url)
            setup.trust(home, [repo])
            without = timed_runs(name, harness_bin, model, home, repo, runs)
            subprocess.run([mnemo, "hooks", "install", "--harness", name,
                            *setup.install_args()], cwd=home, check=True, capture_output=True)
            setup.trust(home, [repo])
            model.clear()
            with_hooks = timed_runs(name, harness_bin, model, home, repo, runs)
            injected = model.saw(FACT)
        return without, with_hooks, injected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--harness", action="append", choices=NAMES)
    args = parser.parse_args()
    done = subprocess.run(["bash", str(REPO / "scripts" / "install_harnesses.sh")],
                          capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        raise SystemExit(f"harness CLIs unavailable: {done.stderr.strip()}")
    harness_bin = Path(done.stdout.strip().splitlines()[-1])
    print(f"{'harness':12} {'without mnemo (median / min-max)':34} "
          f"{'with mnemo (median / min-max)':32} {'added':>7}  memory injected")
    for name in args.harness or NAMES:
        without, with_hooks, injected = bench(name, harness_bin, args.runs)

        def cell(values: list[float]) -> str:
            return f"{statistics.median(values):.2f} s / {min(values):.2f}-{max(values):.2f}"

        added = statistics.median(with_hooks) - statistics.median(without)
        print(f"{name:12} {cell(without):34} {cell(with_hooks):32} {added:+6.2f}s  "
              f"{'yes' if injected else 'NO'}")


if __name__ == "__main__":
    main()
