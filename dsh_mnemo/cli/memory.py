"""`remember`, `recall`, `forget`, `stats`, `sleep`."""

from __future__ import annotations

import math
import sys
from enum import Enum
from typing import Annotated, Any

import typer

from ..errors import RefusedError
from .common import (
    ID,
    JsonOpt,
    err,
    escape,
    lazy,
    out,
    progress_bar,
    reports,
    settings,
    table,
    usage_error,
    view,
)

core = lazy("dsh_mnemo.commands.memory")


class Scope(str, Enum):
    session = "session"
    workspace = "workspace"
    global_ = "global"


class Kind(str, Enum):
    memory = "memory"
    turn = "turn"
    summary = "summary"
    all = "all"


SessionOpt = Annotated[str | None, typer.Option(
    "--session", envvar="MNEMO_SESSION_ID",
    help="Conversation id (for session scope or session recall mode).", click_type=ID)]


def register(app: typer.Typer) -> None:
    app.command("remember")(remember)
    app.command("recall")(recall)
    app.command("forget")(forget)
    app.command("stats")(stats)
    app.command("sleep")(sleep)
    app.command("reindex")(reindex)


def _read_text(text: str) -> str:
    if text != "-":
        if not text.strip():
            raise usage_error("nothing to remember: the text is empty",
                              hint="Give the memory as the argument, or `-` to read it "
                                   "from stdin.")
        return text
    data = sys.stdin.buffer.read(1_000_001)
    if len(data) > 1_000_000:
        raise RefusedError("stdin holds more than 1 MB; nothing was written")
    # What the argument's checks refuse is a bad command line from stdin too (exit 2).
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError:
        raise usage_error("stdin is not valid UTF-8; nothing was written",
                          hint="Give the memory as UTF-8 text.") from None
    # `echo … | mnemo remember -` ends with a line break the text does not have:
    # stored with it, it would be a second memory of the same text.
    decoded = decoded.rstrip("\r\n")
    if not decoded.strip():
        raise usage_error("nothing to remember: stdin is empty",
                          hint="Pipe the memory into `mnemo remember -`, or give it as the "
                               "argument.")
    return decoded


@reports
def remember(
    text: Annotated[str, typer.Argument(help="The memory; `-` reads it from stdin.")],
    scope: Annotated[Scope, typer.Option(
        "--scope", help="Which memory receives it.")] = Scope.workspace,
    importance: Annotated[float | None, typer.Option(
        "--importance", min=0.0, max=1.0,
        help="0 to 1; higher surfaces first (default 0.5, 0.9 for --standing).",
        show_default=False)] = None,
    source: Annotated[str, typer.Option(
        "--source", help="Where the memory came from (e.g. user, fact, preference).")] = "user",
    standing: Annotated[bool, typer.Option(
        "--standing", help="A standing rule, convention, preference or identity: given to the "
        "model once every session, whatever the prompt (workspace or global scope).")] = False,
    session: SessionOpt = None,
    json: JsonOpt = False,
):
    """Store one memory in this workspace (or session, or global) memory."""
    if standing and scope is Scope.session:
        raise usage_error("a standing memory is for a workspace or global, not a session",
                          hint="Use --scope workspace (the default) or --scope global.")
    if importance is not None and math.isnan(importance):  # every range check passes NaN
        raise typer.BadParameter(f"{importance} is not in the range 0.0<=x<=1.0.",
                                 param_hint="'--importance'")
    return core.remember(settings(), _read_text(text), scope=scope.value, session_id=session,
                         source=source, importance=importance, standing=standing)


@view("remember")
def _remembered(result: Any) -> None:
    where = {"global": "global memory", "session": "this session",
             "workspace": "this workspace"}[result.level]
    if result.standing:
        again = " (it was already remembered)" if result.existed else ""
        out.print(f"Standing memory in {where}{again}: [bold]{result.id}[/]")
    else:
        what = "Already remembered" if result.existed else "Remembered"
        out.print(f"{what} in {where}: [bold]{result.id}[/]")


@reports
def recall(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, max=100,
                                       help="Most results to show.")] = 5,
    kind: Annotated[Kind, typer.Option(
        "--kind", help="What to search: `memory` (what was remembered, standing memories "
        "included), `turn` (captured conversation turns: your earlier prompts, and replies "
        "if captured), `summary` (what `mnemo sleep` wrote), or `all` (every row, by score "
        "alone).")] = Kind.memory,
    session: SessionOpt = None,
    json: JsonOpt = False,
):
    """Search this workspace's memory (and global memory)."""
    if not query.strip():
        raise usage_error("the query is empty", hint="Give a few words to look for.")
    return core.recall(settings(), query, top_k=top_k, session_id=session, kind=kind.value)


# How the view names each kind of row, one and several.
KIND_NAMES = {"memory": ("memory", "memories"),
              "turn": ("captured conversation turn", "captured conversation turns"),
              "summary": ("sleep summary", "sleep summaries")}


@view("recall")
def _recalled(report: Any) -> None:
    several = len(report.kinds) > 1
    if not report.results:
        what = KIND_NAMES[report.kinds[0]][1] if not several else "memories"
        err.print(f"No matching {what}.")
    else:
        columns = ("id", "score", "level", "date", *(("kind",) if several else ()), "memory")
        grid = table(*columns)
        for m in report.results:
            grid.add_row(m.id, f"{m.score:.2f}", m.level, (m.timestamp or "")[:10],
                         *((m.kind,) if several else ()), escape(m.content))
        out.print(grid)
    if report.left_out:
        # On stderr: the table alone goes down a pipe.
        parts = [f"{n} {KIND_NAMES[k][0 if n == 1 else 1]}"
                 for k, n in sorted(report.left_out.items())]
        option = (f"--kind {next(iter(report.left_out))}" if len(report.left_out) == 1
                  else "--kind all")
        them = "it" if sum(report.left_out.values()) == 1 else "them"
        err.print(f"Also matching: {', '.join(parts)} (`{option}` shows {them}).", style="dim")


@reports
def forget(
    memory_id: Annotated[str, typer.Argument(
        metavar="ID", help="Id shown by `mnemo recall`, or its first 4 or more characters "
                           "when no other id here starts with them.")],
    session: SessionOpt = None,
    json: JsonOpt = False,
):
    """Delete one memory of this workspace (or a global one)."""
    return core.forget(settings(), memory_id, session_id=session)


@view("forget")
def _forgotten(result: Any) -> None:
    out.print(f"Forgot {result.id} ({result.level} memory).")


@reports
def stats(
    all_banks: Annotated[bool, typer.Option("--all", help="Every bank and namespace.")] = False,
    session: SessionOpt = None,
    json: JsonOpt = False,
):
    """Count memories per tier for this workspace and global (or everything)."""
    return core.stats(settings(), all_banks=all_banks, session_id=session)


@view("stats")
def _counted(report: Any) -> None:
    grid = table("bank", "namespace", "working", "consolidated", "episodic", "legacy", "due")
    for s in report.namespaces:
        grid.add_row(s.bank, s.namespace, str(s.working), str(s.working_consolidated),
                     str(s.episodic), str(s.legacy), str(s.due))
    out.print(grid)


@reports
def sleep(
    all_banks: Annotated[bool, typer.Option(
        "--all", help="Every namespace of every bank that has due rows (for cron).")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Report what is due; write nothing.")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Consolidate every unconsolidated row, whatever its age.")] = False,
    session: SessionOpt = None,
    json: JsonOpt = False,
):
    """Consolidate due memories (offline by default; safe to run from cron)."""
    loaded = settings()
    with progress_bar(enabled=all_banks and not json, one_line=True) as progress:
        return core.sleep(loaded, all_banks=all_banks, dry_run=dry_run, force=force,
                          session_id=session, progress=progress)


@view("sleep")
def _slept(report: Any) -> None:
    due = [r for r in report.results if (r.status != "no_op" or r.due) and r.status != "error"]
    if not due and not any(r.status == "error" for r in report.results):
        out.print("Nothing due.")
        return
    for r in due:
        verb = {"dry_run": f"{r.due} due", "consolidated":
                f"{r.items_consolidated} consolidated into {r.summaries_created} summaries",
                "skipped-locked": "skipped (another process is consolidating it)",
                "no_op": "nothing due"}.get(r.status, r.status)
        out.print(f"{r.bank} {r.namespace}: {verb}")


@reports
def reindex(
    all_banks: Annotated[bool, typer.Option(
        "--all", help="Every namespace of every bank, not only this workspace and global.")]
    = False,
    session: SessionOpt = None,
    json: JsonOpt = False,
):
    """Give every memory a vector for semantic recall (idempotent; resumes where it stopped).

    Exits 3 when the `embeddings.*` settings cannot work, and 1 when the model
    does not load or fails partway: the vectors stored until then are kept,
    and running it again embeds the rest.
    """
    loaded = settings()
    with progress_bar(enabled=not json, one_line=True) as progress:
        return core.reindex(loaded, all_banks=all_banks, session_id=session, progress=progress)


@view("reindex")
def _reindexed(report: Any) -> None:
    grid = table("bank", "namespace", "embedded now", "with vector", "memories")
    for row in report.namespaces:
        grid.add_row(str(row["bank"]), str(row["namespace"]), str(row["embedded"]),
                     str(row["vectors"]), str(row["memories"]))
    out.print(grid)
    out.print(f"{report.embedded} memories embedded with {escape(str(report.model_id))}.")
    if report.scale:
        out.print(f"Relevance scale: {escape(report.scale)}.")
