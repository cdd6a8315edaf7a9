"""Consolidation ("sleep"): one namespace at a time, under a lock.

Upstream's `sleep_all_sessions` runs a cross-session dedup that can delete
one session's rows in favour of another's, so "sleep everything" is a loop
over namespaces that have due rows, each consolidated with the per-session
`sleep()`.  A lock file per namespace keeps cron and hooks from consolidating
the same namespace at once.

Upstream writes the summaries itself, from the rows it consolidates; a row
stored before mnemo scrubbed every write path (or moved by an older
migration) can carry a secret into a summary.  So, still under the lock,
every text a sleep wrote is scrubbed like a `remember` (`scrub.policy:
redact`): not only the summary (`episodic_memory`) and the consolidation-log
preview, but what upstream derives from the summary (its gist, the facts,
consolidated facts and graph text extracted from it), the episodes it
degraded, and the model-refresh proposals it remembers with their derived
rows (`_SLEEP_COLUMNS`).  Their full-text entries follow (through upstream's
triggers, or by hand for an index without an update trigger, `fts_facts`),
and when one held a secret the full-text indexes are merged and the WAL
checkpointed, as `forget` does, so the old words do not stay in the file.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import datetime
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
    started = datetime.now().isoformat()  # upstream stamps `degraded_at` in local time
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
        _scrub_written(target, base, marks, started)
    return total


# Every text a sleep writes: (table, its text columns, the column naming the
# memory a row was derived from).  Upstream's sleep inserts the summary
# (episodic_memory) and its consolidation-log line, extracts a gist
# (`gist_<summary id>`), facts, graph edges and consolidated facts from the
# summary (`_ingest_graph_and_veracity`), rewrites the text of episodes it
# degrades, and `remember`s model-refresh proposals (working memory with its
# annotations and MEMORIA rows).  Columns a table lacks are skipped.
_SLEEP_COLUMNS: tuple[tuple[str, tuple[str, ...], str | None], ...] = (
    ("episodic_memory", ("content",), None),
    ("consolidation_log", ("summary_preview",), None),
    ("gists", ("text", "location"), "memory_id"),
    ("facts", ("subject", "object"), "source_msg_id"),
    ("consolidated_facts", ("subject", "object"), None),
    ("working_memory", ("content",), None),
    ("annotations", ("value",), "memory_id"),
    ("memoria_facts", ("value", "context_snippet"), "source_memory_id"),
    ("memoria_instructions", ("instruction", "context_snippet"), "source_memory_id"),
    ("memoria_preferences", ("preference", "evolution", "context_snippet"),
     "source_memory_id"),
    ("memoria_timelines", ("description",), "source_memory_id"),
    ("memoria_kg", ("subject", "object"), "source_memory_id"),
)


_q = banks.quote_name


def _written_marks(target: Target, base: Path | None) -> dict[str, int]:
    """The highest row number of each table a sleep writes text into, before it writes."""
    conn = driver.instance(target, base).conn
    marks = {}
    with driver.translate_sqlite_errors(target.db_path(base)):
        for table, _, _ in _SLEEP_COLUMNS:
            try:
                marks[table] = int(conn.execute(
                    f"SELECT coalesce(max(rowid), 0) FROM {_q(table)}").fetchone()[0])
            except sqlite3.OperationalError:
                continue  # no such table in this upstream
    return marks


def _written_rows(conn: sqlite3.Connection, marks: dict[str, int], started: str | None
                  ) -> list[tuple[str, list[str], int, list[Any]]]:
    """(table, text columns, rowid, their values) of every row a sleep wrote.

    A row is new past its table's mark, or points at a memory that is (a gist
    `INSERT OR REPLACE`d over an older row can take a lower row number); an
    episode is rewritten when upstream degraded it during this sleep.
    """
    new_ids: list[str] = []
    for table in ("episodic_memory", "working_memory"):
        if table in marks:
            new_ids += [r[0] for r in conn.execute(
                f"SELECT id FROM {table} WHERE rowid > ?", (marks[table],))]
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS mnemo_slept (id TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM temp.mnemo_slept")
    conn.executemany("INSERT OR IGNORE INTO temp.mnemo_slept VALUES (?)",
                     [(i,) for i in new_ids])
    rows = []
    for table, wanted, link in _SLEEP_COLUMNS:
        if table not in marks:
            continue
        have = set(banks.column_names(conn, table))
        columns = [c for c in wanted if c in have]
        if not columns:
            continue
        where = ["rowid > ?"]
        params: list[Any] = [marks[table]]
        if link and link in have:
            where.append(f"{_q(link)} IN (SELECT id FROM temp.mnemo_slept)")
        if table == "episodic_memory" and "degraded_at" in have and started:
            where.append("degraded_at >= ?")
            params.append(started)
        select = ", ".join(_q(c) for c in columns)
        for rowid, *values in conn.execute(
                f"SELECT rowid, {select} FROM {_q(table)} WHERE {' OR '.join(where)}",
                params).fetchall():
            rows.append((table, columns, rowid, values))
    conn.execute("DROP TABLE IF EXISTS temp.mnemo_slept")
    return rows


_CONTENT_OPTION = re.compile(r"""\bcontent\s*=\s*['"]?([^'",)\s]+)""", re.IGNORECASE)
_ROWID_OPTION = re.compile(r"""content_rowid\s*=\s*['"]?([^'",)\s]+)""", re.IGNORECASE)


def _unsynced_fts(conn: sqlite3.Connection, table: str) -> list[tuple[str, str, list[str]]]:
    """External-content full-text indexes over `table` that no update trigger keeps
    in step (upstream's `fts_facts`): (index, its rowid column, its columns)."""
    found = []
    for name, sql in conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' "
            "AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'").fetchall():
        content = _CONTENT_OPTION.search(sql.replace("content_rowid", "content-rowid"))
        if content is None or content.group(1) != table:
            continue
        synced = any(
            "AFTER UPDATE" in " ".join(body.upper().split()) and name.lower() in body.lower()
            for (body,) in conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?",
                (table,)))
        if synced:
            continue
        rowid = _ROWID_OPTION.search(sql)
        columns = banks.column_names(conn, name)
        found.append((name, rowid.group(1) if rowid else "rowid", columns))
    return found


def _scrub_written(target: Target, base: Path | None, marks: dict[str, int],
                   started: str | None = None) -> int:
    """Redact secrets in the rows a sleep wrote (`_written_rows`); how many held one."""
    from ..config import scrub_policy
    from .scrub import scrub

    if scrub_policy() != "redact":
        return 0  # `warn` and `off` store secrets, as remember does
    conn = driver.instance(target, base).conn
    with driver.translate_sqlite_errors(target.db_path(base)):
        updates = []
        for table, columns, rowid, values in _written_rows(conn, marks, started):
            changed = {}
            for column, text in zip(columns, values, strict=True):
                result = scrub(text) if isinstance(text, str) and text else None
                if result is not None and result.found:
                    changed[column] = result.text
            if changed:
                updates.append((table, rowid, changed))
        if not updates:
            conn.commit()
            return 0
        conn.execute("PRAGMA secure_delete = ON")  # the old text's pages are overwritten
        unsynced = {table: _unsynced_fts(conn, table) for table in {u[0] for u in updates}}
        for table, rowid, changed in updates:
            for fts, key, fts_columns in unsynced[table]:
                _fts_entry(conn, table, rowid, fts, key, fts_columns, delete=True)
            assign = ", ".join(f"{_q(c)} = ?" for c in changed)
            conn.execute(f"UPDATE {_q(table)} SET {assign} WHERE rowid = ?",
                         (*changed.values(), rowid))
            for fts, key, fts_columns in unsynced[table]:
                _fts_entry(conn, table, rowid, fts, key, fts_columns, delete=False)
        conn.commit()
        driver._purge_freed_text(conn)  # full-text entries merged away, WAL checkpointed
    return len(updates)


def _fts_entry(conn: sqlite3.Connection, table: str, rowid: int, fts: str, key: str,
               columns: list[str], *, delete: bool) -> None:
    """Remove (`delete`) or add the external-content index entry of one row."""
    cols = ", ".join(_q(c) for c in columns)
    values = ", ".join(f"t.{_q(c)}" for c in columns)
    key_expr = "t.rowid" if key == "rowid" else f"t.{_q(key)}"
    if delete:
        conn.execute(f"INSERT INTO {_q(fts)} ({_q(fts)}, rowid, {cols}) "
                     f"SELECT 'delete', {key_expr}, {values} FROM {_q(table)} t "
                     "WHERE t.rowid = ?", (rowid,))
    else:
        conn.execute(f"INSERT INTO {_q(fts)} (rowid, {cols}) SELECT {key_expr}, {values} "
                     f"FROM {_q(table)} t WHERE t.rowid = ?", (rowid,))


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
