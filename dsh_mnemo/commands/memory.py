"""`remember`, `recall`, `forget`, `stats`, `sleep`: resolve the context, act, report.

Each command resolves its context once through `resolve_memory_context`
(the single place that decides the namespace) and calls into `memory`.
Each runs under `fsutil.private_files`, so that what it creates (the index,
banks, calibration, vector files) is private when a program calls it under
its own umask (docs/privacy.md).
"""

from __future__ import annotations

from pathlib import Path

from .. import paths
from ..config import Settings
from ..errors import ConfigError, ExitCode, FilteredError, MnemoError, usage_error
from ..fsutil import private_files
from ..memory import banks, consolidate, semantic, store
from ..memory.targets import GLOBAL_TARGET, read_target
from ..record import field, record
from ..report import Progress, Report
from ..workspace.context import MemoryContext, resolve_memory_context
from .common import given_id, short_ids_explained


def _context(settings: Settings, cwd: Path | None, session_id: str | None,
             mode: str | None = None) -> MemoryContext:
    return resolve_memory_context(cwd, session_id, settings, mode=mode)


@private_files()
def remember(settings: Settings, text: str, *, scope: str = "workspace",
             session_id: str | None = None, source: str = "user",
             importance: float | None = None, standing: bool = False,
             cwd: Path | None = None) -> Report:
    mode = "session" if scope == "session" else "workspace"
    ctx = _context(settings, cwd, session_id, mode)
    policy = settings["scrub.policy"]
    embed = semantic.embedder(settings)
    if standing:
        from ..memory import standing as standing_memory

        target = standing_memory.standing_target(ctx, scope)
        result = store.remember_at(
            target, text, source=standing_memory.SOURCE,
            importance=standing_memory.DEFAULT_IMPORTANCE if importance is None else importance,
            scrub_policy=policy, embed=embed)
        if result.id is not None:
            standing_memory.mark_standing(target, result.id)
            result.standing = True
    else:
        result = store.remember(ctx, text, level=scope, source=source,
                                importance=0.5 if importance is None else importance,
                                scrub_policy=policy, embed=embed)
    if embed is not None and result.embedded:
        from ..embed import calibration

        # A model the gate has no scale for yet gets it measured once (48 texts);
        # only once it has just answered: a server that is down or hanging must
        # not cost every `remember` two more timeouts.
        calibration.ensure(embed, paths.data_dir())
    if result.filtered:
        raise FilteredError(
            "Mnemosyne's write filter rejected this text (it looks like a secret or noise); "
            "nothing was stored",
            hint="Rephrase it, or set write_filter to warn or off with `mnemo config set`.")
    report = Report("remember", result)
    if standing and result.id is not None:
        from .standing import at_session_start, over_budget

        items = at_session_start(ctx, settings)
        if any(s.id == result.id and not s.at_session_start for s in items):
            report.warn(over_budget(sum(1 for s in items if not s.at_session_start),
                                    len(items), int(settings["standing.budget_chars"])))
    if result.secrets and policy == "redact":
        report.note(f"Redacted before storing: {', '.join(result.secrets)}.")
    elif result.secrets:
        report.warn(f"Stored with secrets in it (scrub.policy: {policy}): "
                    f"{', '.join(result.secrets)}.")
    return report


@record
class RecallReport:
    query: str
    namespace: str
    level: str
    results: list[store.Memory]
    kinds: list[str] = field(default_factory=list)  # the kinds searched (`store.KINDS`)
    left_out: dict[str, int] = field(default_factory=dict)  # `store.Found.left_out`


# `mnemo recall --kind`: what each choice searches.
RECALL_KINDS: dict[str, tuple[str, ...]] = {
    **{kind: (kind,) for kind in store.KINDS}, "all": store.KINDS}


@private_files()
def recall(settings: Settings, query: str, *, top_k: int = 5, session_id: str | None = None,
           cwd: Path | None = None, kind: str = "all") -> Report:
    """Search this context's memory (and global memory) for the rows of `kind`
    (`RECALL_KINDS`).  `mnemo recall` asks for `memory` unless told otherwise;
    the default here, `all`, is every row ranked by score alone, as callers
    of this function (the MCP server's `recall`) have always had it."""
    kinds = RECALL_KINDS.get(kind)
    if kinds is None:
        raise usage_error(f"unknown kind {kind!r}",
                          hint=f"Use one of: {', '.join(RECALL_KINDS)}.")
    ctx = _context(settings, cwd, session_id)
    embed = semantic.embedder(settings)
    if kind == "all":
        results, left_out = store.recall(ctx, query, top_k=top_k, embed=embed), {}
    else:
        found = store.search(ctx, query, kinds=kinds, top_k=top_k, embed=embed)
        results, left_out = found.results, found.left_out
    return Report("recall", RecallReport(query=query, namespace=ctx.namespace or "",
                                         level=ctx.mode, results=results, kinds=list(kinds),
                                         left_out=left_out))


FORGET_HINT = "`mnemo recall` shows the ids you can forget here."


@private_files()
def forget(settings: Settings, memory_id: str, *, session_id: str | None = None,
           cwd: Path | None = None) -> Report:
    memory_id = given_id(memory_id, "memory", FORGET_HINT)
    ctx = _context(settings, cwd, session_id)
    with short_ids_explained(memory_id, FORGET_HINT):
        return Report("forget", store.forget(ctx, memory_id))


@record
class StatsReport:
    scope: str  # "context" | "all"
    namespaces: list[banks.NamespaceStats] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)


COUNTERS = ("working", "working_consolidated", "working_unconsolidated", "episodic", "legacy",
            "due")


@private_files()
def stats(settings: Settings, *, all_banks: bool = False, session_id: str | None = None,
          cwd: Path | None = None) -> Report:
    if all_banks:
        rows = [s for bank in banks.bank_names()
                for s in sorted(banks.namespace_stats(bank).values(), key=lambda s: s.namespace)]
        report = StatsReport(scope="all", namespaces=rows)
    else:
        own = read_target(_context(settings, cwd, session_id))
        rows = [*banks.namespace_stats(own.bank, [own.namespace]).values(),
                *banks.namespace_stats(GLOBAL_TARGET.bank, [GLOBAL_TARGET.namespace]).values()]
        report = StatsReport(scope="context", namespaces=rows)
    report.totals = {key: sum(getattr(s, key) for s in report.namespaces) for key in COUNTERS}
    return Report("stats", report)


@private_files()
def sleep(settings: Settings, *, all_banks: bool = False, dry_run: bool = False,
          force: bool = False, session_id: str | None = None, cwd: Path | None = None,
          progress: Progress | None = None) -> Report:
    if all_banks:
        result = consolidate.sleep_all(dry_run=dry_run, force=force, progress=progress)
    else:
        result = consolidate.sleep_context(_context(settings, cwd, session_id),
                                           dry_run=dry_run, force=force)
    report = Report("sleep", result)
    embed = semantic.embedder(settings) if not dry_run else None
    if embed is not None:
        # The summaries sleep wrote need their vectors to be found by meaning.
        from ..embed import EmbedError

        for done in (r for r in result.results if r.status == "consolidated"):
            try:
                semantic.fill(paths.bank_db_path(done.bank), done.namespace, embed)
            except (EmbedError, MnemoError) as exc:
                report.warn(f"{done.bank} {done.namespace}: summaries not embedded ({exc}); "
                            "`mnemo reindex` retries")
    for failed in (r for r in result.results if r.status == "error"):
        where = f"{failed.bank} {failed.namespace}".rstrip()
        hint = f" ({failed.detail['hint']})" if failed.detail.get("hint") else ""
        report.warn(f"{where}: {failed.detail.get('error')}{hint}")
        # Reported; a non-zero exit lets cron and systemd flag the run.
        report.exit_code = ExitCode.DATA
    return report


@record
class ReindexReport:
    backend: str
    model_id: str | None
    namespaces: list[dict[str, object]] = field(default_factory=list)
    embedded: int = 0
    memories: int = 0
    scale: str = ""


@private_files()
def reindex(settings: Settings, *, all_banks: bool = False, session_id: str | None = None,
            cwd: Path | None = None, progress: Progress | None = None) -> Report:
    """Give every memory (of this workspace, or of every bank) a current vector.

    Idempotent: a memory that has a vector of the loaded model is skipped, so
    a second run embeds nothing.  Vectors are stored batch by batch, each batch
    only once the model gave all of its vectors: a model that fails partway
    (a server's error, a bad answer) stops the run with what was stored kept,
    and the next run embeds the rest.
    """
    loaded = semantic.load(settings)
    backend = str(settings["embeddings.backend"])
    if loaded.embedder is None:
        if loaded.misconfigured:
            raise ConfigError(f"the embedding settings cannot work: {loaded.reason}",
                              hint="Fix the `embeddings.*` settings with `mnemo config set` "
                                   "(`mnemo config show` lists them).")
        raise MnemoError(f"no embedding model to index with: {loaded.reason}",
                         hint="Check `embeddings.backend` (`mnemo config show`); "
                              "`mnemo doctor` says more.")
    embed = loaded.embedder
    if all_banks:
        plan = [(bank, ns) for bank in banks.bank_names()
                for ns in sorted(banks.namespace_stats(bank))]
    else:
        own = read_target(_context(settings, cwd, session_id))
        plan = [(own.bank, own.namespace), (GLOBAL_TARGET.bank, GLOBAL_TARGET.namespace)]
    from ..embed import EmbedError, calibration

    # the gate reads this model's cosines in the packaged model's units
    _, scale = calibration.ensure(embed, paths.data_dir(), again=True)
    result = ReindexReport(backend=backend, model_id=embed.model_id, scale=scale)
    stored = 0  # memories of the namespace at hand embedded so far

    def counted(phase: str, done: int, total: int) -> None:
        nonlocal stored
        stored = done
        if progress:
            progress(phase, done, total)

    for bank, namespace in plan:
        db_path = paths.bank_db_path(bank)
        stored = 0
        try:
            embedded = semantic.fill(db_path, namespace, embed, progress=counted)
        except EmbedError as exc:
            raise MnemoError(
                f"the embedding model failed partway: {exc}",
                hint=f"The {result.embedded + stored} memories embedded before it keep "
                     "their vectors; run `mnemo reindex` again once the model works: it "
                     "embeds only the rest.") from None
        have, total = semantic.coverage(db_path, namespace, embed.model_id)
        result.namespaces.append({"bank": bank, "namespace": namespace, "embedded": embedded,
                                  "vectors": have, "memories": total})
        result.embedded += embedded
        result.memories += total
    return Report("reindex", result)
