"""Namespaces that hold rows but have no index entry, and candidates for a directory.

The index is rebuildable, so the databases are the second source of truth
(docs/architecture.md): a workspace bank on disk that no entry names, or
a `dsh_v2_workspace_*` namespace in the default database (written by the old
DSH plugin) that no entry owns, is an *orphan*, recoverable with
`mnemo adopt`.  A directory whose name matches an entry's or an orphan's last
seen path gets that as a *suggestion*: shown with its row count, never merged
automatically.
"""

from __future__ import annotations

import json
from pathlib import Path

from .. import paths
from ..errors import MnemoError
from ..memory.banks import NamespaceStats, namespace_stats
from ..record import record
from . import identity
from .index import Index, IndexData, salvage_objects


@record
class Orphan:
    namespace: str
    where: str  # "bank:<name>" or "default"
    rows: int
    first: str | None
    last: str | None
    display_name: str | None = None  # from a set-aside index that named it
    last_seen_path: str | None = None
    command: str | None = None  # what recovers it (adopt) or finishes it (migrate)


@record
class Hint:
    """What a set-aside index file (or a DSH plugin's index) knew of a namespace."""

    display_name: str | None
    last_seen_path: str | None


ASIDE_MAX_BYTES = 4 * 1024 * 1024  # read of each set-aside file, at most
ASIDE_MAX_MISSES = 500  # salvage work per set-aside file (they are read on every listing)


def _aside_entries(path: Path) -> list[dict[str, object]]:
    """The entries of one set-aside index file: all of them if it parses, else
    whatever still does.  Never raises: a damaged file is exactly what is expected
    here (deep nesting, garbage, truncation, a FIFO or a huge file)."""
    try:
        if not path.is_file():
            return []
        with open(path, "rb") as handle:
            text = handle.read(ASIDE_MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return []
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        raw = None
    entries = raw.get("workspaces") if isinstance(raw, dict) else None
    if isinstance(entries, list):
        return [e for e in entries if isinstance(e, dict)]
    return salvage_objects(text, lambda o: isinstance(o.get("namespace"), str),
                           max_misses=ASIDE_MAX_MISSES)


def aside_hints(index: Index) -> dict[str, Hint]:
    """Namespaces named in index files that were set aside as corrupt or foreign.

    The DSH plugin's identity.json (no `bank` field) and a damaged one are
    moved aside, not deleted; their entries still say where a namespace lived.
    """
    hints: dict[str, Hint] = {}
    folder = index.path.parent
    if not folder.is_dir():
        return hints
    for path in sorted(folder.glob(index.path.name + ".*")):
        if path.name.endswith((".lock", ".tmp")):
            continue
        for entry in _aside_entries(path):
            if not isinstance(entry.get("namespace"), str):
                continue
            last = entry.get("lastSeenPath") or entry.get("canonicalPath")
            name = entry.get("displayName")
            hints[str(entry["namespace"])] = Hint(name if isinstance(name, str) else None,
                                                  last if isinstance(last, str) else None)
    return hints


def _stats(bank: str, base: Path) -> dict[str, NamespaceStats]:
    """A bank's namespaces for a listing; a damaged bank lists nothing (doctor reports it)."""
    try:
        return namespace_stats(bank, base=base)
    except MnemoError:
        return {}


def _total(stats: dict[str, NamespaceStats]) -> tuple[int, str | None, str | None]:
    rows = sum(s.rows for s in stats.values())
    firsts = [s.first for s in stats.values() if s.first]
    lasts = [s.last for s in stats.values() if s.last]
    return rows, min(firsts, default=None), max(lasts, default=None)


def find_orphans(index: Index, data: IndexData | None = None) -> list[Orphan]:
    data = data or index.load()
    base = index.base
    known_namespaces = {e.namespace for e in data.workspaces}
    known_banks = {e.bank for e in data.workspaces}
    hints = aside_hints(index)
    found: list[Orphan] = []
    banks = paths.banks_dir(base)
    if banks.is_dir():
        for folder in sorted(banks.iterdir()):
            db = folder / paths.DEFAULT_DB_FILE
            if (not folder.name.startswith(identity.BANK_PREFIX) or folder.name in known_banks
                    or not db.exists()):
                continue
            stats = _stats(folder.name, base)
            if not any(s.all_rows for s in stats.values()):
                continue
            owner = next((ns for ns in stats if identity.is_workspace_namespace(ns)
                          and identity.bank_for(ns) == folder.name), None)
            rows, first, last = _total(stats)
            hint = hints.get(owner or "", Hint(None, None))
            found.append(Orphan(
                namespace=owner or folder.name, where=f"bank:{folder.name}", rows=rows,
                first=first, last=last, display_name=hint.display_name,
                last_seen_path=hint.last_seen_path,
                command=(f"mnemo adopt {owner} PATH" if owner else None)))
    for ns, s in sorted(_stats("default", base).items()):
        if identity.is_workspace_namespace(ns) and ns not in known_namespaces and s.all_rows:
            hint = hints.get(ns, Hint(None, None))
            found.append(Orphan(namespace=ns, where="default", rows=s.rows, first=s.first,
                                last=s.last, display_name=hint.display_name,
                                last_seen_path=hint.last_seen_path,
                                command=f"mnemo adopt {ns} PATH"))
    return found


def pending_moves(index: Index, data: IndexData | None = None) -> list[Orphan]:
    """Owned workspace namespaces whose rows still sit in the default database."""
    data = data or index.load()
    owned = {e.namespace for e in data.workspaces}
    return [Orphan(namespace=ns, where="default", rows=s.rows, first=s.first, last=s.last,
                   command="mnemo migrate run")
            for ns, s in sorted(_stats("default", index.base).items())
            if ns in owned and s.all_rows]


def default_stats(index: Index, namespace: str) -> NamespaceStats | None:
    """What the default database still holds of `namespace`, if anything."""
    return _stats("default", index.base).get(namespace)


def workspace_rows(index: Index, namespace: str, bank: str) -> int:
    """Memories of a workspace: its whole bank, plus its rows still in the default db."""
    rows, _, _ = _total(_stats(bank, index.base))
    default = default_stats(index, namespace)
    return rows + (default.rows if default else 0)


def suggestions(cwd: Path, index: Index, orphans: list[Orphan],
                data: IndexData | None = None) -> list[dict[str, object]]:
    """Entries and orphans whose last seen directory has this directory's name.

    Offered only where they could help: an unbound directory, or one whose
    workspace holds no memories yet (a lost marker replaced by a fresh bind).
    """
    data = data or index.load()
    try:
        location = identity.find_workspace(cwd)
    except MnemoError:  # a vanished cwd gets no suggestions, not an error
        return []
    here = None
    if location.found:
        here = data.active_for(identity.identity_key_for(location.workspace_uuid or ""))
        if here is not None and workspace_rows(index, here.namespace, here.bank):
            return []
    root = location.root or location.git_top or location.start
    name = root.name
    result: list[dict[str, object]] = []
    for entry in data.workspaces:
        if entry.supersededBy or (here is not None and entry.namespace == here.namespace):
            continue
        seen = {Path(p).name for p in (entry.lastSeenPath, entry.canonicalPath) if p}
        if name not in seen or entry.lastSeenPath == str(root):
            continue
        result.append({
            "kind": "workspace", "namespace": entry.namespace,
            "display_name": entry.displayName, "last_seen_path": entry.lastSeenPath,
            "rows": workspace_rows(index, entry.namespace, entry.bank),
            "command": f"mnemo rebind {root} --from {entry.namespace}"})
    for orphan in orphans:
        if orphan.last_seen_path and Path(orphan.last_seen_path).name == name \
                and identity.is_workspace_namespace(orphan.namespace):
            result.append({
                "kind": "orphan", "namespace": orphan.namespace,
                "display_name": orphan.display_name, "last_seen_path": orphan.last_seen_path,
                "rows": orphan.rows, "command": f"mnemo adopt {orphan.namespace} {root}"})
    return result
