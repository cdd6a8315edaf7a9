"""`mnemo mcp`: a stdio MCP server over mnemo's commands (docs/mcp.md).

Unlike a server that pins one session for its whole life, every tool call
decides afresh where it reads and writes:

1. the call's `path` argument (relative paths are taken from the directory
   the next rule would give);
2. the client's MCP roots (`file://` URIs; several roots must all lie in the
   same workspace, else the call asks for `path`);
3. the server's working directory (clients start it in the project).

That directory goes through `resolve_memory_context`, the one place that
decides the namespace.  An unbound directory is a tool error carrying the
bind hint; nothing falls back to another namespace, and a call can only ever
touch the rows of the workspace it resolved (and global memory), because
the commands it calls read and delete nothing else.

MCP calls carry no harness session id, so they always use workspace
memory: `recall_mode` and `auto_write_scope` are taken as `workspace` here.
Every tool answers with the same JSON document `mnemo … --json` prints
(docs/json.md), followed by the command's notes; failures are tool errors
whose text is the `error` document.

The SDK is imported here only, so no other command pays for it.  Tools run
one at a time on one worker thread: upstream's SQLite connections belong to
the thread that opened them, and mnemo's core is written for one caller.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import unquote, urlparse

from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve
from mcp.types import CallToolResult, ListRootsResult, TextContent, ToolAnnotations
from pydantic import Field

from .. import __version__, paths
from ..config import Settings, apply_environment, load_settings
from ..errors import MnemoError, RefusedError, UnboundError
from ..report import Report, error_document, json_document

INSTRUCTIONS = """\
mnemo is this user's long-term memory, one per project (a repository bound with \
`mnemo bind`), plus a global memory for the user's own preferences. Recall before \
answering questions about earlier decisions, conventions or conversations; remember \
durable facts the user states or asks you to keep. Every tool works on the project \
of its `path` argument, else of the client's root, else of the server's directory. \
If a tool reports that the directory has no memory, tell the user and call `bind` \
only if they want one."""

PathArg = Annotated[str | None, Field(
    description="A directory inside the project (absolute, or relative to the project root "
    "the client reports). Leave it out to use the client's workspace root.")]

_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemo-mcp")


# ─── Where a call goes ─────────────────────────────────────────────────────

def _root_paths(roots: ListRootsResult | None) -> list[Path]:
    found: list[Path] = []
    for root in (roots.roots if roots else []):
        parsed = urlparse(str(root.uri))
        if parsed.scheme == "file" and parsed.path:
            found.append(Path(unquote(parsed.path)))
    return found


def _settings() -> Settings:
    loaded = load_settings()
    apply_environment(loaded, paths.data_dir())
    # No harness session id reaches an MCP call: it always uses workspace memory.
    values = {**loaded.values, "recall_mode": "workspace", "auto_write_scope": "workspace"}
    return Settings(values=values, source=loaded.source)


def _workspace_key(directory: Path, settings: Settings) -> str:
    from ..workspace.context import resolve_memory_context

    ctx = resolve_memory_context(directory, None, settings, register=False)
    return ctx.namespace or f"unbound:{ctx.hint_root}"


def choose_directory(path: str | None, roots: list[Path], cwd: Path,
                     settings: Settings) -> Path:
    """The directory a call acts in: `path`, else the client's roots, else `cwd`."""
    given = Path(path.strip()).expanduser() if path is not None and path.strip() else None
    if given is not None and given.is_absolute():
        chosen = given
    else:
        if len(roots) > 1 and len({_workspace_key(r, settings) for r in roots}) > 1:
            listed = ", ".join(str(r) for r in roots)
            raise RefusedError(
                f"the client has {len(roots)} roots in different workspaces ({listed}); "
                "nothing was read or written",
                hint="Pass `path` (absolute) to say which project this call is about.")
        base = roots[0] if roots else cwd
        chosen = base / given if given is not None else base
    chosen = Path(os.path.normpath(chosen))
    if not chosen.is_dir():
        raise RefusedError(f"{chosen} is not an existing directory; nothing was read or written",
                           hint="Pass `path` as a directory inside the project.")
    return chosen


def _bound_context(directory: Path, settings: Settings) -> Any:
    """The directory's context; an unbound directory is an error carrying the bind hint."""
    from ..workspace.context import resolve_memory_context

    ctx = resolve_memory_context(directory, None, settings)
    if not ctx.bound:
        raise _unbound(directory, ctx.hint_root)
    return ctx


def _unbound(directory: Path, hint_root: str | None) -> UnboundError:
    root = hint_root or str(directory)
    return UnboundError(
        f"{directory} is not in a project with a memory; nothing was read or written",
        hint=f"If the user wants one, call the `bind` tool with path={json.dumps(root)} (it "
             f"writes a .mnemosyne-id marker there) or run `mnemo bind` in {root}. Do not "
             "retry other tools until then.")


# ─── Results ───────────────────────────────────────────────────────────────

def document(kind: str, data: Any) -> dict[str, Any]:
    """The JSON document `mnemo … --json` prints for a report of `kind`."""
    return json_document(kind, data)


def _text(value: str) -> TextContent:
    return TextContent(type="text", text=value)


def report_result(report: Report) -> CallToolResult:
    content = [_text(json.dumps(document(report.kind, report.data), ensure_ascii=False,
                                indent=2))]
    content += [_text(("Warning: " if m.level == "warning" else "") + m.text)
                for m in report.messages]
    return CallToolResult(content=content, is_error=bool(report.exit_code))


def error_result(exc: MnemoError) -> CallToolResult:
    doc = error_document(exc.message, exc.hint, int(exc.exit_code))
    text = exc.message + (f"\n{exc.hint}" if exc.hint else "")
    return CallToolResult(content=[_text(text), _text(json.dumps(doc, ensure_ascii=False))],
                          is_error=True)


async def _run(call: Callable[[], Report]) -> CallToolResult:
    """Run one command on the worker thread; mnemo's errors become tool errors."""
    def guarded() -> CallToolResult:
        try:
            return report_result(call())
        except MnemoError as exc:
            return error_result(exc)
        except OSError as exc:
            where = f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")
            return error_result(MnemoError(where, hint="Check the path and its permissions."))

    return await asyncio.get_running_loop().run_in_executor(_worker, guarded)


# ─── Tools ─────────────────────────────────────────────────────────────────

def client_roots(ctx: Context) -> ListRoots | None:
    """Ask for the client's roots when it can answer (the framework does the asking)."""
    capabilities = ctx.client_capabilities
    if capabilities is not None and capabilities.roots is not None:
        return ListRoots()
    return None


Roots = Annotated[ListRootsResult | None, Resolve(client_roots)]


def _where(path: str | None, roots: ListRootsResult | None,
           settings: Settings) -> Path:
    return choose_directory(path, _root_paths(roots), Path.cwd(), settings)


async def _in_project(path: str | None, roots: ListRootsResult | None,
                      command: Callable[[Settings, Path], Report]) -> CallToolResult:
    """Run `command(settings, directory)` for a directory that has a memory (the tool's
    `path`, or the client's roots); an unbound directory is a tool error that says how
    to bind it."""
    def call() -> Report:
        settings = _settings()
        directory = _where(path, roots, settings)
        _bound_context(directory, settings)
        return command(settings, directory)
    return await _run(call)


# A recalled memory longer than this reaches the model cut, ending in "…": a sleep
# summary folds a whole backlog into one row (one of 266,000 characters was seen),
# and the rows it summarises are recalled themselves.  `mnemo recall --json` gives
# it whole.
MAX_RECALLED_CHARS = 2000


def _cut_long(report: Report) -> Report:
    cut = 0
    for memory in getattr(report.data, "results", []):
        if len(memory.content) > MAX_RECALLED_CHARS:
            memory.content = memory.content[:MAX_RECALLED_CHARS - 1] + "\u2026"
            cut += 1
    if cut:
        report.note(f"{cut} long memor{'y was' if cut == 1 else 'ies were'} cut to "
                    f"{MAX_RECALLED_CHARS} characters (`mnemo recall --json` shows "
                    f"{'it' if cut == 1 else 'them'} whole).")
    return report


def build_server() -> MCPServer:
    server = MCPServer("mnemo", title="mnemo project memory", version=__version__,
                       instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(
        description="Store one durable memory for this project so future conversations can "
        "recall it: a decision, convention, fact about the code, or something the user asks "
        "you to remember (\"we deploy with make release\"). Write one self-contained "
        "sentence. Never store secrets (they are redacted anyway). Use scope \"global\" only "
        "for the user's personal preferences that hold in every project.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def remember(
        text: Annotated[str, Field(description="The memory, one self-contained sentence.",
                                   min_length=1, max_length=20_000)],
        scope: Annotated[str, Field(
            description="\"workspace\" (this project, the default) or \"global\" (every "
            "project).", pattern="^(workspace|global)$")] = "workspace",
        importance: Annotated[float, Field(
            description="0 to 1; higher surfaces first (0.5 for ordinary facts, 0.8+ for "
            "rules the user insists on).", ge=0.0, le=1.0)] = 0.5,
        path: PathArg = None,
        roots: Roots = None,
    ) -> CallToolResult:
        def call() -> Report:
            from ..commands import memory as commands

            settings = _settings()
            directory = _where(path, roots, settings)
            if scope != "global":
                _bound_context(directory, settings)
            # The one write path scrubs the text and reports what it found (the
            # document's `secrets`, and a note), as for `mnemo remember --json`.
            return commands.remember(settings, text, scope=scope, source="mcp",
                                     importance=importance, cwd=directory)
        return await _run(call)

    @server.tool(
        description="Search this project's long-term memory (and the user's global memory). "
        "Use it before answering questions about earlier decisions, conventions, past "
        "conversations or \"what did we do about X\", and before redoing work that may "
        "have been settled. Returns memories best first, each with the id `forget` takes.",
        annotations=ToolAnnotations(read_only_hint=True))
    async def recall(
        query: Annotated[str, Field(description="What to look for, in a few words.",
                                    min_length=1, max_length=2000)],
        top_k: Annotated[int, Field(description="Most memories to return.", ge=1,
                                    le=50)] = 5,
        path: PathArg = None,
        roots: Roots = None,
    ) -> CallToolResult:
        from ..commands import memory as commands

        def found(settings: Settings, directory: Path) -> Report:
            return _cut_long(commands.recall(settings, query, top_k=top_k, cwd=directory))
        return await _in_project(path, roots, found)

    @server.tool(
        description="Delete one memory by the id `recall` returned, when the user says it is "
        "wrong, outdated or should not be kept. Only this project's memories and global "
        "ones can be deleted; anything else is refused.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True,
                                    idempotent_hint=True))
    async def forget(
        id: Annotated[str, Field(description="The memory id, as `recall` shows it.",
                                 min_length=1, max_length=200)],
        path: PathArg = None,
        roots: Roots = None,
    ) -> CallToolResult:
        from ..commands import memory as commands

        return await _in_project(path, roots, lambda settings, directory: commands.forget(
            settings, id, cwd=directory))

    @server.tool(
        description="Count this project's memories (and the global ones) per tier. Use when "
        "the user asks how much is remembered or whether consolidation is due.",
        annotations=ToolAnnotations(read_only_hint=True))
    async def stats(path: PathArg = None, roots: Roots = None) -> CallToolResult:
        from ..commands import memory as commands

        return await _in_project(path, roots, lambda settings, directory: commands.stats(
            settings, cwd=directory))

    @server.tool(
        description="Consolidate this project's older raw memories into summaries (offline). "
        "It runs automatically; call it only when the user asks to tidy or consolidate "
        "memory. dry_run reports what is due without writing.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                    idempotent_hint=True))
    async def sleep(
        dry_run: Annotated[bool, Field(description="Only report what is due.")] = False,
        force: Annotated[bool, Field(
            description="Consolidate every raw memory, whatever its age.")] = False,
        path: PathArg = None,
        roots: Roots = None,
    ) -> CallToolResult:
        from ..commands import memory as commands

        return await _in_project(path, roots, lambda settings, directory: commands.sleep(
            settings, dry_run=dry_run, force=force, cwd=directory))

    @server.tool(
        description="Give this project a memory: writes a .mnemosyne-id marker at the root of "
        "the repository around `path` (its main work tree for a git worktree). Call it only "
        "when the user wants "
        "project memory, typically after another tool said the directory has none. With "
        "decline=true it records that the user does not want one (no marker is written).",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                    idempotent_hint=True))
    async def bind(
        path: PathArg = None,
        decline: Annotated[bool, Field(
            description="The user does not want memory here: silence the bind hint "
            "instead.")] = False,
        roots: Roots = None,
    ) -> CallToolResult:
        def call() -> Report:
            from ..commands import workspace as commands
            from ..workspace.context import resolve_memory_context

            settings = _settings()
            directory = _where(path, roots, settings)
            # Like `mnemo bind` with no path: the repository around the directory, so a
            # model passing a subdirectory never creates a workspace of its own there.
            ctx = resolve_memory_context(directory, None, settings, register=False)
            if ctx.hint_root and not ctx.bound:
                directory = Path(ctx.hint_root)
            return commands.bind(directory, settings, decline=decline)
        return await _run(call)

    @server.tool(
        description="Show which memory a directory uses: whether it is bound, the project's "
        "name, root and bank. Use it to check before binding, or when another tool says "
        "the directory has no memory.",
        annotations=ToolAnnotations(read_only_hint=True))
    async def status(path: PathArg = None, roots: Roots = None) -> CallToolResult:
        def call() -> Report:
            from ..commands import workspace as commands
            from ..workspace.context import resolve_memory_context

            settings = _settings()
            directory = _where(path, roots, settings)
            report = commands.status(directory, settings)
            if not report.data.bound:
                ctx = resolve_memory_context(directory, None, settings, register=False)
                report.note(_unbound(directory, ctx.hint_root).hint or "")
            return report
        return await _run(call)

    @server.tool(
        description="List every project that has a memory (name, root, state). Use when the "
        "user asks which projects mnemo remembers, or to find a project's path.",
        annotations=ToolAnnotations(read_only_hint=True))
    async def workspaces(roots: Roots = None) -> CallToolResult:
        def call() -> Report:
            from ..commands import workspace as commands

            _settings()
            listed = _root_paths(roots)
            return commands.workspaces(listed[0] if listed else Path.cwd())
        return await _run(call)

    return server


def serve() -> None:
    """Run the server on stdin/stdout until the client closes the stream."""
    apply_environment(load_settings(), paths.data_dir())
    build_server().run()


__all__ = ["build_server", "choose_directory", "serve"]
