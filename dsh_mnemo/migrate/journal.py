"""The migration journal: one small header file per run, plus its row lists.

`migrations/<id>.json` says what the run selected, which backups it took and
how far each group (one source database -> one target database) got.
`migrations/<id>.g<N>.rows.json` lists every row of a group with its key in
the source and in the target, its owner namespace and the old and new values
of every rewritten column; it is written (atomically) before the target is
committed, so a crash can always be resumed or reverted from it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from .. import paths
from ..errors import DataError, RefusedError
from ..fsutil import atomic_write_text, file_lock
from ..record import asdict, field, record

JOURNAL_VERSION = 1

# A journal row, stored as a list in this column order (compact for 100k rows).
# A row with a `key` but no `new_key` is a vector a redacting run did not copy
# (its text held a secret): deleted from the source, never copied; reversed, it
# has a `new_key` but no `key`, and a revert has nothing to move back for it
# (`engine` module doc).
ROW_FIELDS = ("table", "key", "new_key", "owner",
              "session_set", "old_session", "new_session",
              "scope_set", "old_scope", "new_scope",
              "channel_set", "old_channel", "new_channel")

# Columns with few distinct values, stored once per file (see write_rows).
_INTERNED = frozenset(i for i, f in enumerate(ROW_FIELDS) if f not in ("key", "new_key"))


@record
class RowMove:
    table: str
    key: Any  # key in the database the row leaves
    new_key: Any  # key in the database it enters
    owner: str  # namespace the row belongs to (its session, or its memory's)
    session_set: bool = False
    old_session: Any = None
    new_session: Any = None
    scope_set: bool = False
    old_scope: Any = None
    new_scope: Any = None
    channel_set: bool = False
    old_channel: Any = None
    new_channel: Any = None

    def to_list(self) -> list[Any]:
        return [getattr(self, f) for f in ROW_FIELDS]

    @classmethod
    def from_list(cls, values: list[Any]) -> RowMove:
        data = dict(zip(ROW_FIELDS, values, strict=False))
        for flag in ("session_set", "scope_set", "channel_set"):
            data[flag] = bool(data[flag])
        return cls(**data)

    def reversed(self) -> RowMove:
        """The move that puts this row back exactly as it was."""
        return RowMove.from_list(reverse_row(self.to_list()))


def reverse_row(values: list[Any]) -> list[Any]:
    """A journal row (list form) that undoes `values`: keys and old/new swapped."""
    (table, key, new_key, owner, s_set, s_old, s_new, sc_set, sc_old, sc_new,
     c_set, c_old, c_new) = values
    return [table, new_key, key, owner, s_set, s_new, s_old, sc_set, sc_new, sc_old,
            c_set, c_new, c_old]


@record
class Group:
    index: int
    source_db: str
    target_db: str
    target_bank: str
    target_namespace: str | None
    namespaces: dict[str, str]  # old session_id -> new session_id
    scope_to: str | None = None
    status: str = "planned"  # planned|copying|copied|done|reverting|reverted
    rows_file: str | None = None
    revert_file: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    missing: int = 0  # journaled rows found in neither database
    revert_status: str | None = None
    revert_missing: list[list[Any]] = field(default_factory=list)  # [table, key]


@record
class Journal:
    id: str
    kind: str  # "migrate" | "adopt"
    created_at: int
    selection: dict[str, Any]
    status: str = "planned"  # planned|running|done|failed|reverting|reverted|restoring|restored
    backups: list[dict[str, str]] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    finished_at: int | None = None
    reverted_at: int | None = None
    restored_at: int | None = None
    # When the retention policy deleted this run's snapshots (backups/<id>/):
    # it can still be reverted from the journal, no longer `--from-backup`.
    backups_pruned_at: int | None = None
    version: int = JOURNAL_VERSION
    base: Path | None = field(default=None, repr=False, compare=False)

    @property
    def path(self) -> Path:
        return journal_dir(self.base) / f"{self.id}.json"

    def save(self) -> None:
        data = asdict(self)
        data.pop("base")
        atomic_write_text(self.path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")

    def rows_path(self, name: str) -> Path:
        return journal_dir(self.base) / name

    def write_rows(self, group: Group, rows: list[list[Any]], *, revert: bool = False) -> None:
        """Record rows in list form (ROW_FIELDS order): 100,000 objects cost seconds.

        The few distinct table names, namespaces, scopes and channels are
        written once in `strings` and referenced by index (a 100,000-memory
        run journals ~740,000 rows; spelled out they took 160 MB).
        """
        name = f"{self.id}.g{group.index}.{'revert' if revert else 'rows'}.json"
        strings: list[Any] = []
        index: dict[Any, int] = {}

        def ref(value: Any) -> int:
            found = index.get(value)
            if found is None:
                found = index[value] = len(strings)
                strings.append(value)
            return found

        encoded = [[ref(v) if i in _INTERNED else v for i, v in enumerate(row)] for row in rows]
        body = {"fields": list(ROW_FIELDS), "interned": sorted(_INTERNED),
                "strings": strings, "rows": encoded}
        atomic_write_text(self.rows_path(name),
                          json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n")
        if revert:
            group.revert_file = name
        else:
            group.rows_file = name

    def read_rows(self, name: str) -> list[list[Any]]:
        try:
            body = json.loads(self.rows_path(name).read_text(encoding="utf-8"))
            rows, strings = body["rows"], body["strings"]
            if (body["fields"] != list(ROW_FIELDS) or body["interned"] != sorted(_INTERNED)
                    or not all(isinstance(r, list) and len(r) == len(ROW_FIELDS)
                               for r in rows)):
                raise ValueError("unexpected row layout")
            return [[strings[v] if i in _INTERNED else v for i, v in enumerate(row)]
                    for row in rows]
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            raise DataError(f"the journal rows file {self.rows_path(name)} is unreadable: {exc}",
                            hint="Revert with --from-backup instead.") from None

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed", "reverted", "restored")


def journal_dir(base: Path | None = None) -> Path:
    return paths.migrations_dir(base)


def migration_lock(base: Path) -> contextlib.AbstractContextManager[None]:
    """The one lock of runs, reverts and backup pruning."""
    return file_lock(paths.locks_dir(base) / "migrate.lock", timeout=5.0,
                     what="migration lock")


def now_ms() -> int:
    return int(time.time() * 1000)


def new_id() -> str:
    """UTC time to the millisecond, then a random tag: ids sort by creation."""
    now = time.time()
    return (time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{int(now * 1000) % 1000:03d}"
            + "-" + secrets.token_hex(3))


def looks_like_id(name: str) -> bool:
    """`name` has the shape `new_id` gives a journal (a migration's snapshot folder)."""
    stamp, _, tag = name.partition("-")
    return (len(tag) == 6 and all(c in "0123456789abcdef" for c in tag)
            and len(stamp) in (15, 18) and stamp[8:9] == "T"
            and (stamp[:8] + stamp[9:]).isdigit() and stamp.isascii())


def create(kind: str, selection: dict[str, Any], base: Path | None = None) -> Journal:
    journal = Journal(id=new_id(), kind=kind, created_at=now_ms(), selection=selection,
                      base=base)
    journal.save()
    return journal


def load(journal_id: str, base: Path | None = None) -> Journal:
    if not journal_id or "/" in journal_id or journal_id.startswith("."):
        raise RefusedError(f"{journal_id!r} is not a journal id")
    path = journal_dir(base) / f"{journal_id}.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RefusedError(f"no migration journal {journal_id!r} in {journal_dir(base)}",
                           hint="`mnemo migrate revert` without --journal takes the latest.")\
            from None
    except (OSError, ValueError) as exc:
        raise DataError(f"the journal {path} is unreadable: {exc}") from None
    try:
        groups = [Group(**g) for g in raw.pop("groups", [])]
        return Journal(**raw, groups=groups, base=base)
    except TypeError as exc:
        raise DataError(f"the journal {path} is not a mnemo journal: {exc}") from None


def all_ids(base: Path | None = None) -> list[str]:
    folder = journal_dir(base)
    if not folder.is_dir():
        return []
    return sorted(p.name[:-len(".json")] for p in folder.iterdir()
                  if p.name.endswith(".json") and ".g" not in p.name
                  and not p.name.startswith("."))


def unfinished(base: Path | None = None) -> list[Journal]:
    """Journals a crash left behind (oldest first), to be completed."""
    found = []
    for journal_id in all_ids(base):
        journal = load(journal_id, base)
        if journal.status in ("planned", "running", "reverting", "restoring"):
            found.append(journal)
    return found


def latest_revertible(base: Path | None = None) -> Journal | None:
    for journal_id in reversed(all_ids(base)):
        journal = load(journal_id, base)
        if journal.status not in ("reverted", "restored", "failed") and journal.groups:
            return journal
    return None


def remove_stale_tmp(base: Path | None = None) -> None:
    folder = journal_dir(base)
    if folder.is_dir():
        for p in folder.glob(".*.tmp"):
            try:
                os.unlink(p)
            except OSError:
                pass
