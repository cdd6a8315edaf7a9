"""What `mnemo hook prompt|turn-end|session-end` do (docs/hooks.md).

- prompt: record the user's message as the session's pending turn, recall
  through the prefetch gate and answer with the fenced block (or the bind
  hint in an unbound directory, or nothing), then store any older turn whose
  turn end never came.
- turn-end: store the pending turn (and the reply if `capture.roles` says
  so); every `capture.consolidate_every` turns per namespace, consolidate it
  if due.
- session-end: store what is still pending; consolidate if the session
  captured anything.

Every function here may raise; `entry.run_hook` turns any failure into a log
line and silence.  The answer is handed to `emit` as soon as it is known, so
housekeeping after it can never delay or spoil the injection.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..harnesses.registry import HARNESSES, format_output, neutral_output
from ..record import field, record
from . import log
from .events import SEVERAL_ROOTS, HookEvent, last_reply_from_transcript
from .spool import MAX_BYTES, MAX_PENDING, GaveUp, Spool, Turn

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from ..config import Settings
    from ..memory.targets import Target
    from ..workspace.context import MemoryContext

ROLE_PREFIX = {"user": "[USER] ", "assistant": "[ASSISTANT] "}
IMPORTANCE = {"user": 0.5, "assistant": 0.15}
MAX_QUERY_CHARS = 2000


def query_text(text: str) -> str:
    """What a prompt is recalled by: all of it up to MAX_QUERY_CHARS, else its start
    and its end (a long prompt's question is usually at one end, what was pasted
    in between)."""
    if len(text) <= MAX_QUERY_CHARS:
        return text
    half = MAX_QUERY_CHARS // 2
    return f"{text[:half]}\n…\n{text[-half:]}"


# Directory names too common to be a project's own word ("how does the api
# handle auth?" is about an API, whatever the repository is called).
GENERIC_NAMES = frozenset(["app", "apps", "api", "web", "www", "site", "server", "client",
                           "backend", "frontend", "service", "services", "core", "lib",
                           "libs", "src", "code", "main", "project", "repo", "docs", "data",
                           "test", "tests", "tools", "scripts", "infra", "mobile", "admin",
                           "platform", "monorepo", "workspace", "home", "work", "config"])


def without_own_name(text: str, workspace: str | None) -> str:
    """The prompt as recall searches it: without the workspace's own name.

    Inside a workspace its name tells its memories apart no better than any
    other: it only lifts those that happen to name the project ("what does exit
    code 2 mean for tern?" brought "tern is dual-licensed …" beside the exit
    codes).  A name shorter than 4 characters or a common directory word is
    left in, and so is a prompt that is nothing but the name."""
    name = (workspace or "").strip()
    if len(name) < 4 or name.lower() in GENERIC_NAMES or name.lower() not in text.lower():
        return text
    import re

    stripped = re.sub(rf"(?i)(?<![\w-]){re.escape(name)}(?![\w-])", "", text)
    stripped = re.sub(r"[ \t]{2,}", " ", stripped)
    return stripped if stripped.strip(" \t\n?.!,:;") else text


def recall_text(prompt: str, ctx: MemoryContext) -> str:
    """What a prompt is searched by in `ctx` (the recall, the standing block's order
    and the early query vector alike, so one embedding serves all three)."""
    return without_own_name(query_text(prompt), ctx.display_name)


@record
class HookRun:
    """One hook call: what it is, where its answer goes, where work after it goes.

    `emit` hands the answer to the harness (once; later calls are ignored).
    `later` takes the work that must not delay it (storing turns,
    consolidation): a hook process runs it right away, after the answer;
    the resident server queues it for its housekeeping thread, so a prompt
    is never answered behind another session's stores.
    """

    harness: str
    kind: str
    settings: Settings
    base: Path
    emit: Callable[[str], None]
    notes: list[str] = field(default_factory=list)
    defer: Callable[[Callable[[], None]], None] | None = None
    # The resident server's: epoch seconds past which the client has given up on this
    # request and answered it through its own in-process path (None: no limit).
    until: float | None = None
    # A hook process's deadline (`time.monotonic()`): past it the harness has had its
    # neutral answer, so what only the answer needs is skipped (`late`).
    answer_by: float | None = None
    # Recall bookkeeping the prompt deferred: upstream's (`store.recall(tracking=...)`),
    # or, for a semantic recall, the memories injected (`store.note_recalled`).
    tracking: list[Any] = field(default_factory=list)
    recalled: tuple[Any, list[Any]] | None = None
    # The prompt's query vector, started as soon as the prompt is known
    # (`query_vector`): the standing order and the recall share it.
    pending: Any = None
    _contexts: dict[tuple[str, str | None], MemoryContext | BaseException] = field(
        default_factory=dict)
    _failed: list[BaseException] = field(default_factory=list)

    def log(self, message: str, level: str = "error") -> None:
        log.write(message, harness=self.harness, event=self.kind, level=level, base=self.base)

    def failed(self, step: str, exc: BaseException) -> None:
        """Log a step's failure, once per failure: a context that cannot be resolved
        fails the early vector, the standing block and the recall alike, and is one
        problem, logged by the first of them."""
        if any(exc is seen for seen in self._failed):
            return
        self._failed.append(exc)
        self.log(f"{step}: {log.describe(exc)}")

    def late(self) -> bool:
        """Is the deadline past?  Then nobody waits for this call's answer: the event
        is still recorded, but no model is loaded, nothing is recalled, and no
        standing block or hint is marked as given to a session that never saw it."""
        return self.answer_by is not None and time.monotonic() >= self.answer_by

    def later(self, work: Callable[[], None]) -> None:
        if self.defer is not None:
            self.defer(work)
        else:
            work()

    def context(self, cwd: str, session_id: str | None) -> MemoryContext:
        """Where this event's reads go (`resolve_memory_context`), resolved once."""
        from ..workspace.context import resolve_memory_context

        key = (cwd, session_id)
        known = self._contexts.get(key)
        if known is None:
            try:
                known = resolve_memory_context(cwd, session_id, self.settings)
            except Exception as exc:
                known = exc  # the same failure for every later step: not resolved twice
            self._contexts[key] = known
        if isinstance(known, BaseException):
            raise known
        return known

    def query_vector(self, embed: Any, text: str) -> Any:
        """`text`'s vector on its way (`embed.PendingQuery`), started once per call."""
        from ..embed import PendingQuery

        self.pending = PendingQuery.reuse(self.pending, embed, text)
        return self.pending


# ─── Text preparation ──────────────────────────────────────────────────────

def clean_text(run: HookRun, text: str | None) -> str:
    """Injected context stripped and secrets scrubbed: safe to spool or store."""
    if not text:
        return ""
    from ..memory.scrub import clean_invisible, scrub
    from .strip import strip_injected

    stripped = clean_invisible(strip_injected(text))
    if not stripped:
        return ""
    policy = run.settings["scrub.policy"]
    result = scrub(stripped, policy)
    if result.found and policy == "warn":
        kinds = ", ".join(sorted(set(result.findings)))
        run.log(f"secrets stored as-is (scrub.policy: warn): {kinds}", level="warning")
    return result.text


def truncate(text: str, limit: int) -> str:
    """At most `limit` Unicode code points (0 = unlimited)."""
    return text if limit <= 0 or len(text) <= limit else text[:limit].rstrip()


def prepare(run: HookRun, role: str, text: str) -> str:
    limit = run.settings["capture.user_limit" if role == "user" else "capture.assistant_limit"]
    body = truncate(clean_text(run, text), int(limit))
    return f"{ROLE_PREFIX[role]}{body}" if body else ""


def usable_cwd(run: HookRun, event: HookEvent,
               otherwise: str = "no memory read or written") -> str | None:
    """The event's directory if it can be resolved; otherwise log (saying what
    happens instead) and give up."""
    cwd = event.cwd
    if not cwd and event.cwd_source == SEVERAL_ROOTS:
        run.log("the window's workspace roots are several projects and the event does "
                "not say which one this is about; nothing read or written", level="info")
        return None
    if not cwd:
        run.log("no directory in the event or environment; nothing to do", level="info")
        return None
    if not os.path.isabs(cwd) or not os.path.isdir(cwd):
        run.log(f"directory {cwd!r} ({event.cwd_source}) is not an existing absolute path; "
                f"{otherwise}", level="info")
        return None
    return cwd


# A session's turns typed before its directory went away (the repository moved or
# renamed mid-session) still reach the workspace each was typed in (`_write_context`).
SPOOLED_TURNS_GO_ON = ("nothing new is read or written there; the session's turns "
                       "typed before go to the workspace each was typed in")


# ─── Prompt ────────────────────────────────────────────────────────────────

def on_prompt(run: HookRun, event: HookEvent) -> None:
    settings = run.settings
    cwd = usable_cwd(run, event, "nothing is read there")
    if cwd is None:
        keep_prompt_from_a_gone_directory(run, event)
        run.emit(neutral_output(run.harness, run.kind))
        return
    text = clean_text(run, event.prompt) if not event.continuation else ""
    inject = HARNESSES[run.harness].can_inject and not event.continuation
    if inject:
        early_query_vector(run, cwd, event.session_id, text)  # beside the spool's write
    spool = Spool(run.base, run.harness, event.session_id, cwd, until=run.until)
    displaced: list[Turn] = []
    if text and settings["capture.enabled"]:
        try:
            # Durable first: the turn is in the spool before anything else can fail.
            displaced, dropped = spool.add_prompt(
                truncate(text, int(settings["capture.user_limit"])), cwd, event.session_id,
                workspace_key(cwd))
            if dropped:
                run.log(f"spool full ({MAX_PENDING} turns or {MAX_BYTES} bytes of a session "
                        f"that could not be stored): dropped the {dropped} oldest pending "
                        "turn(s)", level="warning")
        except GaveUp as exc:
            gave_up(run, exc)
            return
        except Exception as exc:  # noqa: BLE001 - a spool problem must not stop injection
            run.failed("spool", exc)
    context_text = None
    if inject and run.late():
        inject = False  # the harness went on without an answer: the turn is spooled
    if inject:
        parts: list[str] = []
        try:
            # Harnesses without a session-start hook (or installs without it) get
            # the standing memories with the session's first prompt instead.
            block = standing_block(run, cwd, event.session_id, spool, prompt=text)
            if block:
                parts.append(block)
        except Exception as exc:  # noqa: BLE001 - the recalled block still goes in
            run.failed("standing", exc)
        try:
            recalled = build_context(run, cwd, event.session_id, text, spool)
            if recalled:
                parts.append(recalled)
        except Exception as exc:  # noqa: BLE001 - no injection, but still store turns
            run.failed("recall", exc)
        context_text = "\n\n".join(parts) or None
    run.emit(format_output(run.harness, "prompt", context_text))
    session_id = event.session_id
    # An answer given after the deadline reached nobody: nothing was recalled for it.
    delivered = not run.late()

    def after() -> None:
        if run.tracking and delivered:
            _storage().record_recalls(run.tracking, run.base)
        if run.recalled and delivered:
            _storage().note_recalled(*run.recalled, base=run.base)
        if context_text and delivered:
            from ..harnesses.injections import record_injection

            record_injection(run.base, run.harness, session_id=session_id)
        if displaced:
            store_turns(run, spool, displaced)
        keep_vectors(run)

    run.later(after)


def keep_prompt_from_a_gone_directory(run: HookRun, event: HookEvent) -> None:
    """A prompt typed after the session's directory was deleted (a worktree removed,
    a build directory cleaned, the repository renamed): nothing is read there, but
    the prompt is spooled for the workspace the session's last prompt there was
    typed in, when it was in that directory or one above it.  Never a guess from
    another directory: without that record it is not captured (and the log says so)."""
    gone = event.cwd
    if (not gone or event.continuation or not run.settings["capture.enabled"]
            or not os.path.isabs(gone) or os.path.exists(gone)):
        return
    text = clean_text(run, event.prompt)
    if not text:
        return
    spool = Spool(run.base, run.harness, event.session_id, gone, until=run.until)
    workspace = spool.workspace_at(gone)
    if workspace is None:
        run.log(f"a prompt typed in {gone!r}, a directory that no longer exists, names no "
                "workspace this session was in: not captured", level="warning")
        return
    try:
        displaced, _ = spool.add_prompt(truncate(text, int(run.settings["capture.user_limit"])),
                                        gone, event.session_id, workspace)
    except GaveUp as exc:
        gave_up(run, exc)
        return
    run.log("the session's directory is gone: the prompt is kept for the workspace the "
            "session was in there", level="info")
    if displaced:
        run.later(lambda: store_turns(run, spool, displaced))


def workspace_key(cwd: str) -> str | None:
    """The identity key of the marker that binds `cwd`, if any: the marker alone
    (a few stats, no index and no lock), so the spool's write stays the prompt
    hook's first step; the index resolves it if the turn is ever stored from a
    directory that is gone."""
    from ..workspace import identity

    try:
        location = identity.find_workspace(Path(cwd))
    except Exception:  # noqa: BLE001 - the recall resolves it again, and logs
        return None
    uuid = location.workspace_uuid if location.found else None
    return identity.identity_key_for(uuid) if uuid else None


def keep_vectors(run: HookRun) -> None:
    """Leave the matrices this process read in their files for the next process
    (`semantic.persist`): after the answer, and only if it searched at all."""
    semantic = sys.modules.get("dsh_mnemo.memory.semantic")
    if semantic is None:
        return
    try:
        semantic.persist(run.base)
    except Exception as exc:  # noqa: BLE001 - a cache: the next process reads the bank
        run.log(f"vector file: {log.describe(exc)}", level="warning")


def early_query_vector(run: HookRun, cwd: str, session_id: str | None, text: str) -> None:
    """Start embedding the prompt now, if the model is loaded already (a resident
    server): it then runs beside the spool's write, the standing block and the
    recall's full-text candidates.  Only in a bound workspace, and of the text the
    recall searches (`recall_text`: the context it needs is resolved once per call).
    A hook process loads the model only once it knows the prompt will be recalled
    (`recall_block`), so an unbound directory never pays for it."""
    if not text.strip() or not run.settings["prefetch.enabled"]:
        return
    from ..memory import semantic

    try:
        embed = semantic.already_loaded(run.settings)
        if embed is None:
            return
        ctx = run.context(cwd, session_id)
        if ctx.bound:
            run.query_vector(embed, recall_text(text, ctx))
    except Exception as exc:  # noqa: BLE001 - the recall starts it again
        run.failed("query vector", exc)


def build_context(run: HookRun, cwd: str, session_id: str | None, query: str,
                  spool: Spool) -> str | None:
    """The block to inject, the bind hint (at most once a session), or None."""
    from ..workspace.context import REASON_UNBOUND

    settings = run.settings
    ctx = run.context(cwd, session_id)
    if not ctx.bound:
        if not (ctx.reason == REASON_UNBOUND and settings["hint.enabled"] and ctx.hint_root):
            return None
        from .inject import broken_marker_line, hint_line, lost_marker_line

        if ctx.problems:
            # `mnemo bind` would refuse here: say what is wrong instead.
            line = broken_marker_line(ctx.problems[0].path, ctx.problems[0].reason)
        elif _bindable(ctx.hint_root) and not _declined(ctx.hint_root,
                                                         int(settings["hint.decline_days"])):
            lost = _lost(ctx.hint_root)
            # A lost marker: the rebind that gives the memory back, not a new bind.
            line = lost_marker_line(ctx.hint_root, lost.displayName, lost.namespace) \
                if lost is not None else hint_line(ctx.hint_root)
        else:
            return None
        return line if not run.late() and spool.mark_hinted() else None
    if not settings["prefetch.enabled"] or not query.strip():
        return None
    return recall_block(run, ctx, query, spool)


def _bindable(root: str) -> bool:
    """`mnemo bind` refuses `$HOME`, `/` and the temporary directory: never suggest it there."""
    from ..workspace.identity import never_a_root

    try:
        return never_a_root(Path(root).resolve()) is None
    except (OSError, RuntimeError):
        return False


def _lost(root: str) -> Any:
    from ..workspace.binding import lost_workspace
    from ..workspace.index import Index

    return lost_workspace(Index(), root)


def _declined(root: str, days: int) -> bool:
    from ..workspace.binding import declined_recently
    from ..workspace.index import Index

    return declined_recently(Index(), root, days)


def _storage() -> Any:
    """The storage module; should Mnemosyne parse its YAML itself (no kept parse,
    `memory.upstream_config`), it does so with libyaml."""
    from ..memory import store as storage
    from ..memory import upstream_config
    from .speed import fast_yaml

    upstream_config.before_parse = fast_yaml
    return storage


def standing_block(run: HookRun, cwd: str, session_id: str | None, spool: Spool, *,
                   prompt: str | None = None, force: bool = False) -> str | None:
    """The standing memories of `cwd`'s workspace as their own fenced block, once per
    session and workspace."""
    if not run.settings["standing.enabled"] or run.late():
        return None
    ctx = run.context(cwd, session_id)
    # Keyed by the workspace whose standing memories these are (in session mode too,
    # where the namespace is the session's wherever it goes).
    where = ctx.workspace.namespace if ctx.workspace is not None else ""
    if not spool.mark_standing(where=where, force=force):
        return None
    from ..memory import standing
    from .inject import Line, pack_block

    items = standing.list_standing(ctx, run.base)
    if not items:
        spool.note_standing_given([])
        return None
    embed = embedder(run) if prompt else None
    text = recall_text(prompt, ctx) if prompt else ""
    ordered = standing.order_for(items, prompt=text or None, embed=embed, base=run.base,
                                 pending=run.query_vector(embed, text) if embed and text
                                 else None)
    name = ctx.display_name or "workspace"
    lines = [Line(content=s.content, level=s.level, timestamp=None) for s in ordered]
    block, fits = pack_block(lines, name, int(run.settings["standing.budget_chars"]),
                             kind="standing")
    # What the budget leaves out stays an ordinary memory for this session's recall.
    spool.note_standing_given([s.id for s, held in zip(ordered, fits, strict=True) if held])
    return block


def on_session_start(run: HookRun, event: HookEvent) -> None:
    """Give the model the standing memories (again after a compaction)."""
    cwd = usable_cwd(run, event)
    block = None
    if cwd is not None and HARNESSES[run.harness].can_inject:
        spool = Spool(run.base, run.harness, event.session_id, cwd)
        try:
            block = standing_block(run, cwd, event.session_id, spool,
                                   force=event.start_source in ("compact", "clear"))
        except Exception as exc:  # noqa: BLE001 - fail open
            run.failed("standing", exc)
    run.emit(format_output(run.harness, "session-start", block))


def embedder(run: HookRun) -> Any:
    """The embedding model, or None (lexical recall); a load failure is logged once."""
    from ..memory import semantic

    loaded = semantic.load(run.settings)
    if loaded.embedder is None and run.settings["embeddings.backend"] != "none":
        note_embedding_failure(run, loaded.reason or "unknown reason")
    return loaded.embedder


def note_embedding_failure(run: HookRun, reason: str) -> None:
    """One log line per distinct reason (not one per prompt): recall is lexical meanwhile.

    The reason is scrubbed before it is kept: an `EmbedError` names the URL,
    which may carry a token in its path or query.
    """
    from ..memory.scrub import scrub

    reason = scrub(reason).text
    state = run.base / "hook-state" / "embeddings.json"
    try:
        if json.loads(state.read_text(encoding="utf-8")).get("reason") == reason:
            return
    except (OSError, ValueError, AttributeError):
        pass
    run.log(f"embedding model unavailable, recall is lexical: {reason}", level="warning")
    try:
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text(json.dumps({"reason": reason}), encoding="utf-8")
    except OSError:
        pass


def recall_block(run: HookRun, ctx: MemoryContext, query: str, spool: Spool) -> str | None:
    storage = _storage()
    from . import gate
    from .inject import Line, render_block

    top_k = int(run.settings["prefetch.top_k"])
    if run.late():
        return None  # before the model's load and the search: the answer is given
    embed = embedder(run)
    text = recall_text(query, ctx)
    memories = storage.recall(ctx, text, top_k=gate.overfetch(top_k),
                              temporal_weight=gate.TEMPORAL_WEIGHT,
                              temporal_halflife=gate.TEMPORAL_HALFLIFE_HOURS, embed=embed,
                              tracking=run.tracking,
                              pending=run.query_vector(embed, text) if embed else None)
    from ..memory.standing import SOURCE as STANDING

    if any(m.source == STANDING for m in memories):
        # Standing memories reach the model once a session, in their own block: the
        # prompt-time block never repeats one.  One the block's budget left out (or
        # every one, when no block was given) is recalled like any other memory.
        given = spool.standing_given()
        memories = [m for m in memories
                    if m.source != STANDING or (given is not None and m.id not in given)]
    semantic = embed is not None and any("cosine" in m.signals for m in memories)
    chosen = (gate.select_semantic(memories, top_k, query) if semantic
              else gate.select(memories, top_k))
    if not chosen:
        return None
    if semantic:
        run.recalled = (ctx, chosen)
    lines = [Line(content=m.content, level=m.level, timestamp=m.timestamp) for m in chosen]
    name = ctx.display_name or ("session" if ctx.mode == "session" else "workspace")
    return render_block(lines, name, int(run.settings["prefetch.budget_chars"]))


# ─── Capture ───────────────────────────────────────────────────────────────

def _write_context(run: HookRun, cwd: str | None, session_id: str | None,
                   workspace: str | None = None) -> MemoryContext | None:
    """Where a turn typed in `cwd` goes: the workspace it was typed in (`workspace`,
    the marker's identity when the prompt came; a rebind followed), wherever that
    repository is now, even gone from `cwd` (moved or renamed mid-session, and
    perhaps another repository there now); else the workspace bound at `cwd` now;
    None (not stored, and said in the log when `cwd` is gone) when neither is known."""
    from ..workspace.context import resolve_known_workspace, resolve_memory_context

    mode = run.settings.auto_write_scope
    if workspace:
        known = resolve_known_workspace(workspace, session_id, mode=mode)
        if known is not None:
            return known
    if cwd and os.path.isdir(cwd):
        return resolve_memory_context(cwd, session_id, run.settings, mode=mode)
    if cwd:
        run.log(f"a turn typed in {cwd!r}, a directory that no longer exists, names no "
                "known workspace: not stored", level="warning")
    return None


def _target(ctx: MemoryContext) -> Target | None:
    from ..errors import UnboundError
    from ..memory.targets import write_target

    try:
        return write_target(ctx)
    except UnboundError:
        return None  # unbound directory (or no session id): nothing is captured there


def already_stored(target: Target, content: str, base: Path) -> bool:
    """Did a hook that died mid-write store this exact row already?"""
    from ..memory.banks import connect_readonly

    conn = connect_readonly(target.db_path(base))
    if conn is None:
        return False
    try:
        row = conn.execute("SELECT 1 FROM working_memory WHERE session_id = ? AND content = ? "
                           "LIMIT 1", (target.namespace, content)).fetchone()
        return row is not None
    finally:
        conn.close()


def store_one(run: HookRun, user: str | None, reply: str | None, cwd: str | None,
              session_id: str | None, *, check_duplicate: bool = False,
              workspace: str | None = None) -> Target | None:
    """Store one turn typed in `cwd` (in the workspace `workspace`, when known); the
    target written to, or None when nothing was stored."""
    from ..memory.banks import TALK_SOURCE

    storage = _storage()

    ctx = _write_context(run, cwd, session_id, workspace)
    target = _target(ctx) if ctx is not None else None
    if target is None:
        return None
    roles = run.settings["capture.roles"]
    wrote = False
    for role, text in (("user", user), ("assistant", reply)):
        if role not in roles or not text:
            continue
        content = prepare(run, role, text)
        if not content:
            continue
        if check_duplicate and already_stored(target, content, run.base):
            continue
        result = storage.remember_at(target, content, source=TALK_SOURCE,
                                     importance=IMPORTANCE[role], base=run.base,
                                     scrub_policy=run.settings["scrub.policy"],
                                     embed=embedder(run))
        if result.filtered:
            run.log(f"{role} text rejected by Mnemosyne's write filter", level="info")
        else:
            wrote = True
            if role == "user" and run.settings["capture.standing"] == "suggest":
                suggest_standing(run, ctx, content)
    return target if wrote else None


def suggest_standing(run: HookRun, ctx: MemoryContext, content: str) -> None:
    """File a captured standing statement as a candidate (`mnemo candidates`)."""
    from ..memory import standing
    from ..memory.targets import Target

    if ctx.workspace is None or not standing.looks_standing(content):
        return
    target = Target(bank=ctx.workspace.bank, namespace=ctx.workspace.namespace,
                    level="workspace")
    if standing.suggest(target, content, run.base):
        run.log("a standing statement was filed as a candidate (mnemo candidates)",
                level="info")


def store_turns(run: HookRun, spool: Spool, turns: list[Turn], *, attempt: int = 0) -> int:
    """Store claimed turns, each with its reply if it has one; returns turns stored.

    A turn the database sent back (busy, or any error) stays in the spool for
    the session's next hook.  In the resident server (`run.defer`) a session
    may have no next hook (its conversation is over), so the server tries
    again itself, later, with growing pauses (SERVER_RETRIES).
    """
    from ..errors import BusyError

    stored: list[Turn] = []
    failed: list[Turn] = []
    targets: list[tuple[str, str]] = []
    for turn in turns:
        try:
            target = _store_retrying(run, turn)
        except BusyError as exc:
            run.log(f"database busy, turn kept for later: {exc}")
            failed.append(turn)
            continue
        except Exception as exc:  # noqa: BLE001 - keep the turn for a later try
            run.failed("capture", exc)
            failed.append(turn)
            continue
        stored.append(turn)
        if target is not None:
            targets.append((target.bank, target.namespace))
    spool.finish(stored, targets, failed)
    if failed and run.defer is not None and attempt < len(SERVER_RETRIES):
        ids = {t.id for t in failed}
        pause = SERVER_RETRIES[attempt]

        def retry() -> None:
            import time

            time.sleep(pause)  # the housekeeping thread: no prompt waits for it
            again = spool.take(ids)
            if again:
                store_turns(run, spool, again, attempt=attempt + 1)

        run.defer(retry)
    # Consolidation is housekeeping the turns do not wait for: should it fail (a
    # busy bank, the counter's lock held), the turns are in, and what follows this
    # call (the retry above, a session's end, the recovery of abandoned spools)
    # still runs.  It is due again with the next turn.
    for bank, namespace in targets:
        try:
            count_turn(run, bank, namespace)
        except Exception as exc:  # noqa: BLE001 - logged; the turns are stored
            run.failed("consolidate", exc)
    return len(targets)


# Pauses before the resident server tries a sent-back turn again (15 s in all).
SERVER_RETRIES = (0.5, 1.0, 2.0, 4.0, 8.0)


# A write that meets another writer's snapshot fails at once (SQLite does not
# wait there); a short wait and a fresh try almost always succeed.
BUSY_RETRIES = (0.05, 0.2, 0.8)


def _store_retrying(run: HookRun, turn: Turn) -> Target | None:
    from ..errors import BusyError

    for pause in (*BUSY_RETRIES, None):
        try:
            # After a failed try the row may be in: check before writing again.
            return store_one(run, turn.text, turn.reply, turn.cwd, turn.session_id,
                             check_duplicate=turn.stale or pause != BUSY_RETRIES[0],
                             workspace=turn.workspace)
        except BusyError:
            if pause is None:
                raise
            import time

            time.sleep(pause)
    return None


def count_turn(run: HookRun, bank: str, namespace: str) -> None:
    """Every `capture.consolidate_every` captured turns of a namespace, consolidate if due."""
    every = int(run.settings["capture.consolidate_every"])
    if every <= 0:
        return
    from ..fsutil import file_lock, sha256_hex

    digest = sha256_hex(f"{bank}\0{namespace}".encode())[:32]
    folder = run.base / "hook-state"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"turns-{digest}.json"
    with file_lock(folder / f"turns-{digest}.lock", timeout=1.0, what="turn counter lock"):
        try:
            count = int(json.loads(path.read_text(encoding="utf-8")).get("count", 0))
        except (OSError, ValueError, AttributeError, TypeError):
            count = 0
        count += 1
        due = count >= every
        path.write_text(json.dumps({"count": 0 if due else count}), encoding="utf-8")
    if due:
        consolidate(run, bank, namespace)


def consolidate(run: HookRun, bank: str, namespace: str) -> Any:
    from ..memory.consolidate import consolidate_if_due

    result = consolidate_if_due(bank, namespace, run.base)
    embed = embedder(run) if result.status == "consolidated" else None
    if embed is not None:
        from .. import paths
        from ..memory import semantic

        semantic.fill(paths.bank_db_path(bank, run.base), namespace, embed)
    return result


def on_turn_end(run: HookRun, event: HookEvent) -> None:
    """Spool how the turn ended, answer, then store the session's pending turns."""
    if not run.settings["capture.enabled"]:
        run.emit(neutral_output(run.harness, run.kind))
        return
    cwd = usable_cwd(run, event, SPOOLED_TURNS_GO_ON)
    spool = Spool(run.base, run.harness, event.session_id, cwd or event.cwd, until=run.until)
    user = clean_text(run, event.user) if event.user else ""
    reply = None
    if "assistant" in run.settings["capture.roles"]:
        raw = event.assistant
        if raw is None and HARNESSES[event.harness].transcript_jsonl and event.transcript_path:
            raw = last_reply_from_transcript(event.transcript_path)
        reply = clean_text(run, raw) or None
    try:
        # Durable first: the turn's reply is in the spool before the harness goes on.
        # It pairs with a turn typed in the same workspace (or directory) only.
        turns, dropped = spool.end_turn(
            truncate(user, int(run.settings["capture.user_limit"])) or None,
            truncate(reply, int(run.settings["capture.assistant_limit"])) if reply else None,
            cwd, event.session_id, where=event.cwd,
            workspace=workspace_key(cwd) if cwd and (user or reply) else None)
    except GaveUp as exc:
        gave_up(run, exc)
        return
    finally:
        run.emit(neutral_output(run.harness, run.kind))  # nothing to say to the harness
    if dropped:
        run.log(f"spool full: dropped the {dropped} oldest pending turn(s)", level="warning")

    def after() -> None:
        if turns:
            store_turns(run, spool, turns)
        recover_abandoned(run, exclude=spool.path)

    run.later(after)


def gave_up(run: HookRun, exc: GaveUp) -> None:
    """A server request that stalled past its client's patience records nothing: the
    client's in-process fallback recorded the event (and may have stored it since)."""
    run.log(f"not recorded here: {exc}; its in-process fallback records it", level="info")


def on_session_end(run: HookRun, event: HookEvent) -> None:
    run.emit(neutral_output(run.harness, run.kind))
    cwd = usable_cwd(run, event, SPOOLED_TURNS_GO_ON) or event.cwd
    spool = Spool(run.base, run.harness, event.session_id, cwd)

    def after() -> None:
        if run.settings["capture.enabled"]:
            turns = spool.take_all()
            if turns:
                store_turns(run, spool, turns)
        final = spool.end_session()
        if final.captured:
            for bank, namespace in final.targets:
                try:
                    consolidate(run, bank, namespace)
                except Exception as exc:  # noqa: BLE001 - due again later; go on
                    run.failed("consolidate", exc)
        recover_abandoned(run, exclude=spool.path)

    run.later(after)


def recover_abandoned(run: HookRun, *, exclude: Path | None = None) -> None:
    """Store turns of sessions that went silent (a crash, a harness without
    session-end), and tidy the spool; bounded so a turn end stays quick."""
    from .spool import abandoned_spools, sweep

    for other in abandoned_spools(run.base, exclude=exclude, limit=3):
        turns = other.take_all()
        if turns:
            store_turns(run, other, turns)
    sweep(run.base)


HANDLERS: dict[str, Callable[[HookRun, HookEvent], None]] = {
    "session-start": on_session_start, "prompt": on_prompt, "turn-end": on_turn_end,
    "session-end": on_session_end,
}
