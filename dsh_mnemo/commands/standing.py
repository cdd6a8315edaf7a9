"""`standing list|remove` and `candidates list|accept|reject`: the rules given every session."""

from __future__ import annotations

from pathlib import Path

from ..config import Settings
from ..errors import RefusedError, UnboundError
from ..memory import semantic, store
from ..memory import standing as standing_memory
from ..memory.targets import Target, write_target
from ..record import field, record
from ..report import Report
from ..workspace.context import MemoryContext, resolve_memory_context
from .common import given_id, short_ids_explained


def _context(settings: Settings, cwd: Path | None) -> MemoryContext:
    return resolve_memory_context(cwd, None, settings, mode="workspace")


@record
class StandingList:
    workspace: str | None
    budget_chars: int
    standing: list[standing_memory.Standing] = field(default_factory=list)


def at_session_start(ctx: MemoryContext, settings: Settings) -> list[standing_memory.Standing]:
    """The standing memories that apply here, in the order a session's start gives
    them, each marked with whether the block's budget has room for it."""
    from ..hook.inject import Line, pack_block

    items = standing_memory.order_for(standing_memory.list_standing(ctx))
    _, fits = pack_block([Line(content=s.content, level=s.level, timestamp=None)
                          for s in items], ctx.display_name or "workspace",
                         int(settings["standing.budget_chars"]), kind="standing")
    for item, fit in zip(items, fits, strict=True):
        item.at_session_start = fit
    return items


def list_(settings: Settings, *, cwd: Path | None = None) -> Report:
    ctx = _context(settings, cwd)
    items = at_session_start(ctx, settings)
    budget = int(settings["standing.budget_chars"])
    report = Report("standing", StandingList(workspace=ctx.display_name, budget_chars=budget,
                                             standing=items))
    if not ctx.bound:
        report.note("This directory is not in a bound workspace: only global standing "
                    "memories apply here.")
    left_out = [s for s in items if not s.at_session_start]
    if left_out:
        report.warn(over_budget(len(left_out), len(items), budget))
    return report


def over_budget(left_out: int, total: int, budget: int) -> str:
    verb = "does" if left_out == 1 else "do"
    return (f"{left_out} of the {total} standing memories here {verb} not fit in a session's "
            f"start block (standing.budget_chars: {budget}): a session gets them only when "
            "a prompt recalls them. Raise the budget (`mnemo config set standing.budget_chars "
            f"{budget * 2}`), remove some (`mnemo standing remove ID`), or store the ones "
            "that matter most with a higher --importance.")


def _resolve(given: str, ids: list[str], what: str, where: str, hint: str) -> str:
    """`store.resolve_id`, with an empty or too short id a bad command line."""
    given = given_id(given, what, hint)
    with short_ids_explained(given, hint):
        return store.resolve_id(given, ids, what, where, hint)


def remove(settings: Settings, memory_id: str, *, cwd: Path | None = None) -> Report:
    ctx = _context(settings, cwd)
    memory_id = _resolve(memory_id, [s.id for s in standing_memory.list_standing(ctx)],
                         "standing memory", "here (workspace or global)",
                         "`mnemo standing list` shows their ids.")
    return Report("forget", store.forget(ctx, memory_id))


@record
class CandidateList:
    namespace: str
    candidates: list[standing_memory.Candidate] = field(default_factory=list)


def _candidates_target(settings: Settings, cwd: Path | None) -> Target:
    """Where this workspace keeps its candidates (filed from its captured turns)."""
    ctx = _context(settings, cwd)
    if ctx.workspace is None:  # `write_target` would suggest a --scope these lack
        raise UnboundError("this directory is not in a bound workspace: candidates are kept "
                           "per workspace", hint="Run it in a bound project (`mnemo bind` "
                                                 "binds one).")
    return write_target(ctx, "workspace")


def candidates(settings: Settings, *, status: str | None = "pending",
               cwd: Path | None = None) -> Report:
    target = _candidates_target(settings, cwd)
    return Report("candidates", CandidateList(
        namespace=target.namespace,
        candidates=standing_memory.candidates(target, status=status)))


def _pending(settings: Settings, candidate_id: str, cwd: Path | None
             ) -> tuple[Target, standing_memory.Candidate]:
    target = _candidates_target(settings, cwd)
    known = standing_memory.candidates(target, status=None)
    chosen = _resolve(candidate_id, [c.id for c in known], "candidate", "in this workspace",
                      "`mnemo candidates list` shows them.")
    found = next(c for c in known if c.id == chosen)
    if found.status != "pending":
        raise RefusedError(f"candidate {found.id} was {found.status} already")
    return target, found


def accept(settings: Settings, candidate_id: str, *, scope: str = "workspace",
           cwd: Path | None = None) -> Report:
    """The candidate becomes a standing memory (of the workspace, or global)."""
    target, found = _pending(settings, candidate_id, cwd)
    ctx = _context(settings, cwd)
    standing_target = standing_memory.standing_target(ctx, scope)
    result = store.remember_at(standing_target, found.text, source=standing_memory.SOURCE,
                               importance=standing_memory.DEFAULT_IMPORTANCE,
                               scrub_policy=settings["scrub.policy"],
                               embed=semantic.embedder(settings))
    if result.id is None:
        raise RefusedError("Mnemosyne's write filter rejected the candidate; it stays pending")
    standing_memory.mark_standing(standing_target, result.id)
    standing_memory.decide(target, found.id, "accepted", result.id)
    result.standing = True
    return Report("remember", result)


def reject(settings: Settings, candidate_id: str, *, cwd: Path | None = None) -> Report:
    """Never suggest it again (the rejection is remembered by its text)."""
    target, found = _pending(settings, candidate_id, cwd)
    standing_memory.decide(target, found.id, "rejected")
    decided = next(c for c in standing_memory.candidates(target, status=None)
                   if c.id == found.id)
    return Report("candidates", CandidateList(namespace=target.namespace,
                                              candidates=[decided]))
