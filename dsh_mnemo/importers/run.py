"""Plan and run an import: sessions → targets → cleaned, de-duplicated rows.

Where a session goes:
- a harness transcript goes to the workspace of its recorded directory,
  resolved by `resolve_memory_context` with `auto_write_scope` and the
  session's id, exactly as turn capture would have; a session whose
  directory is unbound, missing or unrecorded is reported and skipped;
- a chat export goes only where the user named it (`--into PATH|global`).

What is written is what turn capture writes: the harness's injected blocks
stripped (`hook.strip.strip_injected`), secrets scrubbed per `scrub.policy`,
`[USER] …` (and `[ASSISTANT] …` when `capture.roles` has it) cut to
`capture.user_limit`/`capture.assistant_limit`, source `conversation`, the
capture importances.

Upstream's write path stamps every row with the current time and its
trim deletes unconsolidated rows older than the TTL at the next write, so
rows are written through `memory.store.remember_at` (write filter,
embeddings, full-text index and the no-loss guard all apply) and then,
batch by batch, given their original time in one UPDATE per row that also
marks every row older than sleep's cutoff (TTL/2) consolidated: such a row
is exempt from the trim from the moment it is old, and sleep does not fold
years of history into summaries of a single batch.  Rows younger than the
cutoff stay unconsolidated, as a captured turn would, and are consolidated
when they become due.  There is never a moment at which an imported row is
both old and unconsolidated.
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import paths
from ..errors import DataError, RefusedError
from ..faults import fault
from ..memory.banks import TALK_SOURCE
from ..record import field, record
from ..report import Progress
from . import formats
from .discover import Found, harness_files
from .ledger import Ledger, digest

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Settings
    from ..memory.targets import Target

FIRST_LINES = 3
BATCH = 100


# ─── Results ───────────────────────────────────────────────────────────────

@record
class SourceSummary:
    source: str
    files: int = 0
    sessions: int = 0
    turns: int = 0
    unknown_records: int = 0
    unreadable_files: int = 0


@record
class TargetSummary:
    target: str  # the workspace root, or "global"
    display_name: str | None
    bank: str
    namespace: str
    level: str  # "workspace" | "session" | "global"
    sessions: int = 0
    turns: int = 0
    rows_new: int = 0  # rows this import writes (or would write)
    rows_already: int = 0  # imported before, or the namespace holds the text already
    rows_written: int = 0
    rows_filtered: int = 0  # rejected by Mnemosyne's write filter
    rows_consolidated: int = 0  # written as already consolidated (older than TTL/2)
    secrets_kept: int = 0  # new rows holding a secret, stored as they are (scrub.policy: warn)
    first_lines: list[str] = field(default_factory=list)


@record
class SkippedSession:
    source: str
    session_id: str
    path: str
    cwd: str | None
    reason: str  # "unbound" | "missing-directory" | "no-directory" | "reused-directory"
    turns: int
    hint: str | None = None


@record
class ImportReport:
    dry_run: bool
    sources: list[SourceSummary]
    targets: list[TargetSummary]
    skipped: list[SkippedSession]
    rows_new: int = 0
    rows_written: int = 0
    rows_already: int = 0
    rows_filtered: int = 0
    secrets_kept: int = 0
    ledger_path: str = ""


@record
class _Row:
    digest: str
    source: str
    session: str
    turn: int
    role: str
    content: str
    importance: float
    timestamp: str | None  # naive local ISO time, as upstream writes, or None
    secret: bool = False  # it holds a secret the policy (`warn`) keeps


@record
class _Plan:
    summary: TargetSummary
    target: Target
    rows: list[_Row] = field(default_factory=list)  # new rows, in order
    already: list[_Row] = field(default_factory=list)
    sessions: set[tuple[str, str]] = field(default_factory=set)


# ─── Reading ───────────────────────────────────────────────────────────────

def read_sources(sources: list[str], *, root: Path | None = None,
                 export: Path | None = None, progress: Progress | None = None
                 ) -> tuple[list[SourceSummary], list[formats.Session]]:
    """Every session of the given sources (harness sources found under their
    config dirs, or under `root`; chat exports read from `export`)."""
    summaries: list[SourceSummary] = []
    sessions: list[formats.Session] = []
    found: list[Found] = []
    for source in sources:
        summaries.append(SourceSummary(source))
        if source in formats.HARNESS_SOURCES:
            found += harness_files(source, root)
    by_source = {s.source: s for s in summaries}
    for done, item in enumerate(found):
        if progress:
            progress("read", done, len(found))
        summary = by_source[item.source]
        summary.files += 1
        result = _read_one(item)
        _count(summary, result)
        sessions += result.sessions
    if progress and found:
        progress("read", len(found), len(found))
    exports = [s for s in sources if s in formats.EXPORT_SOURCES]
    if exports:
        if export is None:
            raise RefusedError("a chat export needs its file",
                               hint="Pass the export's conversations.json (or its .zip).")
        document, error = formats.load_export(export)
        if error is not None:
            # The one file the user named: refused with its reason, not counted.
            raise DataError(f"{export}: {error}; nothing was imported",
                            hint="Pass the export as the service gave it: its "
                                 "conversations.json, folder or .zip.")
        kind = formats.export_kind(document)
        for source in exports:
            summary = by_source[source]
            summary.files += 1
            if kind != source:
                raise RefusedError(
                    f"{export} is not a {source} export"
                    + (f" (it looks like a {kind} export)" if kind else ""),
                    hint="The source comes first: `mnemo import chatgpt` for a ChatGPT "
                         "export, `mnemo import claude-ai` for a Claude.ai export.")
            reader = formats.read_chatgpt if source == "chatgpt" else formats.read_claude_ai
            result = reader(export, document)
            _count(summary, result)
            sessions += result.sessions
    return summaries, sessions


def _read_one(item: Found) -> formats.FileResult:
    if item.source == "claude-code":
        return formats.read_claude_code(item.path)
    if item.source == "codex":
        return formats.read_codex(item.path)
    if item.source == "gemini":
        return formats.read_gemini(item.path, cwd=item.cwd, note=item.note)
    return formats.read_qwen(item.path)


def _count(summary: SourceSummary, result: formats.FileResult) -> None:
    if result.error:
        summary.unreadable_files += 1
    summary.unknown_records += result.unknown + sum(s.unknown for s in result.sessions)
    summary.sessions += len(result.sessions)
    summary.turns += sum(len(s.turns) for s in result.sessions)


# ─── Cleaning: exactly what turn capture stores ────────────────────────────

class Cleaner:
    def __init__(self, settings: Settings) -> None:
        from ..hook.handlers import IMPORTANCE, ROLE_PREFIX

        self.roles = [r for r in ("user", "assistant") if r in settings["capture.roles"]]
        self.limits = {"user": int(settings["capture.user_limit"]),
                       "assistant": int(settings["capture.assistant_limit"])}
        self.policy = settings["scrub.policy"]
        self.prefix = ROLE_PREFIX
        self.importance = IMPORTANCE
        self.kept_secret = False  # the last text cleaned keeps a secret (scrub.policy: warn)

    def __call__(self, role: str, text: str | None) -> str:
        from ..hook.handlers import truncate
        from ..hook.strip import strip_injected
        from ..memory.scrub import scrub

        self.kept_secret = False
        if not text:
            return ""
        stripped = strip_injected(text)
        if not stripped:
            return ""
        result = scrub(stripped, self.policy)
        self.kept_secret = bool(result.found) and self.policy == "warn"
        body = truncate(result.text, self.limits[role])
        return f"{self.prefix[role]}{body}" if body else ""


def local_time(value: Any) -> str | None:
    """An original timestamp as upstream stores times: naive local ISO-8601.

    None for anything else (a record's `timestamp` may hold any JSON value),
    and for a time local time cannot show (year 1 in UTC is year 0 west of
    Greenwich): the row keeps the import's time.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    try:
        if isinstance(value, (int, float)):
            moment = datetime.fromtimestamp(float(value), tz=timezone.utc)
        else:
            text = value.strip().replace("Z", "+00:00")
            if "." in text:  # Python 3.10 takes at most six fractional digits
                head, _, rest = text.partition(".")
                digits = "".join(c for c in rest if c.isdigit())
                zone = rest[len(digits):]
                text = f"{head}.{(digits + '000000')[:6]}{zone}"
            moment = datetime.fromisoformat(text)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
        local = moment.astimezone().replace(tzinfo=None)
    except (ValueError, OverflowError, OSError):
        return None
    return local.isoformat() if local <= datetime.now() else None


# ─── Targets ───────────────────────────────────────────────────────────────

class MovedDirectories:
    """Where the workspace of a directory that no longer exists went, by the paths
    the index recorded for each workspace (where it was bound, seen, and the
    places of the entries it superseded): a session recorded in a repository that
    was moved or renamed since still goes to that repository's memory."""

    def __init__(self, base: Path | None = None) -> None:
        self.base = base
        self._data: Any = None

    def _recorded(self, directory: str) -> dict[str, tuple[int, Any]]:
        """identity key -> (depth of its deepest recorded path that is `directory` or
        one of its parents, the entry), over the active workspaces."""
        if self._data is None:
            from ..workspace.index import Index

            self._data = Index(self.base).peek()
        wanted = Path(directory)
        best: dict[str, tuple[int, Any]] = {}
        for entry in self._data.workspaces:
            if entry.supersededBy:
                continue  # its paths count for the entry that took over its memory
            for path in self._data.known_paths(entry):
                recorded = Path(path)
                if recorded == wanted or recorded in wanted.parents:
                    depth = len(recorded.parts)
                    if depth > best.get(entry.identityKey, (0, None))[0]:
                        best[entry.identityKey] = (depth, entry)
        return best

    def identity_for(self, directory: str) -> str | None:
        """The identity key of the workspace whose recorded path is `directory` or
        the nearest of its parents; None when none is, or two workspaces are."""
        best = self._recorded(directory)
        if not best:
            return None
        deepest = max(depth for depth, _ in best.values())
        keys = [key for key, (depth, _) in best.items() if depth == deepest]
        return keys[0] if len(keys) == 1 else None

    def earlier_owner(self, directory: str, owner: Any, root: str | None) -> Any:
        """Another workspace recorded at `directory` (or at a parent no less deep
        than `owner`'s root `root`): a project that lived there before `owner`."""
        floor = len(Path(root).parts) if root else 0
        return next((entry for key, (depth, entry) in self._recorded(directory).items()
                     if key != owner.identityKey and depth >= floor), None)


def _typed_since(session: formats.Session, since_ms: int) -> bool:
    """Whether a turn of `session` carries a time at or after `since_ms`."""
    for turn in session.turns:
        local = local_time(turn.timestamp)
        if local is not None and datetime.fromisoformat(local).timestamp() * 1000 >= since_ms:
            return True
    return False


def _harness_target(session: formats.Session, settings: Settings, *, register: bool,
                    moved: MovedDirectories | None = None
                    ) -> tuple[Target | None, Any, SkippedSession | None]:
    from ..memory.targets import write_target
    from ..workspace.context import resolve_known_workspace, resolve_memory_context

    def skipped(reason: str, hint: str | None = None) -> SkippedSession:
        return SkippedSession(session.source, session.session_id, session.path, session.cwd,
                              reason, len(session.turns), hint)

    if not session.cwd:
        return None, None, skipped("no-directory", session.note)
    if not Path(session.cwd).is_absolute():
        return None, None, skipped("missing-directory")
    if not Path(session.cwd).is_dir():
        key = (moved or MovedDirectories()).identity_for(session.cwd)
        known = key and resolve_known_workspace(key, session.session_id,
                                                mode=settings.auto_write_scope)
        if not known:
            return None, None, skipped("missing-directory")
        return write_target(known), known, None
    ctx = resolve_memory_context(session.cwd, session.session_id, settings,
                                 mode=settings.auto_write_scope, register=register)
    if ctx.workspace is None:
        return None, None, skipped("unbound", f"run `mnemo bind` in {ctx.hint_root or session.cwd}")
    # A directory another project lived in (moved away since): a session is this
    # workspace's only if typed after it was bound here.  One bound elsewhere and
    # moved in has no known time of arrival.
    here = ctx.workspace
    earlier = (moved or MovedDirectories()).earlier_owner(session.cwd, here, ctx.root)
    if earlier is not None and not (here.canonicalPath == ctx.root
                                    and _typed_since(session, here.boundAt)):
        return None, None, skipped(
            "reused-directory",
            f"workspace {earlier.displayName!r} ({earlier.lastSeenPath}) was at this "
            f"directory before {here.displayName!r}, and this session is not known to "
            f"be newer than {here.displayName!r}'s arrival: whose it is cannot be told")
    return write_target(ctx), ctx, None


def into_target(into: str, settings: Settings, *, register: bool) -> tuple[Target, Any]:
    """`--into global`, or the workspace of the directory `--into PATH` names."""
    from ..errors import UnboundError
    from ..memory.targets import GLOBAL_TARGET, write_target
    from ..workspace.context import resolve_memory_context

    if into == "global":
        return GLOBAL_TARGET, None
    directory = Path(into).expanduser()
    if not directory.is_dir():
        raise RefusedError(f"--into {into}: not an existing directory",
                           hint="Name a directory inside a bound workspace, or `global`.")
    ctx = resolve_memory_context(directory.absolute(), None, settings, mode="workspace",
                                 register=register)
    if ctx.workspace is None:
        raise UnboundError(f"--into {into}: this directory is not in a bound workspace; "
                           "nothing was imported",
                           hint=f"Run `mnemo bind` in {ctx.hint_root or directory}, or use "
                                "--into global.")
    return write_target(ctx, "workspace"), ctx


def _present(target: Target, contents: list[str], base: Path | None) -> set[str]:
    """The subset of `contents` the namespace already holds (working memory)."""
    return set(_ids_of(target, contents, base))


def _ids_of(target: Target, contents: list[str], base: Path | None) -> dict[str, str]:
    """content -> id of the newest working-memory row of the namespace with that text
    (of `contents`, those the namespace holds)."""
    from ..memory.banks import connect_readonly

    conn = connect_readonly(target.db_path(base))
    if conn is None or not contents:
        return {}
    found: dict[str, str] = {}
    try:
        for start in range(0, len(contents), 400):
            chunk = contents[start:start + 400]
            marks = ",".join("?" * len(chunk))
            try:
                found.update((content, str(memory_id)) for memory_id, content in conn.execute(
                    f"SELECT id, content FROM working_memory WHERE session_id = ? "
                    f"AND content IN ({marks}) ORDER BY rowid", (target.namespace, *chunk)))
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
    finally:
        conn.close()
    return found


def plan(sessions: list[formats.Session], settings: Settings, *, into: str | None = None,
         register: bool = False, base: Path | None = None,
         ledger: Ledger | None = None) -> tuple[list[_Plan], list[SkippedSession]]:
    cleaner = Cleaner(settings)
    ledger = ledger or Ledger(base)
    plans: OrderedDict[tuple[str, str], _Plan] = OrderedDict()
    skipped: list[SkippedSession] = []
    fixed = into_target(into, settings, register=register) if into else None
    moved = MovedDirectories(base)
    for session in sessions:
        if fixed is not None:
            target, ctx = fixed
        else:
            target, ctx, skip = _harness_target(session, settings, register=register,
                                                moved=moved)
            if skip is not None:
                skipped.append(skip)
                continue
        assert target is not None
        key = (target.bank, target.namespace)
        if key not in plans:
            label = ctx.workspace.lastSeenPath if ctx is not None and ctx.workspace \
                else "global"
            name = ctx.workspace.displayName if ctx is not None and ctx.workspace else None
            plans[key] = _Plan(TargetSummary(label, name, target.bank, target.namespace,
                                             target.level), target)
        entry = plans[key]
        entry.sessions.add((session.source, session.session_id))
        for turn in session.turns:
            entry.summary.turns += 1
            for role, text in (("user", turn.user), ("assistant", turn.reply)):
                if role not in cleaner.roles:
                    continue
                content = cleaner(role, text)
                if not content:
                    continue
                entry.rows.append(_Row(
                    digest(target.bank, target.namespace, session.source, session.session_id,
                           turn.index, role, content),
                    session.source, session.session_id, turn.index, role, content,
                    cleaner.importance[role], local_time(turn.timestamp),
                    secret=cleaner.kept_secret))
    for entry in plans.values():
        entry.summary.sessions = len(entry.sessions)
        _split_new(entry, ledger, base)
    return list(plans.values()), skipped


def _split_new(entry: _Plan, ledger: Ledger, base: Path | None) -> None:
    """Keep only rows not imported before, whose text the namespace lacks, once each."""
    known = ledger.has([r.digest for r in entry.rows])
    present = _present(entry.target, [r.content for r in entry.rows if r.digest not in known],
                       base)
    new: list[_Row] = []
    seen: set[str] = set()
    for row in entry.rows:
        if row.digest in known or row.content in present or row.content in seen:
            entry.already.append(row)
            continue
        seen.add(row.content)
        new.append(row)
    entry.rows = new
    entry.summary.rows_new = len(new)
    entry.summary.rows_already = len(entry.already)
    entry.summary.secrets_kept = sum(r.secret for r in new)
    entry.summary.first_lines = [r.content.splitlines()[0][:160] for r in new[:FIRST_LINES]]


# ─── Writing ───────────────────────────────────────────────────────────────

def settle(target: Target, written: list[tuple[str, str]], base: Path | None) -> int:
    """Give written rows their original time; mark those older than sleep's cutoff
    consolidated (exempt from the trim).  Returns the rows marked consolidated."""
    from ..memory.banks import BUSY_TIMEOUT_SECONDS, sleep_cutoff, translate_sqlite_errors

    if not written:
        return 0
    cutoff = sleep_cutoff()
    now = datetime.now().isoformat()
    marked = 0
    db_path = target.db_path(base)
    with translate_sqlite_errors(db_path):
        conn = sqlite3.connect(db_path, timeout=BUSY_TIMEOUT_SECONDS)
        try:
            with conn:
                for memory_id, stamp in written:
                    old = stamp < cutoff
                    conn.execute(
                        "UPDATE working_memory SET timestamp = ?, consolidated_at = CASE "
                        "WHEN ? THEN COALESCE(consolidated_at, ?) ELSE consolidated_at END "
                        "WHERE id = ? AND session_id = ?",
                        (stamp, old, now, memory_id, target.namespace))
                    conn.execute("UPDATE memories SET timestamp = ? WHERE id = ? AND "
                                 "session_id = ?", (stamp, memory_id, target.namespace))
                    marked += old
        finally:
            conn.close()
    return marked


def execute(plans: list[_Plan], *, base: Path | None = None, ledger: Ledger | None = None,
            progress: Progress | None = None, embed: Any = None,
            scrub_policy: str = "redact") -> None:
    """Write the planned rows; with `embed` each gets its vector as a captured turn
    does (a model that fails leaves a row without one, for `mnemo reindex`).

    `scrub_policy` is the one the rows were prepared under (`scrub.policy`): the
    write scrubs under it again, so that `warn` keeps what it promised to keep."""
    from ..memory.store import remember_at

    ledger = ledger or Ledger(base)
    total = sum(len(p.rows) for p in plans)
    done = 0
    for entry in plans:
        summary, target = entry.summary, entry.target
        summary.rows_consolidated += _finish_interrupted(entry, ledger, base)
        # Rows found already present are recorded too, so the next run skips them cheaply.
        ledger.record([(r.digest, target.bank, target.namespace, r.source, r.session,
                        r.turn, r.role, None) for r in entry.already])
        for start in range(0, len(entry.rows), BATCH):
            batch = entry.rows[start:start + BATCH]
            ledger.begin([(r.digest, r.timestamp) for r in batch if r.timestamp])
            written: list[tuple[str, str]] = []
            recorded = []
            for row in batch:
                result = remember_at(target, row.content, source=TALK_SOURCE,
                                     importance=row.importance, base=base, embed=embed,
                                     scrub_policy=scrub_policy)
                if result.filtered:
                    summary.rows_filtered += 1
                else:
                    summary.rows_written += 1
                    if row.timestamp:
                        written.append((str(result.id), row.timestamp))
                recorded.append((row.digest, target.bank, target.namespace, row.source,
                                 row.session, row.turn, row.role, result.id))
            fault("import-after-write")
            summary.rows_consolidated += settle(target, written, base)
            ledger.record(recorded)
            done += len(batch)
            if progress:
                progress("import", done, total)


def _finish_interrupted(entry: _Plan, ledger: Ledger, base: Path | None) -> int:
    """Give the rows an interrupted import wrote but did not settle their own time.

    They are present now (so planned as already imported) and still pending in
    the ledger; without this they would keep the time of the import that was
    killed.  Returns the rows marked consolidated.
    """
    waiting = ledger.pending([r.digest for r in entry.already])
    if not waiting:
        return 0
    rows = [r for r in entry.already if r.digest in waiting]
    ids = _ids_of(entry.target, [r.content for r in rows], base)
    return settle(entry.target, [(ids[r.content], waiting[r.digest]) for r in rows
                                 if r.content in ids], base)


def run_import(settings: Settings, sources: list[str], *, dry_run: bool = True,
               root: Path | None = None, export: Path | None = None, into: str | None = None,
               base: Path | None = None, progress: Progress | None = None) -> ImportReport:
    from ..fsutil import file_lock

    if not sources:
        raise RefusedError("nothing to import: no source given")
    harness = [s for s in sources if s in formats.HARNESS_SOURCES]
    exports = [s for s in sources if s in formats.EXPORT_SOURCES]
    if exports and harness:
        raise RefusedError("import a chat export on its own, not with harness transcripts")
    if exports and not into:
        raise RefusedError("a chat export records no project: say where it goes",
                           hint="Add --into PATH (a directory in a bound workspace) or "
                                "--into global.")
    if harness and into:
        raise RefusedError("harness transcripts go to the workspace of each session's own "
                           "directory; --into is only for chat exports")
    given = export if exports else root
    if given is not None and not given.exists():
        raise RefusedError(f"--from {given}: it does not exist; nothing was imported",
                           hint="Name an existing file or directory.")
    base = base or paths.data_dir()
    ledger = Ledger(base)
    try:
        summaries, sessions = read_sources(sources, root=root, export=export,
                                           progress=progress)
        if dry_run:
            plans, skipped = plan(sessions, settings, into=into, register=False, base=base,
                                  ledger=ledger)
        else:
            with file_lock(paths.locks_dir(base) / "import.lock", timeout=5.0,
                           what="import lock"):
                plans, skipped = plan(sessions, settings, into=into, register=True,
                                      base=base, ledger=ledger)
                embed = None
                if any(p.rows for p in plans):
                    from ..memory import semantic

                    embed = semantic.embedder(settings)  # None: lexical recall, as the hooks
                execute(plans, base=base, ledger=ledger, progress=progress, embed=embed,
                        scrub_policy=settings["scrub.policy"])
    finally:
        ledger.close()
    targets = [p.summary for p in plans]
    return ImportReport(
        dry_run=dry_run, sources=summaries, targets=targets, skipped=skipped,
        rows_new=sum(t.rows_new for t in targets),
        rows_written=sum(t.rows_written for t in targets),
        rows_already=sum(t.rows_already for t in targets),
        rows_filtered=sum(t.rows_filtered for t in targets),
        secrets_kept=sum(t.secrets_kept for t in targets),
        ledger_path=str(ledger.path))
