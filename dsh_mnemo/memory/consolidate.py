"""Consolidation ("sleep"): one namespace at a time, under a lock.

Upstream's `sleep_all_sessions` runs a cross-session dedup that can delete
one session's rows in favour of another's, so "sleep everything" is a loop
over namespaces that have due rows, each consolidated with the per-session
`sleep()`.  A lock file per namespace keeps cron and hooks from consolidating
the same namespace at once.

Upstream writes the summaries itself, from the rows it consolidates; a row
stored before mnemo scrubbed every write path (or moved by an older
migration) can carry a secret into a summary.  So, still under the lock, the
summaries and consolidation-log previews a sleep wrote are scrubbed like a
`remember` (`scrub.policy: redact`), and when one held a secret the
full-text indexes are merged and the WAL checkpointed, as `forget` does, so
the old words do not stay in the file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .. import paths
from ..errors import BusyError, MnemoError
from ..fsutil import file_lock, release_lock, sha256_hex, try_lock
from ..record import field, record
from ..report import Progress
from ..workspace.context import MemoryContext
from . import banks, driver
from .targets import Target, bank_target, read_target


@record
class SleepResult:
    bank: str
    namespace: str
    status: str  # "consolidated" | "no_op" | "dry_run" | "skipped-locked" | "error"
    due: int = 0
    items_consolidated: int = 0
    summaries_created: int = 0
    method: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@record
class SleepReport:
    dry_run: bool
    force: bool
    results: list[SleepResult]
    banks_checked: int = 0

    @property
    def items_consolidated(self) -> int:
        return sum(r.items_consolidated for r in self.results)


def lock_path(target: Target, base: Path | None = None) -> Path:
    digest = sha256_hex(f"{target.bank}\0{target.namespace}".encode())[:32]
    return paths.locks_dir(base) / f"sleep-{digest}.lock"


def consolidate(target: Target, *, base: Path | None = None, dry_run: bool = False,
                force: bool = False, wait: float | None = 30.0) -> SleepResult:
    """Consolidate one namespace; `wait=None` skips (instead of waiting) when locked."""
    if not target.db_path(base).exists():
        # Nothing to consolidate, and opening upstream would create the bank.
        return SleepResult(bank=target.bank, namespace=target.namespace, status="no_op")
    due = banks.due_count(target.bank, target.namespace, base)
    if not due and not force:
        return SleepResult(bank=target.bank, namespace=target.namespace, status="no_op")
    lock = lock_path(target, base)
    if wait is None:
        fd = try_lock(lock)
        if fd is None:
            return SleepResult(bank=target.bank, namespace=target.namespace,
                               status="skipped-locked", due=due)
        try:
            return _sleep_locked(target, base, dry_run, force, due)
        finally:
            release_lock(fd)
    with file_lock(lock, timeout=wait, what="consolidation lock"):
        return _sleep_locked(target, base, dry_run, force, due)


def _sleep_locked(target: Target, base: Path | None, dry_run: bool, force: bool,
                  due: int) -> SleepResult:
    total = SleepResult(bank=target.bank, namespace=target.namespace,
                        status="dry_run" if dry_run else "no_op", due=due)
    marks = None if dry_run else _written_marks(target, base)
    # Upstream consolidates at most MNEMOSYNE_SLEEP_BATCH rows per call; loop
    # until nothing is due so a large backlog never stays exposed to the trim.
    for _ in range(1000):
        outcome = driver.sleep(target, dry_run=dry_run, force=force, base=base)
        if outcome.get("status") == "no_op":
            break
        items = int(outcome.get("items_consolidated") or 0)
        total.items_consolidated += items
        total.summaries_created += int(outcome.get("summaries_created") or 0)
        total.method = outcome.get("method") or total.method
        total.detail = {k: v for k, v in outcome.items()
                        if isinstance(v, (str, int, float, bool)) or v is None}
        if dry_run or items == 0:
            break
        total.status = "consolidated"
    if marks is not None and total.status == "consolidated":
        _scrub_written(target, base, marks)
    return total


# What a sleep writes text into: (table, its row number column, the text column).
_SUMMARY_COLUMNS = (("episodic_memory", "rowid", "content"),
                    ("consolidation_log", "id", "summary_preview"))


def _written_marks(target: Target, base: Path | None) -> dict[str, int]:
    """The highest row number of each summary table before a sleep writes."""
    conn = driver.instance(target, base).conn
    marks = {}
    with driver.translate_sqlite_errors(target.db_path(base)):
        for table, key, _ in _SUMMARY_COLUMNS:
            try:
                marks[table] = int(conn.execute(
                    f"SELECT coalesce(max({key}), 0) FROM {table}").fetchone()[0])
            except sqlite3.OperationalError:
                continue  # no such table in this upstream
    return marks


def _scrub_written(target: Target, base: Path | None, marks: dict[str, int]) -> int:
    """Redact secrets in the rows a sleep wrote (past `marks`); how many held one."""
    from ..config import load_settings
    from ..errors import ConfigError
    from .scrub import scrub

    try:
        policy = load_settings()["scrub.policy"]
    except ConfigError:
        policy = "redact"
    if policy != "redact":
        return 0  # `warn` and `off` store secrets, as remember does
    conn = driver.instance(target, base).conn
    with driver.translate_sqlite_errors(target.db_path(base)):
        updates = []
        for table, key, column in _SUMMARY_COLUMNS:
            if table not in marks:
                continue
            for row, text in conn.execute(
                    f"SELECT {key}, {column} FROM {table} WHERE {key} > ?",
                    (marks[table],)).fetchall():
                result = scrub(text) if isinstance(text, str) and text else None
                if result is not None and result.found:
                    updates.append((table, key, column, result.text, row))
        if not updates:
            return 0
        conn.execute("PRAGMA secure_delete = ON")  # the old text's pages are overwritten
        for table, key, column, text, row in updates:
            conn.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (text, row))
        conn.commit()
        driver._purge_freed_text(conn)  # full-text entries merged away, WAL checkpointed
    return len(updates)


def consolidate_if_due(bank: str, namespace: str, base: Path | None = None) -> SleepResult:
    """For hooks: consolidate a namespace only if due, never waiting for a lock."""
    return consolidate(bank_target(bank, namespace), base=base, wait=None)


def sleep_context(ctx: MemoryContext, *, dry_run: bool = False, force: bool = False,
                  base: Path | None = None) -> SleepReport:
    target = read_target(ctx)
    return SleepReport(dry_run=dry_run, force=force, banks_checked=1,
                       results=[consolidate(target, base=base, dry_run=dry_run, force=force)])


def sleep_all(*, dry_run: bool = False, force: bool = False, base: Path | None = None,
              progress: Progress | None = None) -> SleepReport:
    """Every namespace of every bank that has due rows (`force`: any unconsolidated)."""
    names = banks.bank_names(base)
    plan: list[tuple[Target, int]] = []
    failed: list[SleepResult] = []
    for bank in names:
        try:
            if force:
                due = {s.namespace: s.working_unconsolidated
                       for s in banks.namespace_stats(bank, base=base).values()
                       if s.working_unconsolidated}
            else:
                with banks.translate_sqlite_errors(paths.bank_db_path(bank, base)):
                    due = banks.due_namespaces(bank, base)
        except MnemoError as exc:
            # One damaged bank must not stop cron from consolidating the others.
            failed.append(SleepResult(bank=bank, namespace="", status="error",
                                      detail={"error": exc.message, "hint": exc.hint}))
            continue
        for namespace, count in sorted(due.items()):
            plan.append((bank_target(bank, namespace), count))
    results: list[SleepResult] = []
    for done, (target, count) in enumerate(plan):
        if progress:
            progress(f"{target.bank} {target.namespace[:28]}", done, len(plan))
        if dry_run:
            results.append(SleepResult(bank=target.bank, namespace=target.namespace,
                                       status="dry_run", due=count))
            continue
        try:
            results.append(consolidate(target, base=base, force=force, wait=None))
        except BusyError:
            results.append(SleepResult(bank=target.bank, namespace=target.namespace,
                                       status="skipped-locked", due=count))
        except MnemoError as exc:
            results.append(SleepResult(bank=target.bank, namespace=target.namespace,
                                       status="error", due=count,
                                       detail={"error": exc.message, "hint": exc.hint}))
    if progress:
        progress("done", len(plan), len(plan))
    return SleepReport(dry_run=dry_run, force=force, results=failed + results,
                       banks_checked=len(names))
