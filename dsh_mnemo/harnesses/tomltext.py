"""Tables of a TOML file added and cut as text, every other byte left as it was.

mnemo's own tables in a user's TOML (Codex's `config.toml`: the MCP server
`[mcp_servers.mnemo]`, the trust records `[hooks.state."…"]`) go in at the
end of the file and come out again without a TOML writer touching the rest:
`append_tables` adds a block after one blank line, and `cut_tables` takes out
every table it is asked to, from its header to the next one.  When what it cut
ended the file, it also takes back the line break `append_tables` had put
before it, so appending then cutting gives back the very same bytes.  Callers
parse the result again and compare it with what they expect.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

Key = tuple[str, ...]


def loads(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    return tomllib.loads(text)


def header_key(line: str) -> Key | None:
    """The key of a `[table]` or `[[array of tables]]` header line; None for any other
    line (a TOML parser reads the header, quoted parts and comments included)."""
    stripped = line.strip()
    if not stripped.startswith("["):
        return None
    try:
        node: Any = loads(stripped)
    except ValueError:
        return None  # an array's line, say
    key: list[str] = []
    while isinstance(node, dict) and len(node) == 1:
        name, node = next(iter(node.items()))
        key.append(name)
        if isinstance(node, list) and len(node) == 1:
            node = node[0]
    return tuple(key) if key and node == {} else None


def append_tables(text: str, block: str) -> str:
    """`text` with `block` (tables, ending with a line break) at the end, after a blank
    line; right after the text's last line when that line has no line break."""
    if not text:
        return block
    return text + "\n" + block


def cut_tables(text: str, ours: Callable[[Key], bool]) -> str:
    """`text` without the tables whose header key `ours` accepts (each from its header
    to the next header, or to the end)."""
    kept: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        key = header_key(line)
        if key is not None:
            skipping = ours(key)
        if not skipping:
            kept.append(line)
    result = "".join(kept)
    if skipping and result.endswith("\n") and not result.endswith("\r\n"):
        # What was cut ended the file: take back the line break appended before it.
        result = result[:-1]
    return result
