"""`remember`, `recall`, `forget`, `stats`, `sleep`."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated

import typer

from ..errors import ExitCode, RefusedError
from .common import JsonOpt, emit_json, err, escape, exit_with, lazy, out, run, settings

core = lazy("dsh_mnemo.memory.ops")

class Scope(str, Enum):
    session = "session"
    workspace = "workspace"
    global_ = "global"


SessionOpt = Annotated[str | None, typer.Option(
    "--session", envvar="MNEMO_SESSION_ID",
    help="Conversation id (for session scope or session recall mode).")]


def register(app: typer.Typer) -> None:
    app.command("remember")(remember)
    app.command("recall")(recall)
    app.command("forget")(forget)
    app.command("stats")(stats)
    app.command("sleep")(sleep)


def _read_text(text: str) -> str:
    if text != "-":
        return text
    data = sys.stdin.buffer.read(1_000_001)
    if len(data) > 1_000_000:
        raise RefusedError("stdin holds more than 1 MB; nothing was written")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise RefusedError("stdin is not valid UTF-8; nothing was written") from None


def remember(
    text: Annotated[str, typer.Argument(help="The memory; `-` reads it from stdin.")],
    scope: Annotated[Scope, typer.Option(
        "--scope", help="Which memory receives it.")] = Scope.workspace,
    importance: Annotated[float, typer.Option(
        "--importance", min=0.0, max=1.0, help="0 to 1; higher surfaces first.")] = 0.5,
    source: Annotated[str, typer.Option(
        "--source", help="Where the memory came from (e.g. user, fact, preference).")] = "user",
    session: SessionOpt = None,
    json: JsonOpt = False,
) -> None:
    """Store one memory in this workspace (or session, or global) memory."""
    loaded = settings()

    def act():
        return core.remember(loaded, _read_text(text), scope=scope.value, session_id=session,
                             source=source, importance=importance)

    result = run(act, json_errors=json)
    if json:
        emit_json("remember", result)
        return
    where = {"global": "global memory", "session": "this session",
             "workspace": "this workspace"}[result.level]
    out.print(f"Remembered in {where}: [bold]{result.id}[/]")


def recall(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, max=100,
                                       help="Most results to show.")] = 5,
    session: SessionOpt = None,
    json: JsonOpt = False,
) -> None:
    """Search this workspace's memory (and global memory)."""
    loaded = settings()
    report = run(lambda: core.recall(loaded, query, top_k=top_k, session_id=session),
                 json_errors=json)
    if json:
        emit_json("recall", report)
        return
    if not report.results:
        err.print("No matching memories.")
        return
    from rich.table import Table

    table = Table("id", "score", "level", "date", "memory", box=None, show_lines=False)
    for m in report.results:
        table.add_row(m.id, f"{m.score:.2f}", m.level, (m.timestamp or "")[:10],
                      escape(m.content))
    out.print(table)


def forget(
    memory_id: Annotated[str, typer.Argument(metavar="ID", help="Id shown by `mnemo recall`.")],
    session: SessionOpt = None,
    json: JsonOpt = False,
) -> None:
    """Delete one memory of this workspace (or a global one)."""
    loaded = settings()
    result = run(lambda: core.forget(loaded, memory_id, session_id=session), json_errors=json)
    if json:
        emit_json("forget", result)
        return
    out.print(f"Forgot {result.id} ({result.level} memory).")


def stats(
    all_banks: Annotated[bool, typer.Option("--all", help="Every bank and namespace.")] = False,
    session: SessionOpt = None,
    json: JsonOpt = False,
) -> None:
    """Count memories per tier for this workspace and global (or everything)."""
    loaded = settings()
    report = run(lambda: core.stats(loaded, all_banks=all_banks, session_id=session),
                 json_errors=json)
    if json:
        emit_json("stats", report)
        return
    from rich.table import Table

    table = Table("bank", "namespace", "working", "consolidated", "episodic", "legacy", "due",
                  box=None)
    for s in report.namespaces:
        table.add_row(s.bank, s.namespace if len(s.namespace) < 34 else s.namespace[:33] + "…",
                      str(s.working), str(s.working_consolidated), str(s.episodic),
                      str(s.legacy), str(s.due))
    out.print(table)


def sleep(
    all_banks: Annotated[bool, typer.Option(
        "--all", help="Every namespace of every bank that has due rows (for cron).")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Report what is due; write nothing.")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Consolidate every unconsolidated row, whatever its age.")] = False,
    session: SessionOpt = None,
    json: JsonOpt = False,
) -> None:
    """Consolidate due memories (offline by default; safe to run from cron)."""
    loaded = settings()
    progress_cb = None
    bar = None
    if all_banks and not json and sys.stderr.isatty():
        from rich.progress import Progress

        bar = Progress(console=err, transient=True)
        task = bar.add_task("consolidating", total=None)
        bar.start()

        def progress_cb(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=escape(label))

    try:
        report = run(lambda: core.sleep(loaded, all_banks=all_banks, dry_run=dry_run,
                                        force=force, session_id=session, progress=progress_cb),
                     json_errors=json)
    finally:
        if bar is not None:
            bar.stop()
    failed = [r for r in report.results if r.status == "error"]
    if json:
        emit_json("sleep", report)
    else:
        _print_sleep(report)
    if failed:
        # Reported above; a non-zero exit lets cron and systemd flag the run.
        exit_with(ExitCode.DATA)


def _print_sleep(report) -> None:
    due = [r for r in report.results if r.status != "no_op" or r.due]
    if not due:
        out.print("Nothing due.")
        return
    for r in due:
        if r.status == "error":
            where = f"{r.bank} {r.namespace}".rstrip()
            err.print(f"[bold red]mnemo:[/] {escape(where)}: {escape(str(r.detail.get('error')))}")
            if r.detail.get("hint"):
                err.print(f"  {escape(str(r.detail['hint']))}")
            continue
        verb = {"dry_run": f"{r.due} due", "consolidated":
                f"{r.items_consolidated} consolidated into {r.summaries_created} summaries",
                "skipped-locked": "skipped (another process is consolidating it)",
                "no_op": "nothing due"}.get(r.status, r.status)
        out.print(f"{r.bank} {r.namespace}: {verb}")
