"""`mnemo migrate`: plan, run and revert moves out of the default database.

Sources (one class per run; docs/migration.md):

- no selector: the DSH-era `dsh_v2_workspace_*` namespaces of the default
  database whose workspace is in the index; each moves, unchanged, to the
  bank of the entry that owns it;
- `sessions`: an explicit list of exact session ids; a workspace namespace
  goes to its owner's bank, anything else into the target workspace with its
  session_id rewritten to the workspace namespace;
- `legacy_dsh`: every `dsh_*` session that is not `dsh_v2_*`, into the target
  workspace;
- `default_to_global`: the legacy `default` pool into the global bank, with
  scope `global`, ids, content and timestamps unchanged.

Migration never touches `recall_mode` or `auto_write_scope`.

Rows are copied as `remember` would store them: under `scrub.policy: redact`
(the default) the text of a row that holds a secret is copied redacted; the
plan and the run count those rows (`secrets`).  The journal records the
policy a run began with (`selection.scrub_policy`): a resumed run copies
under it, and a revert knows whether the bank may hold redacted copies of
rows the old store still has (a run stopped before its delete).  A revert
moves rows back as the bank holds them, never scrubbing them again.

A row whose text a run redacts arrives without the vectors the old store
computed from its original (the secret): `memory_embeddings` rows, a
summary's `binary_vector`, mnemo's own `mnemo_vectors`; `mnemo reindex --all`
embeds the redacted text.  A sleep summary that is the only remaining copy of
rows upstream deleted arrives as an ordinary memory (`engine.SOLE_COPY_SOURCE`)
so that prompts can recall it.  The plan and the run say how many of each
(`notes`); the engine's module doc has the details.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

from .. import paths
from ..config import scrub_policy
from ..errors import DataError, MnemoError, RefusedError, UnboundError
from ..faults import fault
from ..memory.banks import MEMORY_TABLES, attach_readonly, namespace_stats
from ..record import asdict, field, record
from ..report import Progress
from ..workspace import identity
from ..workspace.context import register_seen
from ..workspace.index import Index, IndexData, WorkspaceEntry
from . import backup as backups
from . import engine, retention
from . import journal as journals
from .engine import TableSummary
from .journal import Group, Journal
from .schema import discover


def is_legacy_dsh(session_id: str) -> bool:
    """The old DSH plugin's per-conversation rows: `dsh_*` but never `dsh_v2_*`."""
    return session_id.startswith("dsh_") and not session_id.startswith("dsh_v2_")


GLOBAL_SCOPE = "global"
DEFAULT_SESSION = "default"
# The namespace of the global bank's own rows (storage.GLOBAL_SESSION): the
# legacy pool joins it, so stats and sleep treat the moved rows like the rest.
GLOBAL_SESSION = "global"
# backups/<journal id>/BEFORE_RESTORE/: the databases as `--from-backup` found them,
# kept while it restores, to put back if it fails halfway.
BEFORE_RESTORE = "before-restore"


@record
class Selection:
    sessions: list[str] = field(default_factory=list)
    legacy_dsh: bool = False
    default_to_global: bool = False
    to: Path | None = None  # a directory in the target workspace (default: cwd)

    @property
    def selector(self) -> str:
        if self.default_to_global:
            return "default-to-global"
        if self.legacy_dsh:
            return "legacy-dsh"
        if self.sessions:
            return "sessions"
        return "owned-workspaces"

    def check(self) -> None:
        chosen = sum([bool(self.sessions), self.legacy_dsh, self.default_to_global])
        if chosen > 1:
            raise RefusedError("choose one source class per migration: --session, "
                               "--legacy-dsh or --default-to-global",
                               hint="Run them one after the other.")
        if self.default_to_global and self.to is not None:
            raise RefusedError("--default-to-global moves into the global bank; --to does "
                               "not apply")
        for sid in self.sessions:
            if not sid or not sid.strip() or any(ord(c) < 32 for c in sid):
                raise RefusedError(f"{sid!r} is not a session id")

    def describe(self) -> dict[str, Any]:
        return {"selector": self.selector, "sessions": list(self.sessions),
                "to": str(self.to) if self.to else None}


@record
class PlanNamespace:
    source: str
    target: str
    rows: int  # every table row that moves
    memories: int  # of which working + episodic memories
    tables: list[TableSummary]


@record
class PlanGroup:
    source_db: str
    target_db: str
    target_bank: str
    target_namespace: str | None
    target_exists: bool
    scope_to: str | None
    rows: int
    memories: int
    namespaces: list[PlanNamespace]
    secrets: int = 0  # rows whose text holds a secret (see `Plan.scrub_policy`)


@record
class Plan:
    selector: str
    source_db: str
    groups: list[PlanGroup]
    pending: int  # rows (of every table) that would move
    memories: int = 0  # of which working + episodic memories
    target_root: str | None = None
    others: dict[str, int] = field(default_factory=dict)  # memories per other class
    shared_tables: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)  # journals a crash left
    notes: list[str] = field(default_factory=list)
    secrets: int = 0  # rows whose text holds a secret
    scrub_policy: str = "redact"  # what the copy does about them


@record
class GroupResult:
    source_db: str
    target_db: str
    moved: dict[str, int]
    already_there: int
    missing: int
    remapped: int
    secrets: int = 0  # copied rows that held a secret


@record
class RunResult:
    status: str  # "moved" | "nothing-to-do"
    journal: str | None
    plan: Plan
    groups: list[GroupResult] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    backups: list[dict[str, str]] = field(default_factory=list)
    # Journals whose snapshots the retention policy deleted after this run.
    pruned_backups: list[str] = field(default_factory=list)
    secrets: int = 0  # copied rows that held a secret (redacted under `redact`)


@record
class RevertResult:
    status: str  # "reverted" | "restored" | "already-reverted"
    journal: str
    moved_back: dict[str, int] = field(default_factory=dict)
    missing: list[list[Any]] = field(default_factory=list)  # rows deleted since
    restored: list[dict[str, str]] = field(default_factory=list)


# ---------------------------------------------------------------------------
# Resolving a selection into groups


@record
class _GroupSpec:
    target_bank: str
    target_namespace: str | None
    namespaces: dict[str, str]
    scope_to: str | None = None


def _owner(data: IndexData, namespace: str) -> WorkspaceEntry | None:
    entries = [e for e in data.by_namespace(namespace) if not e.supersededBy]
    return entries[0] if entries else None


def _target_workspace(to: Path | None, index: Index, *, register: bool
                      ) -> tuple[WorkspaceEntry, str]:
    start = to or Path.cwd()
    location = identity.find_workspace(start)
    if not location.found or location.root is None:
        raise UnboundError(f"{start} is not in a bound workspace, so there is no target",
                           hint="Run the migration inside the project (after `mnemo bind`) "
                                "or pass --to PATH.")
    if register:
        return register_seen(index, location), str(location.root)
    key = identity.identity_key_for(location.workspace_uuid or "")
    return index.peek().resolve(key, location.root), str(location.root)


def _resolve(selection: Selection, stats: dict[str, Any], index: Index, *, register: bool
             ) -> tuple[list[_GroupSpec], str | None, list[str]]:
    data = index.load() if register else index.peek()
    notes: list[str] = []
    if selection.default_to_global:
        return ([_GroupSpec(paths.GLOBAL_BANK, GLOBAL_SESSION,
                            {DEFAULT_SESSION: GLOBAL_SESSION}, GLOBAL_SCOPE)], None, notes)
    by_bank: dict[str, _GroupSpec] = {}
    root: str | None = None
    target: WorkspaceEntry | None = None

    def into_target(sid: str) -> None:
        nonlocal target, root
        if target is None:
            target, root = _target_workspace(selection.to, index, register=register)
        spec = by_bank.setdefault(target.bank, _GroupSpec(target.bank, target.namespace, {}))
        spec.namespaces[sid] = target.namespace

    def into_owner(namespace: str) -> None:
        owner = _owner(data, namespace)
        if owner is None:
            raise RefusedError(
                f"{namespace} has no workspace in the index (an orphan)",
                hint=f"Pin it to its directory first: mnemo adopt {namespace} PATH")
        spec = by_bank.setdefault(owner.bank, _GroupSpec(owner.bank, owner.namespace, {}))
        spec.namespaces[namespace] = namespace

    if selection.legacy_dsh:
        for sid in sorted(s for s in stats if is_legacy_dsh(s)):
            into_target(sid)
        if not by_bank:
            # Still resolve the target so a wrong directory is reported.
            target, root = _target_workspace(selection.to, index, register=False)
    elif selection.sessions:
        for sid in dict.fromkeys(selection.sessions):
            if identity.is_workspace_namespace(sid):
                into_owner(sid)
            else:
                into_target(sid)
            if sid not in stats:
                notes.append(f"{sid}: no rows in the default database")
    else:
        for sid in sorted(stats):
            if identity.is_workspace_namespace(sid) and _owner(data, sid) is not None:
                into_owner(sid)
    return list(by_bank.values()), root, notes


# ---------------------------------------------------------------------------
# Plan


def _others(stats: dict[str, Any], data: IndexData) -> dict[str, int]:
    counts = {"legacy-dsh": 0, "default": 0, "owned-workspaces": 0, "orphan-workspaces": 0,
              "sessions": 0, "other": 0}
    for sid, s in stats.items():
        if is_legacy_dsh(sid):
            counts["legacy-dsh"] += s.rows
        elif sid == DEFAULT_SESSION:
            counts["default"] += s.rows
        elif identity.is_workspace_namespace(sid):
            key = "owned-workspaces" if _owner(data, sid) else "orphan-workspaces"
            counts[key] += s.rows
        elif sid.startswith(identity.SESSION_PREFIX):
            counts["sessions"] += s.rows
        else:
            counts["other"] += s.rows
    return counts


def secrets_note(count: int, policy: str, *, done: bool = False) -> str:
    """The sentence a plan or a run says about the rows that hold secrets."""
    rows = f"{count} row{'s' if count != 1 else ''} {'held' if done else 'hold'} secrets"
    if policy == "warn":
        return (f"{rows}: scrub.policy is warn, so {'they were' if done else 'they will be'} "
                "copied as they are.")
    return f"{rows}: {'they were' if done else 'they will be'} copied redacted."


def stale_vectors_note(count: int, *, done: bool = False) -> str:
    """The sentence a plan or a run says about the vectors of redacted texts."""
    return (f"{count} vector{'s' if count != 1 else ''} in the old store "
            f"{'were' if done else 'are'} computed from texts that hold secrets: "
            f"{'they were' if done else 'they will'} not {'' if done else 'be '}copied "
            "with the redacted texts; `mnemo reindex --all` embeds those.")


def sole_summaries_note(count: int, *, done: bool = False) -> str:
    """The sentence a plan or a run says about summaries kept as memories."""
    these = "summary is" if count == 1 else "summaries are"
    return (f"{count} sleep {these} the only remaining copy of memories the old store "
            f"deleted: {'they were' if done else 'they will be'} copied as ordinary "
            f"memories (source {engine.SOLE_COPY_SOURCE}), which prompts recall.")


def _attach_target(conn: sqlite3.Connection, target_db: Path) -> str | None:
    """Attach the target bank as `dst` for a plan to look into (None: a new bank, or
    one it cannot read: the run reports that, the plan only counts without it)."""
    if not target_db.exists():
        return None
    try:
        attach_readonly(conn, target_db, "dst")
        conn.execute("SELECT count(*) FROM dst.sqlite_master").fetchone()
    except (sqlite3.DatabaseError, MnemoError):
        with contextlib.suppress(sqlite3.Error):
            conn.execute("DETACH DATABASE dst")
        return None
    return "dst"


def _plan_group(source: Path, spec: _GroupSpec, base: Path, notes: list[str],
                policy: str = "redact", count: bool = True) -> PlanGroup:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    target_db = paths.bank_db_path(spec.target_bank, base)
    try:
        attach_readonly(conn, source, "src")
        schema = discover(conn, "src")
        engine.select_rows(conn, schema, spec.namespaces, spec.scope_to)
        summary = engine.summarize(conn, schema)
        seen = engine.Secrets(policy)
        secrets = engine.count_secrets(conn, schema, policy, seen) if count else 0
        stale = 0
        if count and policy == "redact":
            engine.mark_redacted(conn, schema, seen)
            stale = engine.count_stale_vectors(conn, schema)
        sole = engine.mark_sole_summaries(conn, schema, target=_attach_target(conn, target_db)) \
            if count else 0
        shared_rows = 0 if spec.target_bank == paths.GLOBAL_BANK else sum(
            conn.execute(f"SELECT count(*) FROM temp.mv m JOIN src.{name} s ON s.id = m.key "
                         "WHERE m.tbl = ? AND s.scope = 'global'", (name,)).fetchone()[0]
            for name in MEMORY_TABLES
            if name in schema.tables and schema.tables[name].has("scope"))
    finally:
        conn.close()
    if stale:
        notes.append(stale_vectors_note(stale))
    if sole:
        notes.append(sole_summaries_note(sole))
    if shared_rows:
        # Upstream shows scope-global rows to every session of their database;
        # in a workspace bank only that workspace (and its sessions) reads them.
        notes.append(f"{shared_rows} selected memories have scope 'global'; after the move "
                     f"only the workspace of bank {spec.target_bank} sees them.")
    namespaces = [PlanNamespace(source=owner, target=spec.namespaces.get(owner, owner),
                                rows=sum(t.rows for t in tables),
                                memories=sum(t.rows for t in tables
                                             if t.table in MEMORY_TABLES),
                                tables=tables)
                  for owner, tables in sorted(summary.items())]
    return PlanGroup(source_db=str(source), target_db=str(target_db),
                     target_bank=spec.target_bank, target_namespace=spec.target_namespace,
                     target_exists=target_db.exists(), scope_to=spec.scope_to,
                     rows=sum(n.rows for n in namespaces),
                     memories=sum(n.memories for n in namespaces), namespaces=namespaces,
                     secrets=secrets)


def plan_migration(selection: Selection, *, index: Index | None = None,
                   register: bool = False, policy: str | None = None,
                   count_secrets: bool = True) -> Plan:
    """What `run` would move; writes nothing (unless `register`, for run).

    `policy`: the `scrub.policy` the copy applies (default: the setting).
    Without `count_secrets` the rows are not scrubbed to count secrets, nor are
    the vectors of redacted texts and the summaries kept as memories counted (a
    run counts them as it copies, `RunResult.plan.notes`).
    """
    selection.check()
    index = index or Index()
    base = index.base
    policy = policy or scrub_policy()
    source = paths.default_db_path(base)
    stats = namespace_stats("default", base=base)
    specs, root, notes = _resolve(selection, stats, index, register=register)
    groups = ([_plan_group(source, spec, base, notes, policy, count_secrets) for spec in specs]
              if source.exists() else [])
    groups = [g for g in groups if g.rows]
    secrets = sum(g.secrets for g in groups)
    if secrets:
        notes.append(secrets_note(secrets, policy))
    shared: list[str] = []
    if source.exists():
        conn = sqlite3.connect(":memory:")
        try:
            attach_readonly(conn, source, "src")
            schema = discover(conn, "src")
            shared = sorted(schema.shared)
            if schema.vector_tables and groups:
                notes.append("sqlite-vec tables are not moved (their keys are local row "
                             "numbers); the embeddings in memory_embeddings move, and "
                             "upstream rebuilds its vector index from them (reindex).")
        finally:
            conn.close()
    unfinished = [j.id for j in journals.unfinished(base)]
    return Plan(selector=selection.selector, source_db=str(source), groups=groups,
                pending=sum(g.rows for g in groups),
                memories=sum(g.memories for g in groups), target_root=root,
                others=_others(stats, index.load() if register else index.peek()),
                shared_tables=shared,
                unfinished=unfinished, notes=notes, secrets=secrets, scrub_policy=policy)


# ---------------------------------------------------------------------------
# Run


def _lock(base: Path) -> contextlib.AbstractContextManager[None]:
    return journals.migration_lock(base)


def clear_caches(db_path: Path) -> None:
    """What is derived from a bank's rows and stale after a rewrite: upstream's query
    cache (its keys include session_id) and the vector matrices mnemo keeps in files
    for the next process (`memory.vector_file`: rows came or went, or the file was
    restored)."""
    from ..memory import vector_file

    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            (db_path.parent / f"query_cache.db{suffix}").unlink()
    vector_file.remove_for(db_path)


def _ensure_schema(db_path: Path) -> None:
    from ..memory.driver import init_bank

    init_bank(db_path)


def _label(db_path: Path, base: Path) -> str:
    if db_path == paths.default_db_path(base):
        return "default"
    return db_path.parent.name


def _take_backups(journal: Journal, base: Path, progress: Progress | None = None) -> None:
    folder = paths.backups_dir(base) / journal.id
    seen: list[Path] = []
    sources = [Path(g.source_db) for g in journal.groups]
    targets = [Path(g.target_db) for g in journal.groups]
    planned = [("source", p) for p in sources] + [("target", p) for p in targets]
    total = len(set(planned))
    for role, db in planned:
        if db in seen:
            continue
        if progress:
            progress("backup", len(seen), total)
        seen.append(db)
        destination = folder / f"{_label(db, base)}.db"
        backups.snapshot(db, destination)
        journal.backups.append({"role": role, "database": str(db), "backup": str(destination)})
        if role == "source":
            fault("after-source-backup")
    if progress:
        progress("backup", total, total)
    journal.save()


def _recorded_policy(journal: Journal) -> str | None:
    """The `scrub.policy` the run began with (None: a journal from before it was recorded)."""
    value = journal.selection.get("scrub_policy")
    return value if isinstance(value, str) and value else None


def _redacting(journal: Journal) -> bool:
    """Whether the run may have copied rows redacted (journals that do not say: maybe)."""
    return _recorded_policy(journal) in (None, "redact")


def _move_group(journal: Journal, group: Group, progress: Progress | None,
                policy: str = "redact") -> engine.MoveOutcome:
    def choose(conn: sqlite3.Connection, schema: Any) -> None:
        if group.rows_file:
            engine.load_rows(conn, journal.read_rows(group.rows_file))
        else:
            engine.select_rows(conn, schema, group.namespaces, group.scope_to)

    def record(rows: list[list[Any]]) -> None:
        journal.write_rows(group, rows)
        counts: dict[str, int] = {}
        for row in rows:
            counts[row[0]] = counts.get(row[0], 0) + 1
        group.counts = counts
        group.status = "copying"
        journal.save()

    def copied(outcome: engine.MoveOutcome) -> None:
        group.status = "copied"
        group.missing = len(outcome.missing)
        journal.save()

    source, target = Path(group.source_db), Path(group.target_db)
    if not source.exists():
        raise DataError(f"the source database {source} is missing")
    _ensure_schema(target)
    outcome = engine.move(source, target, choose=choose, journal_rows=record,
                          on_copied=copied, progress=progress, scrub_policy=policy,
                          redacted="target" if _redacting(journal) else None,
                          sole_summaries=True)
    group.status = "done"
    journal.save()
    clear_caches(source)
    clear_caches(target)
    return outcome


def _prepare(journal: Journal, base: Path, progress: Progress | None) -> None:
    """Give every target its schema, then back up every database (before any change).

    Both steps belong to the run, not to the command that started it: a run
    killed after its journal named the groups but before a new target bank
    existed is resumed from here, so the backup never meets a missing target.
    An error here (a busy or damaged database) closes the journal as failed,
    since nothing has moved yet; a later run plans afresh.
    """
    try:
        for group in journal.groups:
            _ensure_schema(Path(group.target_db))
        _take_backups(journal, base, progress)
    except MnemoError:
        journal.status = "failed"
        journal.finished_at = journals.now_ms()
        journal.save()
        raise
    fault("after-backup")


def _complete(journal: Journal, progress: Progress | None,
              policy: str | None = None, notes: list[str] | None = None
              ) -> list[GroupResult]:
    """Finish `journal`'s run; what its moves say (`*_note`) is added to `notes`."""
    base = journal.base or paths.data_dir()
    # A run copies under the policy it began with, even when resumed after a change.
    policy = _recorded_policy(journal) or policy or scrub_policy()
    if not journal.backups:
        _prepare(journal, base, progress)
    journal.status = "running"
    journal.save()
    results = []
    for group in journal.groups:
        if group.status == "done":
            continue
        try:
            outcome = _move_group(journal, group, progress, policy)
        except MnemoError as exc:
            if all(g.status == "planned" for g in journal.groups):
                # Nothing moved: close the journal so it does not block later runs.
                journal.status = "failed"
                journal.finished_at = journals.now_ms()
                journal.save()
            else:
                exc.hint = (exc.hint + " " if exc.hint else "") + (
                    f"Or undo the run: mnemo migrate revert --journal {journal.id}")
            raise
        results.append(GroupResult(group.source_db, group.target_db, outcome.copied,
                                   outcome.already_there, len(outcome.missing),
                                   outcome.remapped, outcome.secrets))
        if notes is not None and outcome.stale_vectors:
            notes.append(stale_vectors_note(outcome.stale_vectors, done=True))
        if notes is not None and outcome.sole_summaries:
            notes.append(sole_summaries_note(outcome.sole_summaries, done=True))
    journal.status = "done"
    journal.finished_at = journals.now_ms()
    journal.save()
    return results


def resume_unfinished(base: Path, progress: Progress | None = None,
                      policy: str | None = None) -> list[str]:
    """Finish the runs a crash interrupted (their backups and journal exist)."""
    resumed = []
    for journal in journals.unfinished(base):
        if journal.status == "reverting":
            raise RefusedError(
                f"migration {journal.id} was being reverted when it stopped",
                hint=f"Finish that first: mnemo migrate revert --journal {journal.id}")
        if journal.status == "restoring":
            raise RefusedError(
                f"migration {journal.id} was being restored from its backups when it stopped",
                hint=f"Finish that first: mnemo migrate revert --journal {journal.id} "
                     "--from-backup")
        _complete(journal, progress, policy)
        resumed.append(journal.id)
    return resumed


def _prune_after_run(base: Path, policy: retention.Policy | None, keep: tuple[str, ...]
                     ) -> list[str]:
    """Apply the retention policy after a run (best effort: the run itself succeeded)."""
    policy = policy or retention.configured_policy()
    if policy is None:
        return []
    try:
        result = retention.prune_unlocked(base, policy, keep=keep)
    except (OSError, MnemoError):
        return []
    return [entry.journal for entry in result.pruned]


def run_migration(selection: Selection, *, index: Index | None = None,
                  progress: Progress | None = None, kind: str = "migrate",
                  policy: retention.Policy | None = None) -> RunResult:
    """Back up, then move the selected rows; completes interrupted runs first.

    Afterwards the snapshots of older runs are pruned by `policy` (default:
    the configured `backups.*` settings); this run's own are always kept.
    """
    selection.check()
    index = index or Index()
    base = index.base
    scrubbing = scrub_policy()
    with _lock(base):
        resumed = resume_unfinished(base, progress, scrubbing)
        plan = plan_migration(selection, index=index, register=True, policy=scrubbing,
                              count_secrets=False)  # counted by the copy, not twice
        if not plan.groups:
            return RunResult(status="nothing-to-do", journal=None, plan=plan,
                             resumed=resumed)
        journal = journals.create(kind, {**selection.describe(), "scrub_policy": scrubbing},
                                  base)
        journal.groups = [Group(index=i, source_db=g.source_db, target_db=g.target_db,
                                target_bank=g.target_bank,
                                target_namespace=g.target_namespace,
                                namespaces={n.source: n.target for n in g.namespaces},
                                scope_to=g.scope_to)
                          for i, g in enumerate(plan.groups)]
        journal.save()
        fault("after-journal-groups")
        done: list[str] = []
        results = _complete(journal, progress, scrubbing, done)
        for planned, result in zip(plan.groups, results, strict=False):
            planned.secrets = result.secrets
        plan.secrets = sum(g.secrets for g in results)
        plan.notes += done  # what the copy did (the run's plan does not count it)
        pruned = _prune_after_run(base, policy, keep=(journal.id,))
        return RunResult(status="moved", journal=journal.id, plan=plan, groups=results,
                         resumed=resumed, backups=journal.backups, pruned_backups=pruned,
                         secrets=sum(g.secrets for g in results))


# ---------------------------------------------------------------------------
# Revert


def revert_migration(journal_id: str | None = None, *, from_backup: bool = False,
                     base: Path | None = None, progress: Progress | None = None
                     ) -> RevertResult:
    """Move a run's rows back (from its journal), or restore its backups whole."""
    base = base or paths.data_dir()
    with _lock(base):
        if journal_id in (None, "", "latest"):
            journal = journals.latest_revertible(base)
            if journal is None:
                raise RefusedError("there is no migration to revert",
                                   hint=f"Journals live in {paths.migrations_dir(base)}.")
        else:
            journal = journals.load(journal_id, base)
        if journal.status in ("reverted", "restored"):
            return RevertResult(status="already-reverted", journal=journal.id)
        if from_backup:
            return _restore(journal)
        if journal.status == "restoring":
            raise RefusedError(
                f"migration {journal.id} was being restored from its backups when it stopped",
                hint=f"Complete that first: mnemo migrate revert --journal {journal.id} "
                     "--from-backup")
        journal.status = "reverting"
        journal.save()
        result = RevertResult(status="reverted", journal=journal.id)
        for group in reversed(journal.groups):
            if not group.rows_file or group.revert_status == "done":
                continue  # nothing of this group was journaled, so nothing moved
            _revert_group(journal, group, result, progress)
        journal.status = "reverted"
        journal.reverted_at = journals.now_ms()
        journal.save()
        return result


def _revert_group(journal: Journal, group: Group, result: RevertResult,
                  progress: Progress | None) -> None:
    def choose(conn: sqlite3.Connection, _schema: Any) -> None:
        if group.revert_file:
            rows = journal.read_rows(group.revert_file)
        else:
            rows = [journals.reverse_row(r) for r in journal.read_rows(group.rows_file or "")]
        engine.load_rows(conn, rows)

    def record(rows: list[list[Any]]) -> None:
        journal.write_rows(group, rows, revert=True)
        group.revert_status = "copying"
        journal.save()

    def copied(outcome: engine.MoveOutcome) -> None:
        group.revert_status = "copied"
        group.revert_missing = [list(m) for m in outcome.missing]
        journal.save()

    source, target = Path(group.target_db), Path(group.source_db)
    if not source.exists():
        raise DataError(f"{source} is missing; revert with --from-backup instead")
    _ensure_schema(target)
    # No scrub_policy: a revert restores the rows as the bank holds them.  A row
    # the old store still has (a run stopped before its delete) is the same row
    # when the bank's copy is its redaction: it stays, the copy is deleted.
    outcome = engine.move(source, target, choose=choose, journal_rows=record,
                          on_copied=copied, progress=progress,
                          redacted="source" if _redacting(journal) else None,
                          absent_tables_empty=True)
    group.revert_status = "done"
    group.status = "reverted"
    journal.save()
    clear_caches(source)
    clear_caches(target)
    for table, count in outcome.copied.items():
        result.moved_back[table] = result.moved_back.get(table, 0) + count
    result.missing.extend([list(m) for m in outcome.missing])


def _restore(journal: Journal) -> RevertResult:
    if not journal.backups:
        raise RefusedError(f"migration {journal.id} took no backups (it stopped before)",
                           hint="Nothing was changed by it; there is nothing to restore.")
    if journal.backups_pruned_at:
        when = time.strftime("%Y-%m-%d", time.localtime(journal.backups_pruned_at / 1000))
        raise RefusedError(
            f"the backups of migration {journal.id} were pruned on {when} under the "
            "retention policy (backups.keep_days, backups.keep_migrations)",
            hint=f"Its journal remains: mnemo migrate revert --journal {journal.id} moves "
                 "its rows back (without --from-backup).")
    from_journal = f"Revert from its journal instead: mnemo migrate revert --journal {journal.id}"
    missing = [b["backup"] for b in journal.backups if not Path(b["backup"]).is_file()]
    if missing:
        # Checked before anything is restored: half a restore is worse than none.
        raise DataError(f"the backup {missing[0]} of migration {journal.id} is missing; "
                        "nothing was restored", hint=from_journal)
    pairs = [(Path(b["backup"]), Path(b["database"])) for b in journal.backups]
    for snapshot_path, _database in pairs:
        try:
            # Every snapshot the run took holds Mnemosyne's schema (a new target
            # bank gets it before its backup).
            backups.check(snapshot_path, MEMORY_TABLES)
        except DataError as exc:
            raise DataError(f"{exc.message}; nothing was restored", hint=from_journal) from None
    # An older snapshot would silently undo (or duplicate) what a later run did
    # to the same files: those runs must be reverted first.
    mine = {b["database"] for b in journal.backups}
    later = []
    for other_id in journals.all_ids(journal.base):
        if other_id == journal.id:
            continue
        other = journals.load(other_id, journal.base)
        if (other.created_at, other.id) < (journal.created_at, journal.id):
            continue
        touched = {g.source_db for g in other.groups} | {g.target_db for g in other.groups}
        if other.status not in ("reverted", "restored") and touched & mine:
            later.append(other.id)
    if later:
        raise RefusedError(
            f"later migration(s) {', '.join(later)} changed the same databases; restoring "
            f"the backups of {journal.id} would undo them behind their journals",
            hint="Revert those first (mnemo migrate revert), newest first.")
    aside = paths.backups_dir(journal.base) / journal.id / BEFORE_RESTORE
    again = f"mnemo migrate revert --journal {journal.id} --from-backup"
    # A restore a kill stopped (`restoring`) is completed; its databases are half
    # restored, so they are not set aside again (the first attempt's copies stay).
    resumed = journal.status == "restoring"
    previous = journal.status
    kept: dict[Path, Path | None] = {}
    if not resumed:
        kept = _set_aside(pairs, aside)
        journal.status = "restoring"
        journal.save()
    touched: list[Path] = []
    try:
        for snapshot_path, database in pairs:
            touched.append(database)
            backups.restore(snapshot_path, database)
            clear_caches(database)
            fault("after-restore")
    except Exception as exc:
        hint = (f"Their copies from before the restore are in {aside}. "
                if aside.is_dir() else "") + f"Complete the restore with: {again}"
        if resumed:
            raise DataError(f"completing the restore of migration {journal.id} failed "
                            f"({exc}); its databases are still partly restored",
                            hint=hint) from None
        failed = _put_back(touched, kept)
        if failed:
            raise DataError(f"restoring the backups of migration {journal.id} failed ({exc}), "
                            f"and putting back what it had restored failed too ({failed[0]})",
                            hint=hint) from None
        shutil.rmtree(aside, ignore_errors=True)
        journal.status = previous
        journal.save()
        if isinstance(exc, MnemoError):
            raise type(exc)(f"{exc.message}; nothing was restored (the databases restored "
                            "before it were put back as they were)", hint=exc.hint,
                            exit_code=exc.exit_code) from None
        raise
    journal.status = "restored"
    journal.restored_at = journals.now_ms()
    journal.save()
    shutil.rmtree(aside, ignore_errors=True)
    return RevertResult(status="restored", journal=journal.id,
                        restored=[dict(b) for b in journal.backups])


def _set_aside(pairs: list[tuple[Path, Path]], aside: Path) -> dict[Path, Path | None]:
    """Snapshot every database a restore overwrites, as it is now (None: it does not
    exist), so that a restore failing halfway can be undone."""
    shutil.rmtree(aside, ignore_errors=True)  # what a restore killed here left
    kept: dict[Path, Path | None] = {}
    try:
        for snapshot_path, database in pairs:
            kept[database] = (backups.snapshot(database, aside / snapshot_path.name)
                              if database.exists() else None)
    except MnemoError as exc:
        shutil.rmtree(aside, ignore_errors=True)
        raise type(exc)(f"{exc.message}; nothing was restored", hint=exc.hint,
                        exit_code=exc.exit_code) from None
    except OSError:
        shutil.rmtree(aside, ignore_errors=True)
        raise
    return kept


def _put_back(touched: list[Path], kept: dict[Path, Path | None]) -> list[str]:
    """Give each database of `touched` back its copy from `kept`; what failed."""
    failed = []
    for database in touched:
        copy = kept.get(database)
        try:
            if copy is None:  # the restore created it
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{database}{suffix}").unlink(missing_ok=True)
            else:
                backups.restore(copy, database)
            clear_caches(database)
        except (MnemoError, OSError) as exc:
            failed.append(f"{database}: {exc}")
    return failed


def journal_summary(journal: Journal) -> dict[str, Any]:
    data = asdict(journal)
    data.pop("base", None)
    return data
