"""Which namespaces a new resident server reads first: the ones searched last.

A server keeps each namespace's vectors as one matrix (`memory.semantic`);
reading it is the one slow part of a namespace's first prompt (about a
second at 100,000 memories).  `run/warm.json` lists the namespaces searched
last, most recent first, at most `semantic.MAX_CACHED`:

    [[bank file, namespace, model id, with scope-global rows], ...]

A hook that answered in its own process writes what it searched just
before it starts a server (so the server reads the workspace the user is
in while the user reads the answer); a server writes its own list as it
exits; a starting server reads the list after loading the model.  Best
effort both ways: a missing or damaged file means a server starts cold,
nothing more.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..server import client
from . import semantic
from .semantic import MAX_CACHED as LIMIT

WARM_NAME = "warm.json"

Key = tuple[str, str, str, bool]


def _path(base: Path) -> Path:
    return Path(client.run_dir(str(base))) / WARM_NAME


def load(base: Path) -> list[Key]:
    """The list, most recent first ([] when there is none or it is damaged)."""
    try:
        raw = json.loads(_path(base).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    keys: list[Key] = []
    for item in raw if isinstance(raw, list) else []:
        if (isinstance(item, list) and len(item) == 4
                and all(isinstance(x, str) for x in item[:3]) and isinstance(item[3], bool)):
            keys.append((item[0], item[1], item[2], item[3]))
    return keys[:LIMIT]


def note(base: Path, searched: Iterable[Any]) -> None:
    """Put `searched` (most recent first) ahead of the list already there."""
    fresh = [tuple(k) for k in searched]
    if not fresh:
        return
    merged: list[Any] = []
    for key in fresh + load(base):
        if key not in merged:
            merged.append(key)
    from ..fsutil import atomic_write_text

    with contextlib.suppress(OSError):
        atomic_write_text(_path(base), json.dumps([list(k) for k in merged[:LIMIT]]) + "\n",
                          mode=0o600)


def note_searched(base: Path) -> None:
    """Put what this process searched ahead of the list."""
    note(base, semantic.searched())
