"""Driving `mnemo mcp` with the MCP SDK's own client over stdio.

`McpClient` starts the installed `mnemo mcp` console script as a subprocess
(the real server, the real SDK transport, the real mnemosyne package) and
talks to it through `mcp.ClientSession`.  Its roots are whatever the test
sets `roots` to at the moment the server asks, so one long-lived session can
move between projects, as a client with several windows would.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.conftest import mnemo_executable


class Result:
    """One tool call's outcome: the JSON document, the notes, the error flag."""

    def __init__(self, raw: types.CallToolResult) -> None:
        self.raw = raw
        self.is_error = bool(raw.is_error)
        self.texts = [c.text for c in raw.content if isinstance(c, types.TextContent)]
        self.document: dict[str, Any] | None = None
        for text in self.texts:
            try:
                parsed = json.loads(text)
            except ValueError:
                continue
            if isinstance(parsed, dict) and "kind" in parsed:
                self.document = parsed
                break

    @property
    def text(self) -> str:
        return "\n".join(self.texts)

    def __repr__(self) -> str:
        return f"Result(is_error={self.is_error}, text={self.text[:300]!r})"


class McpClient:
    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, tool: str, **arguments: Any) -> Result:
        return Result(await self.session.call_tool(tool, arguments))

    async def tools(self) -> list[types.Tool]:
        return list((await self.session.list_tools()).tools)


def run_client(body: Callable[[McpClient], Awaitable[Any]], *, cwd: Path,
               roots: list[Path] | None | Callable[[], list[Path]] = None,
               env: dict[str, str] | None = None) -> Any:
    """Start `mnemo mcp` in `cwd` and run `body` against it.

    `roots`: None for a client without the roots capability; a list, or a
    function returning the list at the moment the server asks.
    """
    async def list_roots(context: Any) -> types.ListRootsResult:
        current = roots() if callable(roots) else roots or []
        return types.ListRootsResult(roots=[
            types.Root(uri=p.resolve().as_uri(), name=p.name) for p in current])

    async def main() -> Any:
        params = StdioServerParameters(command=mnemo_executable(), args=["mcp"],
                                       env={**os.environ, **(env or {})}, cwd=str(cwd))
        async with stdio_client(params) as (read, write), ClientSession(
                read, write, list_roots_callback=list_roots if roots is not None else None,
                read_timeout_seconds=60) as session:
            await session.initialize()
            return await body(McpClient(session))

    return anyio.run(main)
