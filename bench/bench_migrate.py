"""Migration speed: backup, run and revert of 10,000 (and 100,000) legacy DSH rows.

The data is shaped by the real upstream package: a template of legacy
`dsh_<sid>` sessions is written with `Mnemosyne.remember` (plus MEMORIA,
annotations, gists, graph edges, a consolidation) and then cloned in SQL,
with every key and memory reference suffixed, until the requested number of
working-memory rows exists.  Upstream's triggers index the clones in FTS.

    .venv/bin/python bench/bench_migrate.py            # 10,000 rows
    .venv/bin/python bench/bench_migrate.py --large    # also 100,000 rows

Prints one table; rows/s counts legacy memories (working_memory rows) and,
in brackets, every table row moved with them.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

TEMPLATE_SESSIONS = 10
TEMPLATE_PER_SESSION = 20


def _prepare_env(root: Path) -> None:
    data = root / "data"
    os.environ["MNEMO_DATA_DIR"] = str(data)
    os.environ["MNEMO_CONFIG"] = str(root / "config.yaml")
    os.environ["HOME"] = str(root / "home")
    os.environ["MNEMOSYNE_NO_EMBEDDINGS"] = "1"
    from dsh_mnemo.config import apply_environment, load_settings

    apply_environment(load_settings(), data)


def _template(db: Path) -> None:
    from mnemosyne.core.memory import Mnemosyne

    texts = ("I prefer tabs over spaces in the {s} service, note {i}.",
             "We decided to deploy {s} with make release on 2026-11-02, item {i}.",
             "Always run the linter before committing to {s}. Alice requires CI, {i}.",
             "Mnemo is a memory tool and Berlin has an office for {s} {i}.")
    for s in range(TEMPLATE_SESSIONS):
        mem = Mnemosyne(session_id=f"dsh_bench{s}", db_path=db)
        for i in range(TEMPLATE_PER_SESSION):
            mem.remember(texts[i % len(texts)].format(s=s, i=i), extract_entities=True)
        mem.scratchpad_write(f"scratch {s}")
        if s % 2 == 0:
            mem.sleep(force=True)


def _clone(db: Path, copies: int) -> None:
    """Append `copies` suffixed copies of every legacy row (and what hangs off it)."""
    from dsh_mnemo.migrate.schema import SESSION_COLUMN, discover, quote

    conn = sqlite3.connect(str(db), isolation_level=None)
    conn.execute("PRAGMA busy_timeout=10000")
    schema = discover(conn)
    refs_text = {"source", "target"}
    conn.execute("BEGIN IMMEDIATE")
    for k in range(1, copies + 1):
        suffix = f"-c{k}"
        for table in schema.ordered():
            names = [c for c in table.names if c != table.surrogate]
            exprs = []
            for col in names:
                if col == table.key and not table.key_is_text:
                    exprs.append("NULL")
                elif col == table.key or col == table.ref_column or (
                        table.kind == "edge" and col in refs_text):
                    exprs.append(f"{quote(col)} || '{suffix}'")
                elif col in (SESSION_COLUMN, "channel_id"):
                    exprs.append(f"CASE WHEN {quote(col)} GLOB 'dsh_bench*' "
                                 f"THEN {quote(col)} || '{suffix}' ELSE {quote(col)} END")
                else:
                    exprs.append(quote(col))
            where = ("WHERE session_id GLOB 'dsh_bench*' AND session_id NOT GLOB '*-c*'"
                     if table.has(SESSION_COLUMN) else
                     f"WHERE {quote(table.ref_column or table.key)} NOT GLOB '*-c*'")
            if table.name == "facts":
                where = f"WHERE {quote(table.ref_column or 'fact_id')} NOT GLOB '*-c*'"
            conn.execute(f"INSERT INTO {quote(table.name)} ({', '.join(map(quote, names))}) "
                         f"SELECT {', '.join(exprs)} FROM {quote(table.name)} {where}")
    conn.execute("COMMIT")
    conn.close()


def _count(db: Path, sql: str) -> int:
    conn = sqlite3.connect(str(db))
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def bench(rows: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-") as tmp:
        root = Path(tmp)
        _prepare_env(root)
        (root / "home" / "repo").mkdir(parents=True)
        db = root / "data" / "mnemosyne.db"
        db.parent.mkdir(parents=True)
        _template(db)
        per_copy = _count(db, "SELECT count(*) FROM working_memory")
        _clone(db, max(0, -(-rows // per_copy) - 1))
        legacy = _count(db, "SELECT count(*) FROM working_memory")

        from dsh_mnemo.migrate import Selection, plan_migration, revert_migration, run_migration
        from dsh_mnemo.workspace import binding as workspace

        os.chdir(root / "home" / "repo")
        workspace.bind(root / "home" / "repo")
        size_mb = db.stat().st_size / 1e6
        t0 = time.perf_counter()
        plan = plan_migration(Selection(legacy_dsh=True))
        t_plan = time.perf_counter() - t0
        marks: dict[str, float] = {}

        def progress(phase: str, done: int, total: int) -> None:
            marks.setdefault(phase, time.perf_counter())
            marks[f"{phase}-end"] = time.perf_counter()

        t0 = time.perf_counter()
        result = run_migration(Selection(legacy_dsh=True), progress=progress)
        t_run = time.perf_counter() - t0
        t_backup = marks["backup-end"] - marks["backup"]
        moved = sum(sum(g.moved.values()) for g in result.groups)
        journal_mb = sum(p.stat().st_size for p in (root / "data" / "migrations").iterdir()) / 1e6
        t0 = time.perf_counter()
        revert_migration(result.journal)
        t_revert = time.perf_counter() - t0
        assert _count(db, "SELECT count(*) FROM working_memory") == legacy
        return {"rows": legacy, "all_rows": moved, "db_mb": size_mb, "plan": t_plan,
                "backup": t_backup, "run": t_run, "journal_mb": journal_mb,
                "revert": t_revert, "pending": plan.pending}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="also measure 100,000 rows")
    parser.add_argument("--rows", type=int, nargs="*", help="row counts to measure")
    args = parser.parse_args()
    sizes = args.rows or ([10_000, 100_000] if args.large else [10_000])
    results = [bench(n) for n in sizes]
    header = (f"{'legacy rows':>11} {'all rows':>9} {'db MB':>6} {'plan s':>7} "
              f"{'backup s':>8} {'run s':>7} {'rows/s':>16} {'revert s':>8} {'rows/s':>16} "
              f"{'journal MB':>10}")
    print(header)
    print("-" * len(header))
    for r in results:
        run_rate = f"{r['rows'] / r['run']:,.0f} ({r['all_rows'] / r['run']:,.0f})"
        rev_rate = f"{r['rows'] / r['revert']:,.0f} ({r['all_rows'] / r['revert']:,.0f})"
        print(f"{r['rows']:>11,} {r['all_rows']:>9,} {r['db_mb']:>6.1f} {r['plan']:>7.2f} "
              f"{r['backup']:>8.2f} {r['run']:>7.2f} {run_rate:>16} {r['revert']:>8.2f} "
              f"{rev_rate:>16} {r['journal_mb']:>10.1f}")
    print("run = backup of both databases + copy + verify + delete; rows/s = legacy "
          "memories (every table row) per second.")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
