"""Standing memories: the project's rules and the user's preferences and identity.

Similarity finds memories that resemble a prompt; it cannot find those that
*apply* to it without resembling it ("always ask before running a
destructive command" for "drop the old staging database", "answer in
English" for a prompt written in French).  A standing memory is given to the
model once per session instead (at session start, or with a session's first
prompt where the harness cannot add context at session start), in a fenced
block of its own, and never competes with recalled memories for a slot.

A standing memory is an ordinary upstream working-memory row of the
workspace (or of the global bank, for the user's own), marked so upstream
tools can read what it is and upstream's housekeeping leaves it alone:

- `source = 'standing'`;
- `pinned = 1` (upstream's sleep never summarises it away);
- `consolidated_at` set (upstream's trim never deletes it; see
  docs/upstream.md), with no summary claim.

Candidates: with `capture.standing: suggest`, a captured user turn that
states a standing rule ("from now on …", "always …", "I prefer …", "以后…")
is filed in the workspace bank's `mnemo_candidates` table, for the user to
accept (it becomes a standing memory) or reject (it is never suggested
again).  Nothing is promoted without the user.  Forgetting the turn deletes
its pending candidate and empties a decided one's text (`driver.delete`).
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path

from .. import paths
from ..errors import RefusedError, UnboundError
from ..lazy_re import lazy
from ..record import record
from ..workspace.context import MemoryContext
from . import banks
from .targets import GLOBAL_TARGET, Target

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any

SOURCE = "standing"
DEFAULT_IMPORTANCE = 0.9
CANDIDATES = banks.CANDIDATES
CANDIDATES_DDL = (f"CREATE TABLE IF NOT EXISTS {CANDIDATES} (id TEXT PRIMARY KEY, "
                  "namespace TEXT NOT NULL, text TEXT NOT NULL, digest TEXT NOT NULL, "
                  "status TEXT NOT NULL, created_at TEXT NOT NULL, decided_at TEXT, "
                  "memory_id TEXT)")


@record
class Standing:
    id: str
    content: str
    level: str  # "workspace" | "global"
    bank: str
    timestamp: str | None
    importance: float
    # Whether a session's start block has room for it (`mnemo standing list`);
    # None where that was not worked out.
    at_session_start: bool | None = None


def targets_of(ctx: MemoryContext) -> list[Target]:
    """Where the standing memories of a context live: its workspace's, and global ones."""
    found = []
    if ctx.workspace is not None:
        found.append(Target(bank=ctx.workspace.bank, namespace=ctx.workspace.namespace,
                            level="workspace"))
    return [*found, GLOBAL_TARGET]


def standing_target(ctx: MemoryContext, scope: str) -> Target:
    if scope == "global":
        return GLOBAL_TARGET
    if scope != "workspace":
        raise RefusedError(f"a standing memory is for a workspace or global, not {scope!r}",
                           hint="Use --scope workspace (the default) or --scope global.")
    if ctx.workspace is None:
        raise UnboundError("this directory is not in a bound workspace; nothing was written",
                           hint="Run `mnemo bind` in the project, or use --scope global.")
    return Target(bank=ctx.workspace.bank, namespace=ctx.workspace.namespace,
                  level="workspace")


def list_standing(ctx: MemoryContext, base: Path | None = None) -> list[Standing]:
    """The standing memories that apply here: the workspace's first, then global ones."""
    found: list[Standing] = []
    for target in targets_of(ctx):
        db_path = target.db_path(base)
        with banks.reader(db_path) as conn, banks.translate_sqlite_errors(db_path):
            if conn is None:
                continue
            for memory_id, content, stamp, importance in banks.rows(
                    conn, "SELECT id, content, timestamp, importance FROM working_memory "
                          "WHERE session_id = ? AND source = ? "
                          "ORDER BY importance DESC, timestamp DESC",
                    (target.namespace, SOURCE)):
                found.append(Standing(id=str(memory_id), content=str(content or ""),
                                      level=target.level, bank=target.bank,
                                      timestamp=stamp, importance=float(importance or 0.0)))
    return found


def mark_standing(target: Target, memory_id: str, base: Path | None = None) -> None:
    """Pin the row and shield it from upstream's trim and sleep (see the module doc)."""
    from . import driver

    memory = driver.instance(target, base)
    with banks.translate_sqlite_errors(target.db_path(base)):
        memory.conn.execute(
            "UPDATE working_memory SET pinned = 1, consolidated_at = ?, "
            "consolidation_claimed_at = NULL WHERE id = ? AND session_id = ?",
            (datetime.now().isoformat(), memory_id, target.namespace))
        memory.conn.commit()


def order_for(items: list[Standing], *, prompt: str | None = None, embed: Any = None,
              base: Path | None = None, pending: Any = None) -> list[Standing]:
    """Best first: the most relevant to the session's first prompt (when there is
    one and a model to judge it), then the most important, then the newest.

    `pending` is the prompt's vector already on its way (`embed.PendingQuery`),
    which the prompt's recall then uses too."""
    cosines: dict[str, float] = {}
    if prompt and embed is not None and items:
        from ..embed import PendingQuery, flat
        from . import semantic

        query = PendingQuery.reuse(pending, embed, prompt).result()  # None: the model failed
        for bank in {s.bank for s in items} if query is not None else ():
            vectors = semantic.vectors_of(paths.bank_db_path(bank, base),
                                          [s.id for s in items if s.bank == bank],
                                          embed.model_id)
            cosines.update({i: flat.dot(v, query) for i, v in vectors.items()})
    return sorted(items, key=lambda s: (-cosines.get(s.id, 0.0), -s.importance,
                                        _negated(s.timestamp)))


def _negated(stamp: str | None) -> tuple[int, ...]:
    return tuple(-ord(c) for c in (stamp or ""))


# ─── Candidates ────────────────────────────────────────────────────────────

# Strict on purpose: a statement of a lasting rule or preference, not a
# request for this turn.  English and Chinese.
_CANDIDATE = lazy(
    r"(?i)^\s*(?:"
    r"(?:from now on|going forward|in future|in the future|henceforth)\b"
    r"|(?:always|never)\s+(?:use|run|ask|write|answer|reply|commit|push|deploy|call|keep|"
    r"prefer|put|add|include|format|test|check|respond|start|end|avoid)\b"
    r"|i\s+(?:prefer|like|want you to|would like you to|always want)\b"
    r"|please\s+(?:always|never)\b"
    r"|call me\b|my name is\b|i am a\b|i'm a\b"
    r"|we\s+(?:use|prefer)\s+\S+(?:\s+\S+)?,?\s+(?:not|instead of|rather than)\b"
    r")"
    r"|^\s*(?:以后|今后|从现在起|从现在开始|往后|我喜欢|我更喜欢|我希望你|请总是|请始终|"
    r"请一直|永远不要|不要再|总是|始终|叫我|我叫|我是一名|我们用)")
_MAX_CANDIDATE = 300


def looks_standing(text: str) -> bool:
    """Does this user turn state a standing rule or preference? (strict patterns)"""
    body = text[len("[USER]"):].strip() if text.startswith("[USER]") else text.strip()
    if not body or len(body) > _MAX_CANDIDATE or body.rstrip().endswith(("?", "？")):
        return False
    return bool(_CANDIDATE.search(body))


def _connect(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db_path, timeout=banks.BUSY_TIMEOUT_SECONDS)
    conn.execute(CANDIDATES_DDL)
    return conn


def suggest(target: Target, text: str, base: Path | None = None) -> str | None:
    """File `text` as a candidate of `target`'s namespace; its id, or None when it
    was suggested (or rejected, or accepted) before."""
    body = banks.candidate_text(text)
    digest = banks.candidate_digest(target.namespace, body)
    db_path = target.db_path(base)
    with banks.translate_sqlite_errors(db_path):
        conn = _connect(db_path)
        try:
            if conn.execute(f"SELECT 1 FROM {CANDIDATES} WHERE digest = ?",
                            (digest,)).fetchone():
                return None
            candidate_id = "c" + digest[:15]
            conn.execute(f"INSERT INTO {CANDIDATES} VALUES (?, ?, ?, ?, 'pending', ?, NULL, "
                         "NULL)", (candidate_id, target.namespace, body, digest,
                                   datetime.now().isoformat()))
            conn.commit()
            return candidate_id
        finally:
            conn.close()


@record
class Candidate:
    id: str
    text: str
    status: str  # "pending" | "accepted" | "rejected"
    created_at: str
    decided_at: str | None
    memory_id: str | None


def candidates(target: Target, *, status: str | None = "pending",
               base: Path | None = None) -> list[Candidate]:
    db_path = target.db_path(base)
    conn = banks.connect_readonly(db_path)
    if conn is None:
        return []
    try:
        with banks.translate_sqlite_errors(db_path):
            where, args = "namespace = ?", (target.namespace,)
            if status is not None:
                where, args = where + " AND status = ?", (*args, status)
            return [Candidate(*row) for row in banks.rows(
                conn, f"SELECT id, text, status, created_at, decided_at, memory_id "
                      f"FROM {CANDIDATES} WHERE {where} ORDER BY created_at", args)]
    finally:
        conn.close()


def decide(target: Target, candidate_id: str, status: str, memory_id: str | None = None,
           base: Path | None = None) -> None:
    db_path = target.db_path(base)
    with banks.translate_sqlite_errors(db_path):
        conn = _connect(db_path)
        try:
            conn.execute(f"UPDATE {CANDIDATES} SET status = ?, decided_at = ?, memory_id = ? "
                         "WHERE id = ? AND namespace = ?",
                         (status, datetime.now().isoformat(), memory_id, candidate_id,
                          target.namespace))
            conn.commit()
        finally:
            conn.close()
