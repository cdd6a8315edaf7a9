#!/usr/bin/env python3
"""Benchmark: memory operations in one workspace while others grow.

Prints tables; it is not a test and asserts nothing about speed.

  python bench/bench_memory.py              # 10k and 100k rows in other workspaces
  python bench/bench_memory.py --skip-100k  # only the 10k load (about a minute)

What it measures (no embeddings, LLM off, as mnemo runs by default):

1. remember and recall latency (p50/p95, in process, through the same core
   functions the commands call: context resolution + storage) in a bound
   workspace of 1,000 rows, while other workspaces hold 10,000 and 100,000
   rows in total (10 and 100 banks of 1,000 rows);
2. own-recall rate under the same load: 50 planted memories of the
   workspace, each queried by its topic, found in the top 5?  Every topic is
   also written ~20 times into every other workspace, so the competition is
   strong.  For comparison the same rows are put in ONE database (the DSH plugin's
   shared layout) and recalled through upstream directly;
3. `mnemo sleep --all --dry-run` over 200 workspaces with nothing due
   (wall time of the console script, subprocess).

Fixtures: the measured workspace is written row by row through mnemo's
storage (the real write path).  One 1,000-row bank of "other" rows is
written through upstream once and then copied per workspace with its
namespace rewritten in SQL (the full-text index keys on content and id, which
do not change).  The shared-layout database is filled by INSERT ... SELECT
so upstream's own triggers index every row.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOPIC_A = ["kafka", "redis", "nginx", "celery", "postgres", "grafana", "vault", "terraform",
           "webpack", "pytest", "sentry", "stripe", "docker", "ansible", "elastic", "rabbit",
           "airflow", "sqlite", "jenkins", "kibana", "consul", "envoy", "helm", "istio", "jaeger"]
TOPIC_B = ["retention", "eviction", "timeouts", "concurrency", "replication", "dashboards",
           "rotation", "modules", "chunks", "fixtures", "sampling", "webhooks", "layers",
           "inventory", "sharding", "prefetch", "backfill", "pragmas", "agents", "alerts",
           "watches", "listeners", "charts", "sidecars", "spans"]
FILLER = ["the", "team", "decided", "to", "keep", "notes", "about", "design", "review",
          "meeting", "follow", "up", "later", "refactor", "naming", "module", "boundary",
          "owner", "ticket", "sprint", "estimate", "budget", "roadmap", "customer", "feedback",
          "release", "branch", "merge", "conflict", "style", "guide", "lint", "format", "docs"]
N_TOPICS = 50
PLANTED = 50
OWN_ROWS = 1000
OTHER_BANK_ROWS = 1000
TOP_K = 5


def topics() -> list[str]:
    rng = random.Random(1)
    pairs = [f"{a} {b}" for a in TOPIC_A for b in TOPIC_B]
    return rng.sample(pairs, N_TOPICS)


def filler(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(FILLER) for _ in range(n))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def ms(values: list[float]) -> str:
    return f"{pct(values, 0.5) * 1000:7.1f} {pct(values, 0.95) * 1000:7.1f}"


class Bench:
    def __init__(self, work: Path, samples: int) -> None:
        self.work = work
        self.samples = samples
        self.topics = topics()
        self.template: Path | None = None
        self.mnemo = shutil.which("mnemo", path=str(Path(sys.executable).parent)) or "mnemo"

    # ── environment ──
    def use(self, data: Path) -> None:
        """Point mnemo (and upstream) at `data`, as `settings()` does for a command."""
        os.environ["MNEMO_DATA_DIR"] = str(data)
        os.environ["MNEMO_CONFIG"] = str(self.work / "config.yaml")
        from dsh_mnemo.cli.common import settings
        from dsh_mnemo.memory import driver

        driver.reset_cache()
        self.settings = settings()

    # ── fixtures ──
    def build_template(self) -> Path:
        """1,000 'other workspace' rows written through upstream once."""
        if self.template:
            return self.template
        path = self.work / "template" / "mnemosyne.db"
        if not path.exists():
            from mnemosyne.core.memory import Mnemosyne

            path.parent.mkdir(parents=True, exist_ok=True)
            rng = random.Random(2)
            mem = Mnemosyne(session_id="template", db_path=path)
            for i in range(OTHER_BANK_ROWS):
                topic = self.topics[i % N_TOPICS]
                mem.remember(f"note {i}: the {topic} setup, {topic} again, {filler(rng, 6)}",
                             source="conversation", importance=0.6)
            mem.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            mem.conn.close()
        self.template = path
        return path

    def other_banks(self, data: Path, count: int) -> None:
        """`count` banks of 1,000 rows each, copies of the template, own namespace each."""
        template = self.build_template()
        for n in range(count):
            digest = f"{n:064x}"
            bank = data / "banks" / f"ws-{digest[:48]}" / "mnemosyne.db"
            bank.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(template, bank)
            conn = sqlite3.connect(bank)
            ns = f"dsh_v2_workspace_{digest}"
            for table in ("working_memory", "memories"):
                conn.execute(f"UPDATE {table} SET session_id = ?", (ns,))
            conn.execute("UPDATE working_memory SET channel_id = ?", (ns,))
            conn.commit()
            conn.close()

    def measured_workspace(self, data: Path) -> tuple[Path, list[tuple[str, str]]]:
        """A bound repo with 1,000 rows: 950 project notes and 50 planted memories."""
        from dsh_mnemo.memory import store as storage
        from dsh_mnemo.memory import targets
        from dsh_mnemo.workspace import binding as workspace
        from dsh_mnemo.workspace.context import resolve_memory_context

        repo = data.parent / "home" / "measured"
        repo.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        workspace.bind(repo)
        ctx = resolve_memory_context(repo, None, self.settings)
        target = targets.write_target(ctx)
        rng = random.Random(3)
        planted: list[tuple[str, str]] = []
        every = OWN_ROWS // PLANTED
        for i in range(OWN_ROWS):
            if i % every == 0 and len(planted) < PLANTED:
                topic = self.topics[len(planted)]
                text = f"In this project the {topic} decision: {filler(rng, 5)} (plant {i})"
                planted.append((storage.remember_at(target, text).id or "", topic))
            else:
                word = rng.choice(TOPIC_A + TOPIC_B) if rng.random() < 0.3 else ""
                storage.remember_at(target, f"project note {i}: {word} {filler(rng, 8)}")
        # A small global bank, as users have.
        glob = targets.GLOBAL_TARGET
        for i in range(50):
            storage.remember_at(glob, f"global preference {i}: {filler(rng, 6)}")
        return repo, planted

    # ── measurements ──
    def latencies(self, repo: Path, planted: list[tuple[str, str]]) -> dict[str, object]:
        from dsh_mnemo.commands import memory

        rng = random.Random(4)
        memory.recall(self.settings, "warm up", cwd=repo)  # open the banks once
        found = sum(any(m.id == pid for m in memory.recall(self.settings, topic, top_k=TOP_K,
                                                            cwd=repo).data.results)
                    for pid, topic in planted)
        recall_t = []
        for _ in range(self.samples):
            topic = rng.choice(self.topics)
            start = time.perf_counter()
            memory.recall(self.settings, topic, top_k=TOP_K, cwd=repo)
            recall_t.append(time.perf_counter() - start)
        remember_t = []
        for i in range(self.samples):
            text = f"bench memory {i}: {filler(rng, 10)}"
            start = time.perf_counter()
            memory.remember(self.settings, text, cwd=repo)
            remember_t.append(time.perf_counter() - start)
        cli_t = []
        for topic in self.topics[:10]:
            start = time.perf_counter()
            subprocess.run([self.mnemo, "recall", topic], cwd=repo, check=True,
                           capture_output=True)
            cli_t.append(time.perf_counter() - start)
        return {"recall": recall_t, "remember": remember_t, "cli": cli_t,
                "own": found / len(planted)}

    def shared_layout(self, data: Path, repo_db: Path, others: int) -> dict[str, object]:
        """The same rows in ONE database, recalled through upstream directly."""
        from dsh_mnemo.memory import driver

        shared = data / "shared-layout.db"
        driver.init_bank(shared)
        conn = sqlite3.connect(shared)
        cols = [r[1] for r in conn.execute("PRAGMA table_info(working_memory)")]
        conn.execute("ATTACH ? AS src", (str(repo_db),))
        names = ",".join(cols)
        conn.execute(f"INSERT INTO working_memory ({names}) SELECT {names} FROM src.working_memory")
        conn.commit()
        conn.execute("DETACH src")
        conn.execute("ATTACH ? AS src", (str(self.build_template()),))
        picked = ",".join("lower(hex(randomblob(8)))" if c == "id" else
                          "?" if c in ("session_id", "channel_id") else c for c in cols)
        for n in range(others):
            ns = f"dsh_v2_workspace_{n:064x}"
            conn.execute(f"INSERT INTO working_memory ({names}) SELECT {picked} "
                         f"FROM src.working_memory", (ns, ns))
        conn.commit()
        conn.close()
        own_ns = sqlite3.connect(repo_db).execute(
            "SELECT session_id FROM working_memory LIMIT 1").fetchone()[0]
        return {"db": shared, "ns": own_ns}

    def shared_recall(self, shared: dict[str, object],
                      planted: list[tuple[str, str]]) -> dict[str, object]:
        from mnemosyne.core.memory import Mnemosyne

        mem = Mnemosyne(session_id=str(shared["ns"]), db_path=Path(str(shared["db"])))
        found = 0
        times = []
        for pid, topic in planted:
            start = time.perf_counter()
            rows = mem.recall(topic, top_k=TOP_K)
            times.append(time.perf_counter() - start)
            found += any(r["id"] == pid for r in rows)
        found100 = sum(any(r["id"] == pid for r in mem.recall(topic, top_k=100))
                       for pid, topic in planted)
        mem.conn.close()
        return {"own": found / len(planted), "own100": found100 / len(planted),
                "recall": times}

    def sleep_dry_run(self, data: Path, banks: int) -> dict[str, object]:
        """`mnemo sleep --all --dry-run` over `banks` workspaces with nothing due."""
        from mnemosyne.core.memory import Mnemosyne

        small = self.work / "small-template" / "mnemosyne.db"
        if not small.exists():
            small.parent.mkdir(parents=True, exist_ok=True)
            mem = Mnemosyne(session_id="template", db_path=small)
            for i in range(20):
                mem.remember(f"a fresh project note number {i} about {self.topics[i]}")
            mem.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            mem.conn.close()
        for n in range(banks):
            bank = data / "banks" / f"ws-{n:048x}" / "mnemosyne.db"
            bank.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(small, bank)
        env = {**os.environ, "MNEMO_DATA_DIR": str(data)}
        times = []
        out = ""
        for _ in range(5):
            start = time.perf_counter()
            proc = subprocess.run([self.mnemo, "sleep", "--all", "--dry-run", "--json"],
                                  env=env, cwd=self.work, check=True, capture_output=True,
                                  text=True)
            times.append(time.perf_counter() - start)
            out = proc.stdout
        import json

        report = json.loads(out)
        baseline = []
        for _ in range(5):
            start = time.perf_counter()
            subprocess.run([self.mnemo, "--version"], env=env, check=True, capture_output=True)
            baseline.append(time.perf_counter() - start)
        return {"times": times, "banks": report["banks_checked"], "due": len(report["results"]),
                "baseline": baseline}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-100k", action="store_true", help="Only the 10k load.")
    parser.add_argument("--no-shared", action="store_true",
                        help="Skip the shared-layout comparison.")
    parser.add_argument("--samples", type=int, default=200, help="Timed calls per operation.")
    parser.add_argument("--workdir", type=Path, help="Keep fixtures here (default: a temp dir).")
    args = parser.parse_args()

    os.environ.setdefault("MNEMOSYNE_NO_EMBEDDINGS", "1")
    os.environ["MNEMOSYNE_LLM_ENABLED"] = "false"
    work = args.workdir or Path(tempfile.mkdtemp(prefix="mnemo-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["HOME"] = str(work / "home")
    (work / "home").mkdir(exist_ok=True)
    # Upstream creates its default database at import: keep it in the work dir.
    os.environ["MNEMOSYNE_DATA_DIR"] = str(work / "import-default")
    bench = Bench(work, args.samples)

    loads = [("10k", 10)] + ([] if args.skip_100k else [("100k", 100)])
    rows = []
    try:
        for label, banks in loads:
            data = work / f"data-{label}"
            if data.exists():
                shutil.rmtree(data)
            bench.use(data)
            t0 = time.perf_counter()
            bench.other_banks(data, banks)
            repo, planted = bench.measured_workspace(data)
            built = time.perf_counter() - t0
            print(f"[{label}] fixtures built in {built:.1f}s "
                  f"({banks} other banks x {OTHER_BANK_ROWS} rows)", file=sys.stderr)
            result = bench.latencies(repo, planted)
            shared = None
            if not args.no_shared:
                t0 = time.perf_counter()
                from dsh_mnemo.memory import targets
                from dsh_mnemo.workspace import context

                ctx = context.resolve_memory_context(repo, None, bench.settings)
                layout = bench.shared_layout(data, targets.read_target(ctx).db_path(), banks)
                print(f"[{label}] shared-layout db built in {time.perf_counter() - t0:.1f}s",
                      file=sys.stderr)
                shared = bench.shared_recall(layout, planted)
            rows.append((label, banks, result, shared))

        sleep_data = work / "data-sleep"
        if sleep_data.exists():
            shutil.rmtree(sleep_data)
        bench.use(sleep_data)
        sleep = bench.sleep_dry_run(sleep_data, 200)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)

    print()
    print("Per-workspace banks (mnemo): one workspace of 1,000 rows (+50 global), "
          f"top_k={TOP_K}, {args.samples} samples")
    print(f"{'others':>7} {'banks':>5} | {'remember ms':>15} | {'recall ms':>15} | "
          f"{'own-recall':>10} | {'mnemo recall (process) ms':>25}")
    print(f"{'':>7} {'':>5} | {'p50':>7} {'p95':>7} | {'p50':>7} {'p95':>7} | "
          f"{'@5':>10} | {'p50':>12} {'p95':>12}")
    for label, banks, r, _ in rows:
        cli = r["cli"]
        print(f"{label:>7} {banks:>5} | {ms(r['remember'])} | {ms(r['recall'])} | "
              f"{r['own']:>10.0%} | {pct(cli, .5) * 1000:>12.0f} {pct(cli, .95) * 1000:>12.0f}")
    if any(s for *_, s in rows):
        print()
        print("For comparison, the same rows in ONE database (the DSH plugin's shared layout), "
              "upstream recall directly:")
        print(f"{'others':>7} | {'recall ms p50 p95':>17} | {'own-recall @5':>13} | "
              f"{'own-recall @100':>15}")
        for label, _, _, s in rows:
            if s:
                print(f"{label:>7} | {ms(s['recall']):>17} | {s['own']:>13.0%} | "
                      f"{s['own100']:>15.0%}")
    print()
    print("mnemo sleep --all --dry-run (console script, 5 runs)")
    print(f"{'banks':>6} {'due':>4} | {'wall s p50':>10} {'max':>6} | {'mnemo --version p50':>19}")
    print(f"{sleep['banks']:>6} {sleep['due']:>4} | {statistics.median(sleep['times']):>10.2f} "
          f"{max(sleep['times']):>6.2f} | {statistics.median(sleep['baseline']):>19.2f}")


if __name__ == "__main__":
    main()
