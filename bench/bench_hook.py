"""Latency of `mnemo hook prompt` as a harness runs it: a new process per call, JSON on stdin.

Setup: a bound workspace holding 1,000 memories, and 10,000 more in ten other
workspaces (one bank each, as mnemo lays them out), all written through
mnemo's own storage API.  Then each timed call is one `mnemo hook prompt
--harness claude-code` process fed a UserPromptSubmit event, exactly as Claude
Code would run it, next to a bare `python3 -c pass` start for scale.

    .venv/bin/python bench/bench_hook.py [--calls 40] [--keep DIR]

Prints a table of p50/p95/mean/max in milliseconds.  No assertions: this is
a measurement, not a test (the target for the prompt path is p50 < 300 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ["deploy", "release", "build", "cache", "docker", "kubernetes", "migration", "schema", "index", "query", "parser", "lexer", "token", "session", "auth", "login", "oauth", "webhook", "queue", "worker", "retry", "backoff", "timeout", "logging", "metrics", "tracing", "alert", "pager", "staging", "production", "canary", "rollback", "feature", "flag", "config", "yaml", "json", "api", "endpoint", "route", "handler", "middleware", "test", "fixture", "mock", "coverage", "lint", "format", "style", "branch", "merge", "rebase", "review", "ticket", "sprint", "estimate", "frontend", "backend", "database", "postgres", "redis", "kafka", "s3", "bucket", "lambda", "terraform", "module", "variable", "secret", "vault", "certificate", "dns", "proxy", "nginx", "cdn", "latency", "throughput"]

QUERIES = ["how do we deploy a release to production?",
           "where is the database migration schema kept",
           "what retry backoff does the queue worker use",
           "remind me how the oauth login webhook works",
           "which redis cache timeout did we pick"]


def sentence(rng: random.Random, tag: str) -> str:
    words = rng.sample(WORDS, 9)
    return f"[{tag}] we decided to " + " ".join(words) + f" for the {rng.choice(WORDS)} service"


def populate(base: Path, root: Path, own: int, others: int, workspaces: int) -> Path:
    os.environ["MNEMO_DATA_DIR"] = str(base / "data")
    os.environ["MNEMO_CONFIG"] = str(base / "config.yaml")
    os.environ["HOME"] = str(base / "home")
    os.environ.setdefault("MNEMOSYNE_NO_EMBEDDINGS", "1")
    from dsh_mnemo.config import apply_environment, load_settings
    from dsh_mnemo.memory import store as storage
    from dsh_mnemo.memory import targets
    from dsh_mnemo.workspace import binding as workspace

    apply_environment(load_settings())
    rng = random.Random(7)
    repos = []
    for i in range(workspaces + 1):
        repo = root / f"repo{i}"
        (repo / ".git").mkdir(parents=True)
        workspace.bind(repo)
        repos.append(repo)
    settings = load_settings()
    from dsh_mnemo.workspace.context import resolve_memory_context

    plan = [(repos[0], own)] + [(r, others // workspaces) for r in repos[1:]]
    started = time.perf_counter()
    for repo, count in plan:
        ctx = resolve_memory_context(repo, None, settings)
        target = targets.write_target(ctx)
        for n in range(count):
            source = "conversation" if n % 3 else "fact"
            text = sentence(rng, "USER") if source == "conversation" else sentence(rng, "F")[4:]
            storage.remember_at(target, text, source=source, importance=0.5)
    print(f"populated {own} + {others} memories in {time.perf_counter() - started:.0f} s",
          file=sys.stderr)
    return repos[0]


CPU_MS: list[float] = []  # CPU ms of each call of the current measurement


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], stdin: bytes | None, cwd: Path, env: dict[str, str],
          calls: int) -> tuple[list[float], str]:
    """Wall-clock ms per call (and, in CPU_MS, user+sys CPU ms of the child)."""
    samples = []
    last = ""
    for _ in range(calls):
        cpu_before = _children_cpu()
        started = time.perf_counter()
        done = subprocess.run(command, input=stdin, capture_output=True, cwd=cwd, env=env)
        samples.append((time.perf_counter() - started) * 1000)
        CPU_MS.append((_children_cpu() - cpu_before) * 1000)
        last = done.stdout.decode("utf-8", "replace")
    return samples, last


def row(name: str, samples: list[float], cpu: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (f"| {name:<46} | {statistics.median(ordered):7.1f} | {p95:7.1f} | "
            f"{statistics.mean(ordered):7.1f} | {ordered[-1]:7.1f} | "
            f"{statistics.median(cpu):7.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--own", type=int, default=1000)
    parser.add_argument("--others", type=int, default=10_000)
    parser.add_argument("--workspaces", type=int, default=10)
    parser.add_argument("--keep", type=Path, help="reuse/keep this directory")
    args = parser.parse_args()

    base = args.keep or Path(tempfile.mkdtemp(prefix="mnemo-bench-"))
    root = base / "home" / "src"
    marker = base / "populated"
    if marker.exists():
        os.environ.update(MNEMO_DATA_DIR=str(base / "data"), MNEMO_CONFIG=str(base / "config.yaml"),
                          HOME=str(base / "home"))
        repo = root / "repo0"
    else:
        root.mkdir(parents=True, exist_ok=True)
        repo = populate(base, root, args.own, args.others, args.workspaces)
        marker.write_text("ok")
    env = {**os.environ, "MNEMOSYNE_NO_EMBEDDINGS": os.environ.get("MNEMOSYNE_NO_EMBEDDINGS", "1")}
    bindir = Path(sys.executable).parent
    mnemo = str(bindir / "mnemo")
    wrapper = Path(__file__).resolve().parents[1] / "hooks" / "mnemo-hook.sh"
    unbound = base / "home" / "scratch"
    (unbound / ".git").mkdir(parents=True, exist_ok=True)

    def event(cwd: Path, i: int, prompt: str) -> bytes:
        return json.dumps({"session_id": f"bench-{i}", "transcript_path": None, "cwd": str(cwd),
                           "hook_event_name": "UserPromptSubmit", "prompt": prompt}).encode()

    load_before = f"{os.getloadavg()[0]:.2f}"
    results: list[tuple[str, list[float], list[float]]] = []

    def record(name: str, samples: list[float]) -> None:
        results.append((name, samples, list(CPU_MS)))
        CPU_MS.clear()

    # warm the page cache once, outside the measurement
    subprocess.run([mnemo, "hook", "prompt", "--harness", "claude-code"],
                   input=event(repo, 0, QUERIES[0]), capture_output=True, env=env)
    record("python3 -c pass", timed([sys.executable, "-c", "pass"], None, repo, env,
                                    args.calls)[0])
    CPU_MS.clear()
    samples = []
    injected = 0
    for i in range(args.calls):
        s, out = timed([mnemo, "hook", "prompt", "--harness", "claude-code"],
                       event(repo, i, QUERIES[i % len(QUERIES)]), repo, env, 1)
        samples += s
        injected += "memory-data" in out
    record("mnemo hook prompt (bound, 1k + 10k rows)", samples)
    record("  same, through hooks/mnemo-hook.sh", timed(
        ["sh", str(wrapper), "prompt", "claude-code"], event(repo, 999, QUERIES[1]), repo,
        {**env, "MNEMO_BIN": mnemo}, args.calls)[0])
    record("mnemo hook prompt (unbound dir: bind hint)", timed(
        [mnemo, "hook", "prompt", "--harness", "claude-code"], event(unbound, 1, QUERIES[2]),
        unbound, env, args.calls)[0])
    turn_end = []
    for i in range(args.calls):
        # each call stores one pending turn (spooled by the prompt calls above)
        turn_end += timed([mnemo, "hook", "turn-end", "--harness", "claude-code"],
                          json.dumps({"session_id": f"bench-{i}", "cwd": str(repo),
                                      "hook_event_name": "Stop"}).encode(), repo, env, 1)[0]
    record("mnemo hook turn-end (stores the pending turn)", turn_end)

    print(f"\n{args.calls} calls each; workspace {args.own} rows, {args.others} rows in "
          f"{args.workspaces} other workspaces; blocks injected: {injected}/{args.calls}\n")
    print(f"load average before/after: {load_before} / {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} CPUs\n")
    print(f"| {'command':<46} | {'p50 ms':>7} | {'p95 ms':>7} | {'mean':>7} | {'max':>7} "
          f"| {'CPU p50':>7} |")
    print(f"|{'-' * 48}|{'-' * 9}|{'-' * 9}|{'-' * 9}|{'-' * 9}|{'-' * 9}|")
    for name, samples, cpu in results:
        print(row(name, samples, cpu))
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
