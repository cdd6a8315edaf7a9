"""`mnemo mcp`: a stdio MCP server over mnemo's commands (docs/mcp.md).

Unlike a server that pins one session for its whole life, every tool call
decides afresh where it reads and writes:

1. the call's `path` argument (relative paths are taken from the directory
   the next rule would give);
2. the client's MCP roots (`file://` URIs; several roots must all lie in the
   same workspace, else the call asks for `path`; so does a client that
   declared roots and did not give them within ROOTS_WAIT_SECONDS);
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
import logging
import os
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import unquote, urlparse

from mcp import types as mcp_types
from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp.types import (
    CallToolResult,
    ListRootsRequest,
    ListRootsResult,
    TextContent,
    ToolAnnotations,
)
from pydantic import Field, ValidationError

from .. import __version__, paths
from ..config import Settings, apply_environment, load_settings
from ..errors import DataError, MnemoError, RefusedError, UnboundError, usage_error
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
_log = logging.getLogger("dsh_mnemo.mcp")


# ─── Where a call goes ─────────────────────────────────────────────────────

def _root_paths(roots: ListRootsResult | RootsProblem | None) -> list[Path]:
    found: list[Path] = []
    for root in (roots.roots if isinstance(roots, ListRootsResult) else []):
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
        except sqlite3.DatabaseError as exc:
            _log.exception("a memory database failed")
            return error_result(DataError(f"a memory database failed: {exc}",
                                          hint="Run `mnemo doctor`."))
        except Exception as exc:  # a bug: a tool error the client can show, never a crash
            _log.exception("a tool failed")
            return error_result(MnemoError(
                f"unexpected error ({type(exc).__name__}: {exc})",
                hint="The details are in the server's log (stderr); `mnemo doctor` checks "
                     "the installation."))

    return await asyncio.get_running_loop().run_in_executor(_worker, guarded)


# ─── Tools ─────────────────────────────────────────────────────────────────

# The longest a call waits for the client's answer to roots/list: a client that
# declares roots and never answers must not hold the call for ever.
ROOTS_WAIT_SECONDS = 10.0


class RootsProblem:
    """A client that declared the roots capability but gave no roots: why."""

    def __init__(self, why: str) -> None:
        self.why = why


async def client_roots(ctx: Context) -> ListRoots | ListRootsResult | RootsProblem | None:
    """The client's roots when it declares it can list them (None when it cannot)."""
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.roots is None:
        return None
    if not ctx.session.can_send_request:
        # MCP 2026-07-28 and later (Claude Code): no request back to the client
        # during a call; the SDK asks for the roots in its input-required round
        # instead, and the client calls again with them, so nothing waits here.
        return ListRoots()
    try:
        return await ctx.session.send_request(
            ListRootsRequest(), ListRootsResult,
            request_read_timeout_seconds=ROOTS_WAIT_SECONDS,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id))
    except MCPError as exc:
        if exc.error.code == mcp_types.REQUEST_TIMEOUT:
            return RootsProblem(f"it did not answer roots/list within "
                                f"{ROOTS_WAIT_SECONDS:.0f} s")
        return RootsProblem(f"it answered roots/list with an error: {exc.error.message}")
    except ValidationError:
        return RootsProblem("its answer to roots/list is not a list of roots")


Roots = Annotated[ListRootsResult | RootsProblem | None, Resolve(client_roots)]


def _where(path: str | None, roots: ListRootsResult | RootsProblem | None,
           settings: Settings) -> Path:
    if isinstance(roots, RootsProblem) and not (
            path and Path(path.strip()).expanduser().is_absolute()):
        raise RefusedError(f"the client gave no roots ({roots.why}); nothing was read or "
                           "written",
                           hint="Pass `path` (absolute) to say which project this call is "
                                "about.")
    return choose_directory(path, _root_paths(roots), Path.cwd(), settings)


async def _in_project(path: str | None, roots: ListRootsResult | RootsProblem | None,
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


# ─── The wire ──────────────────────────────────────────────────────────────

def _invalid_arguments(tool: str, exc: ValidationError) -> MnemoError:
    """Arguments the tool's schema rejects, said the way mnemo says a bad command line."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        given = "" if error["type"] == "missing" else f" (got {_shown(error.get('input'))})"
        problems.append(f"`{where}`: {error['msg'][:1].lower()}{error['msg'][1:]}{given}")
    return usage_error(f"invalid arguments for `{tool}`: {'; '.join(problems)}; nothing was "
                       "read or written",
                       hint=f"The input schema of `{tool}` (tools/list) gives each argument's "
                            "type and range.")


def _shown(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False) if _is_json(value) else repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


class _Server(MCPServer):
    """The SDK's server, with mnemo's answers where the SDK's say less."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError):
                raise
            # Arguments that fail the schema: the SDK's text is pydantic's report,
            # with a link per error; this one names each argument and what it got.
            if isinstance(exc.__cause__, ValidationError):
                return error_result(_invalid_arguments(name, exc.__cause__))
            if exc.__cause__ is None and str(exc) == f"Unknown tool: {name}":
                names = ", ".join(f"`{t.name}`" for t in await self.list_tools())
                return error_result(usage_error(
                    f"mnemo has no tool {json.dumps(name, ensure_ascii=False)[:80]}; "
                    "nothing was read or written", hint=f"Its tools: {names}."))
            raise

    async def run_stdio_async(self) -> None:
        from mcp.server.stdio import stdio_server

        lowlevel = self._lowlevel_server  # what MCPServer.run_stdio_async serves
        async with stdio_server() as (read_stream, write_stream):
            lines = _AnsweredLines(read_stream, write_stream)
            await lowlevel.run(lines, _Answers(write_stream, lines),
                               lowlevel.create_initialization_options())


# The longest the end of stdin waits for the calls under way to answer.
DRAIN_SECONDS = 30.0

_LONE_SURROGATE = "[\ud800-\udfff]"


def _mended(value: Any) -> Any:
    """`value` with every lone UTF-16 surrogate in its strings made U+FFFD."""
    import re

    if isinstance(value, str):
        return re.sub(_LONE_SURROGATE, "\ufffd", value)
    if isinstance(value, list):
        return [_mended(v) for v in value]
    if isinstance(value, dict):
        return {_mended(k): _mended(v) for k, v in value.items()}
    return value


def _message_of(exc: ValidationError) -> Any:
    """The JSON value a line held when it parsed but is no JSON-RPC message (None if unknown)."""
    for error in exc.errors(include_url=False):
        if error["type"] in ("missing", "model_type") and len(error["loc"]) <= 2 \
                and isinstance(error.get("input"), (dict, list)):
            return error["input"]
    return None


def _what_is_wrong(value: Any, exc: ValidationError) -> str:
    if isinstance(value, list):
        return "a batch (a JSON array); batches are not supported, send one message a line"
    if not isinstance(value, dict):
        return "not a JSON-RPC 2.0 message (a JSON object)"
    problems = sorted({f"`{'.'.join(str(p) for p in e['loc'][1:]) or 'message'}`: {e['msg']}"
                       for e in exc.errors(include_url=False)
                       if e["loc"][:1] == ("JSONRPCRequest",)})
    return "not a JSON-RPC 2.0 request" + (f" ({'; '.join(problems)})" if problems else "")


class _Wrapped:
    """A transport stream seen through a wrapper: closing it and its context manager
    are the wrapped stream's."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Any:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._inner.__aexit__(*exc_info)


class _AnsweredLines(_Wrapped):
    """The stdio transport's read stream, with every line it could not read answered.

    The SDK drops such a line without a word: a request in it never gets its
    response and the client waits for ever.  Here a JSON line with lone UTF-16
    surrogates (`\\ud83d`: what a JavaScript client sends for an emoji cut in
    half) is read with each one as U+FFFD, as the transport already reads
    invalid UTF-8; a line that is not JSON gets a parse error (id null); a JSON
    value that is no JSON-RPC message gets an invalid-request error, with its
    id when it has one (a notification or a response gets no answer).
    """

    def __init__(self, inner: Any, write: Any) -> None:
        super().__init__(inner)
        self._write = write
        self.unanswered: set[int | str] = set()  # ids of the requests read, not yet answered

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    def __aiter__(self) -> _AnsweredLines:
        return self

    async def __anext__(self) -> Any:
        while True:
            try:
                item = await self._inner.__anext__()
            except StopAsyncIteration:
                await self._drain()
                raise
            if not isinstance(item, Exception):
                self._note(item.message)
                return item
            try:
                mended = await self._answer(item)
            except Exception:  # answering must never end the session
                _log.exception("a line the transport could not read was not answered")
                continue
            if mended is not None:
                return mended

    def _note(self, message: Any) -> None:
        if isinstance(message, mcp_types.JSONRPCRequest):
            self.unanswered.add(message.id)
        elif isinstance(message, mcp_types.JSONRPCNotification) and \
                message.method == "notifications/cancelled" and message.params:
            self.unanswered.discard(message.params.get("requestId"))  # never answered

    async def _drain(self) -> None:
        """At the end of stdin, let the calls under way finish and send their answers.

        The SDK cancels them at once and answers "Connection closed", though a
        write under way still lands: a client that closes stdin and reads on
        would take a stored memory for a failed one.
        """
        import anyio

        deadline = anyio.current_time() + DRAIN_SECONDS
        while self.unanswered and anyio.current_time() < deadline:
            await anyio.sleep(0.02)

    async def receive(self) -> Any:
        try:
            return await self.__anext__()
        except StopAsyncIteration:
            import anyio

            raise anyio.EndOfStream from None

    async def _answer(self, exc: Exception) -> SessionMessage | None:
        if not isinstance(exc, ValidationError):
            _log.warning("the transport could not read a message: %r", exc)
            return None
        unreadable = next((e for e in exc.errors(include_url=False)
                           if e["type"] == "json_invalid"), None)
        if unreadable is not None:
            try:
                value = _mended(json.loads(str(unreadable.get("input", ""))))
            except (ValueError, RecursionError):  # RecursionError: nested too deep
                _log.warning("a line that is not JSON: %s", unreadable["msg"])
                await self._reply(None, mcp_types.PARSE_ERROR,
                                  f"parse error: the line is not JSON ({unreadable['msg']})")
                return None
            try:
                return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_python(
                    value, by_name=False))
            except ValidationError as again:
                exc = again
        else:
            value = _message_of(exc)
        if isinstance(value, dict) and ("method" not in value or "id" not in value):
            _log.warning("an invalid JSON-RPC notification or response was ignored")
            return None
        request_id = value.get("id") if isinstance(value, dict) else None
        if not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
            request_id = None
        what = _what_is_wrong(value, exc)
        _log.warning("an invalid request was refused: %s", what)
        await self._reply(request_id, mcp_types.INVALID_REQUEST, f"invalid request: {what}")
        return None

    async def _reply(self, request_id: int | str | None, code: int, message: str) -> None:
        error = mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id,
                                       error=mcp_types.ErrorData(code=code, message=message))
        try:
            await self._write.send(SessionMessage(error))
        except Exception:  # the client is gone: nobody to answer
            _log.debug("no answer sent: the stream is closed")


class _Answers(_Wrapped):
    """The transport's write stream, telling `_AnsweredLines` which requests are answered."""

    def __init__(self, inner: Any, lines: _AnsweredLines) -> None:
        super().__init__(inner)
        self._lines = lines

    async def send(self, item: SessionMessage) -> None:
        if isinstance(item.message, (mcp_types.JSONRPCResponse, mcp_types.JSONRPCError)):
            self._lines.unanswered.discard(item.message.id)
        await self._inner.send(item)


def build_server() -> MCPServer:
    server = _Server("mnemo", title="mnemo project memory", version=__version__,
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
    import signal

    apply_environment(load_settings(), paths.data_dir())
    # SIGINT (Ctrl-C, or a client stopping the server) ends it at once, as SIGTERM
    # does: Python's KeyboardInterrupt stopped the answers but left the process
    # waiting, for ever, for the end of stdin.  A write it cuts is a rolled-back
    # SQLite transaction, as under SIGTERM.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        build_server().run()
    except BaseException as exc:
        if not _client_gone(exc):
            raise
        _log.info("the client closed its end of stdout: nobody is left to answer")


def _client_gone(exc: BaseException) -> bool:
    """Whether `exc` is (a group of nothing but) the broken pipe of a closed stdout."""
    inner = getattr(exc, "exceptions", None)  # an exception group, on any Python
    if inner is not None:
        return bool(inner) and all(_client_gone(e) for e in inner)
    return isinstance(exc, BrokenPipeError)


__all__ = ["build_server", "choose_directory", "serve"]
