"""Remember, recall and forget: memory as the commands and hooks use it.

A write goes to exactly one bank; a recall reads the context's bank and the
global bank and merges them by score.  Two upstream behaviours shape this
module (docs/upstream.md):
- full-text candidates are picked across sessions before the session filter,
  so namespaces are kept in separate files and every recalled id is checked
  against its namespace before it is returned;
- every upstream write trims unconsolidated rows older than the TTL, so
  `protect_before_write` consolidates what is due before any write.

Upstream itself is reached only through `driver`, imported by the calls that
need it (a semantic prompt's recall does not: `lexical`); bank reads go
through `banks`.

Every entry point here runs under `fsutil.private_files`: the banks, their
`-wal`/`-shm` files and whatever else SQLite and Mnemosyne create for them
are private (docs/privacy.md) in a program that uses the library under its
own umask, as they are in a mnemo process.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .. import paths
from ..errors import RefusedError, UnboundError
from ..fsutil import private_files
from ..record import field, record
from ..workspace.context import MemoryContext
from . import banks
from .targets import GLOBAL_TARGET, Target, read_target, write_target

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any


# What a recalled row is (`mnemo recall --kind`): a memory (what was stored as
# one: `mnemo remember`, standing memories, MCP and imported notes), a captured
# conversation turn (`banks.TALK_SOURCE`: the user's own questions and
# requests, the assistant's replies), or a sleep summary (`banks.SUMMARY_SOURCE`:
# rows that are still there, repeated).
MEMORY_KIND, TURN_KIND, SUMMARY_KIND = "memory", "turn", "summary"
KINDS = (MEMORY_KIND, TURN_KIND, SUMMARY_KIND)


def kind_of(source: str | None) -> str:
    """The kind (`KINDS`) of a row stored with `source`."""
    if source == banks.TALK_SOURCE:
        return TURN_KIND
    if source == banks.SUMMARY_SOURCE:
        return SUMMARY_KIND
    return MEMORY_KIND


@record
class Memory:
    id: str
    content: str
    score: float
    level: str  # "workspace" | "session" | "global"
    timestamp: str | None
    source: str | None
    importance: float
    tier: str | None  # "working" | "episodic"
    bank: str
    signals: dict[str, Any] = field(default_factory=dict)  # keyword/fts/dense scores, match kind
    # Its unit vector when recall was semantic: the gate compares candidates
    # with each other (near-duplicates, a later fact superseding an earlier).
    vector: Any = field(default=None, repr=False, compare=False, metadata={"json": False})
    kind: str = ""  # `KINDS`: from `source` when not given

    def __post_init__(self) -> None:
        if not self.kind:
            self.kind = kind_of(self.source)


@record
class WriteResult:
    id: str | None  # None when the write filter rejected the text
    filtered: bool
    bank: str
    namespace: str
    level: str
    consolidated_first: int = 0  # rows consolidated by the no-loss guard
    secrets: list[str] = field(default_factory=list)  # kinds found by the scrubber
    scrub_policy: str = "redact"  # what was done about them
    embedded: bool = False  # a vector was stored for semantic recall
    standing: bool = False  # a rule or preference given to the model every session
    # The text was already a memory there (upstream keeps one row per text: the
    # write stored nothing new and `id` is that row's); not looked up for a
    # captured conversation turn.
    existed: bool = False


@record
class ForgetResult:
    id: str
    bank: str
    level: str
    deleted: dict[str, int]  # per tier: working_memory, episodic_memory, memories
    copies: dict[str, int] = field(default_factory=dict)  # extracted copies, edges, vectors


@private_files()
def protect_before_write(target: Target, base: Path | None = None) -> int:
    """Consolidate rows that the write's trim would otherwise delete.

    Upstream's trim deletes unconsolidated rows older than the TTL, and all
    but the newest `MNEMOSYNE_WM_MAX_ITEMS`.  Consolidated rows survive it,
    so everything sleep considers due (older than TTL/2) is consolidated
    first, and when the unconsolidated backlog reaches the item cap it is
    consolidated whatever its age.  Returns the rows consolidated.
    """
    db_path = target.db_path(base)
    conn = banks.connect_readonly(db_path)
    if conn is None:
        return 0
    try:
        with banks.translate_sqlite_errors(db_path):
            due = banks.due_counts(conn, banks.sleep_cutoff(), target.namespace)
            backlog = banks.count(conn, "SELECT COUNT(*) FROM working_memory WHERE "
                                  "session_id = ? AND consolidated_at IS NULL",
                                  (target.namespace,))
            try:
                pinned = banks.count(conn, "SELECT COUNT(*) FROM working_memory WHERE "
                                     "session_id = ? AND pinned = 1 AND consolidated_at IS NULL",
                                     (target.namespace,))
            except sqlite3.OperationalError:
                pinned = 0  # a schema from before upstream's pinned column
    finally:
        conn.close()
    if pinned:
        from . import driver

        driver.protect_pinned(target, base)
    cap = banks.max_items() - 1
    if not due and backlog < cap:
        return 0
    from .consolidate import consolidate

    result = consolidate(target, base=base, force=backlog >= cap, wait=30.0)
    return result.items_consolidated


# ─── Remember / recall / forget ────────────────────────────────────────────

@private_files()
def remember(ctx: MemoryContext, text: str, *, level: str | None = None,
             source: str = "user", importance: float = 0.5,
             base: Path | None = None, scrub_policy: str = "redact",
             embed: Any = None) -> WriteResult:
    target = write_target(ctx, level)
    return remember_at(target, text, source=source, importance=importance, base=base,
                       scrub_policy=scrub_policy, embed=embed)


@private_files()
def remember_at(target: Target, text: str, *, source: str = "user", importance: float = 0.5,
                base: Path | None = None, scrub_policy: str = "redact",
                embed: Any = None) -> WriteResult:
    """Write one memory; the one write path every caller takes.

    The text is scrubbed of secrets first (`scrub.policy`: `redact` replaces
    them, `warn` keeps them and reports their kinds, `off`), so no secret
    reaches the bank from `remember`, hooks, imports or MCP alike.  With an
    embedder its vector is stored beside it (a model that fails leaves the
    memory without one, for `mnemo reindex`).
    """
    if not text or not text.strip():
        raise RefusedError("nothing to remember: the text is empty")
    if "\x00" in text:
        raise RefusedError("the text contains NUL bytes; nothing was written")
    if not 0.0 <= importance <= 1.0:
        raise RefusedError(f"importance must be between 0 and 1, not {importance}")
    from . import driver
    from .scrub import clean_invisible, scrub

    # Invisible characters can hide instructions from a reader whatever the
    # secret policy; lone surrogates cannot be stored at all.
    scrubbed = scrub(clean_invisible(text), scrub_policy)
    # the source is a free label (`--source`): it goes to disk beside the text
    source = scrub(clean_invisible(source), scrub_policy).text if source else source
    consolidated = protect_before_write(target, base)
    # The rows that already hold this text, read before the write (afterwards the
    # row is there either way); a captured turn skips the look.
    held = _holding(target, scrubbed.text, base) if source != banks.TALK_SOURCE else {}
    # The vector is computed before the row is written, and stored right after it: a
    # row visible without its vector is one the semantic gate cannot inject, and a
    # prompt in another harness may come while a slow (loaded) machine embeds it.
    vector = None
    if embed is not None:
        from ..embed import EmbedError

        try:
            vector = embed.embed_documents([scrubbed.text])[0]
        except EmbedError:
            vector = None
    memory_id = driver.remember(target, scrubbed.text, source=source, importance=importance,
                                base=base)
    if memory_id in held:
        from .standing import SOURCE as STANDING_SOURCE

        # Upstream's exact-text dedup gives the row the new write's source: a
        # standing memory remembered again as a plain one would stop being standing.
        if held[memory_id] == STANDING_SOURCE and source != STANDING_SOURCE:
            _keep_standing(target, memory_id, STANDING_SOURCE, base)
    vectors = 0
    if memory_id is not None and vector is not None:
        from . import semantic

        vectors = semantic.store(target.db_path(base), embed, [(memory_id, scrubbed.text)],
                                 vectors=[vector])
    return WriteResult(id=memory_id, filtered=memory_id is None, bank=target.bank,
                       namespace=target.namespace, level=target.level,
                       consolidated_first=consolidated,
                       secrets=sorted(set(scrubbed.findings)), scrub_policy=scrub_policy,
                       embedded=bool(vectors), existed=memory_id in held)


def _holding(target: Target, text: str, base: Path | None) -> dict[str, str]:
    """The rows of `target`'s namespace whose text is `text`: id -> source."""
    db_path = target.db_path(base)
    with banks.reader(db_path) as conn, banks.translate_sqlite_errors(db_path):
        if conn is None:
            return {}
        return {str(row[0]): str(row[1]) for row in banks.rows(
            conn, "SELECT id, source FROM working_memory WHERE session_id = ? AND content = ?",
            (target.namespace, text))}


def _keep_standing(target: Target, memory_id: str, source: str, base: Path | None) -> None:
    from . import driver

    memory = driver.instance(target, base)
    with banks.translate_sqlite_errors(target.db_path(base)):
        memory.conn.execute("UPDATE working_memory SET source = ? WHERE id = ? AND "
                            "session_id = ?", (source, memory_id, target.namespace))
        memory.conn.commit()


def _owned_ids(db_path: Path, namespace: str, ids: list[str], *,
               allow_global: bool) -> set[str]:
    """The subset of `ids` that really belongs to `namespace` (or is global)."""
    conn = banks.connect_readonly(db_path)
    if conn is None or not ids:
        return set()
    marks = ",".join("?" * len(ids))
    clause = "(session_id = ? OR scope = 'global')" if allow_global else "session_id = ?"
    owned: set[str] = set()
    try:
        for table in ("working_memory", "episodic_memory"):
            owned.update(row[0] for row in banks.rows(
                conn, f"SELECT id FROM {table} WHERE id IN ({marks}) AND {clause}",
                (*ids, namespace)))
    finally:
        conn.close()
    return owned


# Upper bound of the deeper second look in a shared bank (upstream scores
# up to three times as many full-text candidates).
SHARED_BANK_MAX_FETCH = 3000


def _shared_bank_rows(db_path: Path, namespace: str) -> int:
    """Rows in the bank's working and episodic tiers if other namespaces share it, else 0.

    The existence check is three index seeks per table, so a bank of its own
    (every workspace in workspace mode) costs next to nothing here.
    """
    conn = banks.connect_readonly(db_path)
    if conn is None:
        return 0
    tables = banks.MEMORY_TABLES
    try:
        shared = any(banks.count(conn, f"""SELECT EXISTS(SELECT 1 FROM {t} WHERE session_id > ?)
                                          OR EXISTS(SELECT 1 FROM {t} WHERE session_id < ?)
                                          OR EXISTS(SELECT 1 FROM {t} WHERE session_id IS NULL)""",
                            (namespace, namespace)) for t in tables)
        if not shared:
            return 0
        return sum(banks.count(conn, f"SELECT COUNT(*) FROM {t}") for t in tables)
    finally:
        conn.close()


def _recall_one(target: Target, query: str, fetch: int, base: Path | None, *,
                want: int | None = None, **kwargs: Any) -> list[Memory]:
    from . import driver

    db_path = target.db_path(base)
    if not db_path.exists():
        return []  # never create a bank just to read it
    with banks.translate_sqlite_errors(db_path):
        rows = driver.recall(target, query, top_k=fetch, base=base, **kwargs)
        owned = _owned_ids(db_path, target.namespace, [str(r.get("id")) for r in rows],
                           allow_global=True)
        if len(owned) < (want or fetch):
            # A bank shared by several namespaces (a workspace and its sessions,
            # or the default bank's unbound sessions) is subject to upstream's
            # candidate starvation: its full-text stage keeps max(top_k*3, 50)
            # candidates across every session before filtering.  When this
            # namespace came back short, look again with enough candidates to
            # cover the whole bank (bounded), so other namespaces cannot hide it.
            total = _shared_bank_rows(db_path, target.namespace)
            deeper = min(total // 3 + 1, SHARED_BANK_MAX_FETCH)
            if total and deeper > fetch:
                rows = driver.recall(target, query, top_k=deeper, base=base, **kwargs)
                owned = _owned_ids(db_path, target.namespace,
                                   [str(r.get("id")) for r in rows], allow_global=True)
    results = []
    for row in rows:
        memory_id = str(row.get("id"))
        if memory_id not in owned:
            continue  # defence in depth: never return a row of another namespace
        level = "global" if row.get("scope") == "global" else target.level
        signals = {k: row.get(k) for k in ("keyword_score", "fts_score", "dense_score",
                                           "fact_match", "entity_match", "recency_decay")
                   if k in row}
        results.append(Memory(
            id=memory_id, content=str(row.get("content") or ""),
            score=float(row.get("score") or 0.0), level=level,
            timestamp=row.get("timestamp"), source=row.get("source"),
            importance=float(row.get("importance") or 0.0), tier=row.get("tier"),
            bank=target.bank, signals=signals))
    return results


# A memory in the lexical top few gets this much on top of its cosine: a rare
# word shared with the prompt (an identifier, a command) is real evidence
# that similarity alone can miss.
LEXICAL_BONUS = 0.02
LEXICAL_TOP = 5


@private_files()
def _check_query(query: str, top_k: int) -> None:
    if not query or not query.strip():
        raise RefusedError("the query is empty")
    if top_k < 1:
        raise RefusedError("--top-k must be at least 1")


def recall(ctx: MemoryContext, query: str, *, top_k: int = 5, temporal_weight: float = 0.0,
           temporal_halflife: float | None = None, base: Path | None = None,
           embed: Any = None, tracking: list[Any] | None = None,
           pending: Any = None) -> list[Memory]:
    """The context's memories plus global ones matching `query`, best first.

    With an embedder the recall is hybrid and mnemo's own: the full-text
    matches of both banks (`lexical`, read from their indexes) and their
    nearest vectors, fused (cosine, plus a bonus for the full-text top few),
    every id checked against its namespace; upstream is not involved (nor
    imported).  Each result then carries `signals["cosine"]` and the prompt's
    score profile over the namespace (`best`, `mean`, `std`, `count`) for the
    prefetch gate.  Without an embedder, or when it fails mid-call, the recall
    is upstream's (its lexical scoring, importance and recency).  With a
    `tracking` list that recall only reads (`driver.recall`): apply what it
    collects with `record_recalls` once the answer is out.  `pending` is
    the query's vector already on its way (`embed.PendingQuery` of `embed`
    and `query`), when the caller started it earlier.
    """
    _check_query(query, top_k)
    if embed is not None:
        # The query's embedding and then the nearest vectors run in a thread of
        # their own while this one reads the full-text matches (C and numpy
        # release the GIL): a prompt waits for the slower of the two.
        from ..embed import PendingQuery

        leg = _VectorLeg(ctx, PendingQuery.reuse(pending, embed, query), embed.model_id,
                         nearest_fetch(top_k), base)
        matches = _text_matches(ctx, query, top_k=top_k, base=base)
        searched = leg.result()
        if searched is not None:
            from ..embed.calibration import scale_for

            return _hybrid(matches, searched, embed.model_id, top_k=top_k, base=base,
                           scale=scale_for(embed, base or paths.data_dir()))
        # the model failed: exactly the recall without one
    return _lexical(ctx, query, top_k=top_k, base=base, temporal_weight=temporal_weight,
                    temporal_halflife=temporal_halflife, tracking=tracking)


def nearest_fetch(top_k: int) -> int:
    """How many nearest vectors per bank a hybrid recall of `top_k` considers."""
    return max(top_k * 3, 15)


@record
class Found:
    """The rows of some kinds that match a query (`search`)."""

    results: list[Memory]  # best first
    # Per kind not searched, its rows among the best `top_k` of every kind (what
    # `recall` would have given): what the search left out.
    left_out: dict[str, int] = field(default_factory=dict)


# How deep `search` looks, at most, for rows of the kinds it was asked for: the
# recall of every kind at this `top_k` (its vector leg takes three times as
# many nearest rows per bank).
MAX_SEARCH_DEPTH = 900


@private_files()
def search(ctx: MemoryContext, query: str, *, kinds: Any = KINDS, top_k: int = 5,
           embed: Any = None, base: Path | None = None) -> Found:
    """The best `top_k` rows of `kinds` (`KINDS`) matching `query`: `mnemo recall`.

    The rows are `recall`'s, with the same scores, and the other kinds taken
    out.  A chatty workspace holds many more captured turns than memories, so
    the recall goes deeper (up to `MAX_SEARCH_DEPTH`) until it has `top_k`
    rows of these kinds or nothing more matches.  Past that depth, the rows of
    these kinds that hold a word of the query still come, after the others:
    the full-text match, in its order, without a score (0.0; `signals` holds
    `fts_rank`), so that a memory is never hidden behind a thousand turns.

    Only the rows returned count as recalled (upstream's lexical recall would
    count every row it looked at, at every depth).
    """
    wanted = frozenset(kinds)
    if not wanted or not wanted <= frozenset(KINDS):
        raise RefusedError(f"unknown kind of memory: {', '.join(sorted(wanted - set(KINDS)))}"
                           if wanted else "no kind of memory to search",
                           hint=f"Kinds: {', '.join(KINDS)}.")
    _check_query(query, top_k)
    pending = None
    if embed is not None:
        from ..embed import PendingQuery

        pending = PendingQuery(embed, query)  # embedded once, whatever the depth
    depth = top_k
    while True:
        tracking: list[Any] = []
        pool = recall(ctx, query, top_k=depth, embed=embed, base=base, tracking=tracking,
                      pending=pending)
        if (sum(m.kind in wanted for m in pool) >= top_k or len(pool) < depth
                or depth >= MAX_SEARCH_DEPTH):
            break
        depth = min(depth * 4, MAX_SEARCH_DEPTH)
    results = [m for m in pool if m.kind in wanted][:top_k]
    if len(results) < top_k and len(pool) >= depth:  # cut at the deepest: more rows match
        seen = {m.id for m in results}
        results += [m for m in _text_matches(ctx, query, top_k=top_k, base=base, kinds=wanted)
                    if m.id not in seen][:top_k - len(results)]
    left_out: dict[str, int] = {}
    for memory in pool[:top_k]:
        if memory.kind not in wanted:
            left_out[memory.kind] = left_out.get(memory.kind, 0) + 1
    if tracking and results:
        # upstream's recall ran (no model): count what is shown, as it would have
        note_recalled(ctx, results, base=base)
    return Found(results=results, left_out=left_out)


def _kinds_clause(kinds: frozenset[str]) -> tuple[str, tuple[str, ...]]:
    """An SQL condition on a row `m` (`lexical.search`) that holds for `kinds`."""
    clauses: list[str] = []
    args: list[str] = []
    for kind in sorted(kinds):
        if kind == MEMORY_KIND:
            clauses.append("m.source IS NULL OR m.source NOT IN (?, ?)")
            args += [banks.TALK_SOURCE, banks.SUMMARY_SOURCE]
        else:
            clauses.append("m.source = ?")
            args.append(banks.TALK_SOURCE if kind == TURN_KIND else banks.SUMMARY_SOURCE)
    return " OR ".join(f"({c})" for c in clauses), tuple(args)


@record
class _Searched:
    """One bank's nearest vectors to the prompt, with their rows."""

    target: Target
    candidates: list[Any]  # semantic.Candidate, best first
    profile: Any  # semantic.Profile: the prompt's scores over the namespace
    rows: dict[str, Memory]  # the candidates' memories, read from the bank


class _VectorLeg:
    """The query vector, then each bank's nearest memories, in a thread of their own.

    `result()` is a `_Searched` per bank (the context's, then the global one),
    or None when the model failed (the recall is lexical); other errors are
    raised in the caller's thread."""

    def __init__(self, ctx: MemoryContext, pending: Any, model_id: str, limit: int,
                 base: Path | None) -> None:
        from ..threads import InThread

        own = read_target(ctx)
        self._targets = [own] + ([GLOBAL_TARGET] if own.bank != paths.GLOBAL_BANK else [])
        self._pending, self._model_id, self._limit, self._base = pending, model_id, limit, base
        self._call = InThread(self._search, "mnemo-vector-recall")

    def _search(self) -> list[_Searched] | None:
        from . import semantic

        vector = self._pending.result()
        if vector is None:
            return None
        found = []
        for target in self._targets:
            db_path = target.db_path(self._base)
            candidates, profile = semantic.search(db_path, target.namespace, vector,
                                                  self._model_id, limit=self._limit,
                                                  base=self._base)
            rows = {m.id: m for m in _rows_by_id(target, [c.id for c in candidates],
                                                  self._base)}
            found.append(_Searched(target, candidates, profile, rows))
        return found

    def result(self) -> list[_Searched] | None:
        return self._call.result()


def _joint_profile(profiles: list[Any]) -> dict[str, float]:
    """best, mean, std and count of the prompt's scores over the banks' memories
    (`semantic.Profile` each; a memory both banks scored counts once; captured
    conversation turns left out, as `semantic.profile_of` does)."""
    from ..embed import flat
    from .semantic import profile_of

    banks = [p for p in profiles if p.scores is not None and len(p.scores)]
    if not banks:
        return {"best": 0.0, "mean": 0.0, "std": 0.0, "count": 0}
    if len(banks) == 1:
        only = banks[0]
        return {"best": only.best, "mean": only.mean, "std": only.std, "count": only.count}
    first, last = banks[0], banks[-1]
    kept = sorted(at for i, at in last.index.items() if i not in first.index)
    facts = bytearray(first.facts if first.facts is not None else b"\x01" * len(first.scores))
    facts += bytes(last.facts[at] if last.facts is not None else 1 for at in kept)
    if any(flat.is_flat(p.scores) for p in banks):
        from array import array

        values: Any = array("f", first.scores)
        values.extend(float(last.scores[at]) for at in kept)
    else:
        import numpy as np

        values = np.concatenate([first.scores, last.scores[np.asarray(kept, dtype=np.intp)]])
    count, (best, mean, std) = profile_of(values, facts)
    return {"best": best, "mean": mean, "std": std, "count": count}


@private_files()
def record_recalls(tracking: list[Any], base: Path | None = None) -> int:
    """Apply the recall bookkeeping a `recall(tracking=...)` deferred."""
    if not tracking:
        return 0
    from . import driver

    return driver.record_recalls(tracking, base)


# A count is not a memory: a bank busy for longer than this keeps its old count.
NOTE_BUSY_SECONDS = 1.0


@private_files()
def note_recalled(ctx: MemoryContext, memories: list[Memory], *,
                  base: Path | None = None) -> int:
    """Count `memories` (a semantic recall's, as the prompt injected them) as recalled.

    Upstream's recall bumps `recall_count` and sets `last_recalled` of every
    row it returns; a semantic recall does not go through it, so the
    memories a prompt actually delivered are counted here the same way
    (same columns, same namespace check), straight in their banks.  Best
    effort, after the answer: returns the rows updated.
    """
    from datetime import datetime

    own = read_target(ctx)
    targets = {own.bank: own, GLOBAL_TARGET.bank: GLOBAL_TARGET}
    by_table: dict[tuple[str, str], list[str]] = {}
    for memory in memories:
        table = "episodic_memory" if memory.tier == "episodic" else "working_memory"
        if memory.bank in targets:
            by_table.setdefault((memory.bank, table), []).append(memory.id)
    now = datetime.now().isoformat()
    updated = 0
    for (bank, table), ids in by_table.items():
        target = targets[bank]
        db_path = target.db_path(base)
        if not db_path.exists():
            continue
        try:
            conn = sqlite3.connect(db_path, timeout=NOTE_BUSY_SECONDS)
        except sqlite3.Error:
            continue
        try:
            # as driver sets on its own connections: no fsync per count
            conn.execute("PRAGMA synchronous=NORMAL")
            with conn:
                updated += conn.execute(
                    f"UPDATE {table} SET recall_count = recall_count + 1, last_recalled = ? "
                    f"WHERE id IN ({','.join('?' * len(ids))}) "
                    "AND (session_id = ? OR scope = 'global')",
                    (now, *ids, target.namespace)).rowcount
        except sqlite3.Error:
            pass  # busy or not an upstream bank: the count stays as it was
        finally:
            conn.close()
    return updated


def _lexical(ctx: MemoryContext, query: str, *, top_k: int, base: Path | None,
             temporal_weight: float, temporal_halflife: float | None,
             tracking: list[Any] | None = None) -> list[Memory]:
    own = read_target(ctx)
    # Upstream's full-text stage takes max(top_k*3, 50) candidates across all
    # sessions of a file; asking for more keeps a small namespace visible in a
    # shared file (the default bank) without costing much in a bank of its own.
    fetch = max(top_k, 20)
    kwargs: dict[str, Any] = {"temporal_weight": temporal_weight, "tracking": tracking}
    if temporal_halflife is not None:
        kwargs["temporal_halflife"] = temporal_halflife
    merged = _recall_one(own, query, fetch, base, want=top_k, **kwargs)
    if own.bank != paths.GLOBAL_BANK:
        seen = {m.id for m in merged}
        merged += [m for m in _recall_one(GLOBAL_TARGET, query, fetch, base, want=top_k,
                                          **kwargs)
                   if m.id not in seen]
    merged.sort(key=lambda m: m.score, reverse=True)
    return merged[:top_k]


def _text_matches(ctx: MemoryContext, query: str, *, top_k: int,
                  base: Path | None, kinds: frozenset[str] | None = None) -> list[Memory]:
    """The full-text leg of a semantic recall: the context's bank, then the global
    one, read straight from their indexes (`lexical`), best first; only rows of
    `kinds` (`KINDS`) when given."""
    from . import lexical

    where, args = _kinds_clause(kinds) if kinds else ("", ())

    own = read_target(ctx)
    targets = [own] + ([GLOBAL_TARGET] if own.bank != paths.GLOBAL_BANK else [])
    found: list[tuple[float, Memory]] = []
    seen: set[str] = set()
    for target in targets:
        db_path = target.db_path(base)
        for match in lexical.search(db_path, target.namespace, query, limit=top_k,
                                    where=where, args=args):
            if match.id in seen:
                continue
            seen.add(match.id)
            found.append((match.rank, Memory(
                id=match.id, content=match.content, score=0.0,
                level="global" if match.scope == "global" else target.level,
                timestamp=match.timestamp, source=match.source, importance=match.importance,
                tier=match.tier, bank=target.bank, signals={"fts_rank": match.rank})))
    found.sort(key=lambda pair: pair[0])
    return [memory for _, memory in found[:top_k]]


def _hybrid(lexical_hits: list[Memory], searched: list[_Searched], model_id: str, *,
            top_k: int, base: Path | None, scale: Any = None) -> list[Memory]:
    """Fuse `lexical_hits` (`_text_matches` of the same `top_k`) with each bank's
    nearest vectors (`_VectorLeg`).

    The vectors are searched wider than the full-text matches (`nearest_fetch`):
    both are cheap, but full-text ranks past `top_k` could only add memories
    whose similarity the gate rejects.  A match without a vector yet (`mnemo
    reindex`) keeps a score of 0: similarity cannot vouch for it, so it comes
    after every memory that has one, in full-text order.  `scale` is the
    model's `embed.calibration.Scale` (None for the packaged model): each result
    carries it as `signals["scale"]` for the gate.
    """
    from . import semantic

    lexical: dict[str, tuple[int, Memory]] = {}
    for rank, memory in enumerate(lexical_hits):
        lexical.setdefault(memory.id, (rank, memory))
    found: dict[str, Memory] = {}
    profiles = [bank.profile for bank in searched]
    vectors: dict[str, Any] = {}
    for bank in searched:
        target, bank_profile = bank.target, bank.profile
        db_path = target.db_path(base)
        vectors.update({c.id: c.vector for c in bank.candidates})
        for c in bank.candidates:
            if c.id not in lexical and c.id in bank.rows:
                found.setdefault(c.id, bank.rows[c.id])
        # lexical hits of this bank need their vectors for the gate's comparisons
        missing = [i for i, (_, m) in lexical.items() if m.bank == target.bank
                   and i in bank_profile and i not in vectors]
        vectors.update(semantic.vectors_of(db_path, missing, model_id))
    for memory_id, (_, memory) in lexical.items():
        found.setdefault(memory_id, memory)
    # The prompt's profile over both banks' memories (a global row found in the
    # workspace bank's scope-global rows counts once).
    profile = _joint_profile(profiles)

    def cosine_of(memory_id: str) -> float | None:
        for bank_profile in profiles:
            value = bank_profile.cosine(memory_id)
            if value is not None:
                return value
        return None

    results: list[Memory] = []
    for memory in found.values():
        cosine = cosine_of(memory.id)
        rank = lexical[memory.id][0] if memory.id in lexical else None
        memory.signals.update(profile, cosine=cosine, lexical_rank=rank)
        if scale is not None:
            memory.signals["scale"] = scale
        memory.vector = vectors.get(memory.id)
        if cosine is not None:
            memory.score = cosine + (LEXICAL_BONUS if rank is not None and rank < LEXICAL_TOP
                                     else 0.0)
        results.append(memory)
    results.sort(key=lambda m: m.score, reverse=True)
    return results[:top_k]


def _rows_by_id(target: Target, ids: list[str], base: Path | None) -> list[Memory]:
    """Memories found by similarity, read straight from the bank (namespace-checked)."""
    if not ids:
        return []
    db_path = target.db_path(base)
    found: list[Memory] = []
    with banks.reader(db_path) as conn, banks.translate_sqlite_errors(db_path):
        if conn is None:
            return []
        # in slices: an SQLite older than 3.32 takes at most 999 parameters
        for start in range(0, len(ids), IDS_PER_STATEMENT):
            some = ids[start:start + IDS_PER_STATEMENT]
            marks = ",".join("?" * len(some))
            for table, tier in (("working_memory", "working"), ("episodic_memory", "episodic")):
                for row in banks.rows(
                        conn, f"SELECT id, content, timestamp, source, importance, scope "
                              f"FROM {table} WHERE id IN ({marks}) "
                              f"AND (session_id = ? OR scope = 'global')",
                        (*some, target.namespace)):
                    found.append(Memory(
                        id=str(row[0]), content=str(row[1] or ""), score=0.0,
                        level="global" if row[5] == "global" else target.level,
                        timestamp=row[2], source=row[3], importance=float(row[4] or 0.0),
                        tier=tier, bank=target.bank))
    return found


IDS_PER_STATEMENT = 900


# Characters of an id that may stand for it when no other id starts with them,
# as git takes an abbreviated hash (`mnemo forget`, `standing remove`, `candidates`).
MIN_ID_PREFIX = 4
# How long a forget waits for a sleep of the same namespace (as long as a sleep
# waits for another one).
FORGET_WAIT_SECONDS = 30.0


def one_by_prefix(given: str, matches: list[str], what: str, where: str, hint: str
                  ) -> str | None:
    """The one id of `matches` (the ids that start with `given`), None when there is
    none or `given` is shorter than `MIN_ID_PREFIX`; a prefix they share is refused."""
    if len(given) < MIN_ID_PREFIX or not matches:
        return None
    if len(matches) > 1:
        raise RefusedError(f"{given} starts {len(matches)} {what} ids {where} "
                           f"({', '.join(matches[:5])}): give more of it; nothing was changed",
                           hint=hint)
    return matches[0]


def resolve_id(given: str, ids: list[str], what: str, where: str, hint: str) -> str:
    """The id of `ids` that `given` names: itself, or the one it is a prefix of."""
    given = given.strip()
    if given in ids:
        return given
    chosen = one_by_prefix(given, sorted({i for i in ids if i.startswith(given)}), what, where,
                           hint)
    if chosen is None:
        raise RefusedError(f"no {what} {given} {where}", hint=hint)
    return chosen


@private_files()
def forget(ctx: MemoryContext, memory_id: str, *, base: Path | None = None) -> ForgetResult:
    """Delete one row of the current namespace, or a global row; refuse anything else.

    `memory_id` may be the first `MIN_ID_PREFIX` or more characters of the id
    when exactly one row the context may delete starts with them."""
    memory_id = memory_id.strip()
    if not memory_id:
        raise RefusedError("no memory id given")
    try:
        own: Target | None = read_target(ctx)
    except UnboundError as unbound:
        # Global rows can be forgotten from anywhere, an unbound directory too;
        # anything else needs the namespace this context does not have.
        own, no_namespace = None, unbound
    targets = (own, GLOBAL_TARGET) if own else (GLOBAL_TARGET,)
    found = next(((t, memory_id) for t in targets
                  if _deletable(t, memory_id, base)), None)
    if found is None and len(memory_id) >= MIN_ID_PREFIX:  # spares the query
        matches = [(t, i) for t in targets for i in sorted(_ids_starting(t, memory_id, base))]
        chosen = one_by_prefix(memory_id, [i for _, i in matches], "memory", "here",
                               "`mnemo recall` shows the ids you can forget here.")
        found = next((m for m in matches if m[1] == chosen), None)
    if found is None:
        if own is None:
            raise no_namespace
        raise RefusedError(
            f"no memory {memory_id} in this {own.level} or in global memory: it does not "
            "exist or belongs to another workspace; nothing was deleted",
            hint="`mnemo recall` shows the ids you can forget here.")
    target, memory_id = found
    allow_global = target is GLOBAL_TARGET
    from ..fsutil import file_lock
    from . import consolidate, driver

    # A sleep of the namespace claims its rows, then writes their summary: a forget
    # in between would find no summary to delete and leave the one written after it
    # holding the forgotten text.  So a forget waits for that sleep to end.
    with file_lock(consolidate.lock_path(target, base), timeout=FORGET_WAIT_SECONDS,
                   what="consolidation lock"):
        deleted = driver.delete(target, memory_id, allow_global=allow_global, base=base)
    tiers = ("working_memory", "episodic_memory", "memories")
    return ForgetResult(id=memory_id, bank=target.bank,
                        level="global" if allow_global else target.level,
                        deleted={t: deleted.get(t, 0) for t in tiers},
                        copies={t: n for t, n in deleted.items() if t not in tiers})


def _deletable(target: Target, memory_id: str, base: Path | None) -> bool:
    db_path = target.db_path(base)
    with banks.translate_sqlite_errors(db_path):  # a damaged bank: DataError, not a crash
        return bool(_owned_ids(db_path, target.namespace, [memory_id],
                               allow_global=target is GLOBAL_TARGET)) \
            or _legacy_owned(db_path, target.namespace, memory_id)


def _ids_starting(target: Target, prefix: str, base: Path | None) -> set[str]:
    """The ids of the rows `target` may delete that start with `prefix`."""
    db_path = target.db_path(base)
    clause = ("(session_id = ? OR scope = 'global')" if target is GLOBAL_TARGET
              else "session_id = ?")
    found: set[str] = set()
    with banks.translate_sqlite_errors(db_path):  # a damaged bank: DataError, not a crash
        conn = banks.connect_readonly(db_path)
        if conn is None:
            return found
        try:
            for table, where in (("working_memory", clause), ("episodic_memory", clause),
                                 ("memories", "session_id = ?")):
                found.update(row[0] for row in banks.rows(
                    conn, f"SELECT id FROM {table} WHERE substr(id, 1, ?) = ? AND {where}",
                    (len(prefix), prefix, target.namespace)))
        finally:
            conn.close()
    return found


def _legacy_owned(db_path: Path, namespace: str, memory_id: str) -> bool:
    conn = banks.connect_readonly(db_path)
    if conn is None:
        return False
    try:
        return banks.count(conn, "SELECT COUNT(*) FROM memories WHERE id = ? AND session_id = ?",
                      (memory_id, namespace)) > 0
    finally:
        conn.close()
