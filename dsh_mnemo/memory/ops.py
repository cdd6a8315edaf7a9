"""Memory operations as the commands see them: resolve the context, then act.

Each function resolves the context once through `resolve_memory_context`
(the single place that decides the namespace) and calls into `storage`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..config import Settings
from ..errors import FilteredError
from ..workspace.context import MemoryContext, resolve_memory_context
from . import banks, consolidate
from . import store as storage
from .targets import GLOBAL_TARGET, read_target


def _context(settings: Settings, cwd: Path | None, session_id: str | None,
             mode: str | None = None) -> MemoryContext:
    return resolve_memory_context(cwd, session_id, settings, mode=mode)


def remember(settings: Settings, text: str, *, scope: str = "workspace",
             session_id: str | None = None, source: str = "user", importance: float = 0.5,
             cwd: Path | None = None) -> storage.WriteResult:
    mode = "session" if scope == "session" else "workspace"
    ctx = _context(settings, cwd, session_id, mode)
    result = storage.remember(ctx, text, level=scope, source=source, importance=importance)
    if result.filtered:
        raise FilteredError(
            "Mnemosyne's write filter rejected this text (it looks like a secret or noise); "
            "nothing was stored",
            hint="Rephrase it, or set write_filter to warn or off with `mnemo config set`.")
    return result


@dataclass
class RecallReport:
    query: str
    namespace: str
    level: str
    results: list[storage.Memory]


def recall(settings: Settings, query: str, *, top_k: int = 5, session_id: str | None = None,
           cwd: Path | None = None) -> RecallReport:
    ctx = _context(settings, cwd, session_id)
    results = storage.recall(ctx, query, top_k=top_k)
    return RecallReport(query=query, namespace=ctx.namespace or "", level=ctx.mode,
                        results=results)


def forget(settings: Settings, memory_id: str, *, session_id: str | None = None,
           cwd: Path | None = None) -> storage.ForgetResult:
    return storage.forget(_context(settings, cwd, session_id), memory_id)


@dataclass
class StatsReport:
    scope: str  # "context" | "all"
    namespaces: list[banks.NamespaceStats] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)


def stats(settings: Settings, *, all_banks: bool = False, session_id: str | None = None,
          cwd: Path | None = None) -> StatsReport:
    if all_banks:
        rows = [s for bank in banks.bank_names()
                for s in sorted(banks.namespace_stats(bank).values(), key=lambda s: s.namespace)]
        report = StatsReport(scope="all", namespaces=rows)
    else:
        own = read_target(_context(settings, cwd, session_id))
        rows = [*banks.namespace_stats(own.bank, [own.namespace]).values(),
                *banks.namespace_stats(GLOBAL_TARGET.bank, [GLOBAL_TARGET.namespace]).values()]
        report = StatsReport(scope="context", namespaces=rows)
    for key in ("working", "working_consolidated", "working_unconsolidated", "episodic",
                "legacy", "due"):
        report.totals[key] = sum(getattr(s, key) for s in report.namespaces)
    return report


def sleep(settings: Settings, *, all_banks: bool = False, dry_run: bool = False,
          force: bool = False, session_id: str | None = None, cwd: Path | None = None,
          progress=None) -> consolidate.SleepReport:
    if all_banks:
        return consolidate.sleep_all(dry_run=dry_run, force=force, progress=progress)
    return consolidate.sleep_context(_context(settings, cwd, session_id), dry_run=dry_run,
                                     force=force)
