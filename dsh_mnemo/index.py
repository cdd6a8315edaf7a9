"""The workspace index, `identity.json`: which identity owns which namespace.

Reads are lock-free (writes are atomic renames).  Every change happens inside
`Index.transaction()`, which holds an inter-process lock, re-reads the file,
lets the caller mutate it, and writes it back atomically.  A corrupt file is
moved aside (kept), reported, and replaced by an empty index that fills again
from markers as workspaces are seen.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from . import paths
from .errors import DataError
from .fsutil import atomic_write_text, file_lock

INDEX_VERSION = 1


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class WorkspaceEntry:
    identityKey: str
    namespace: str
    bank: str
    displayName: str = ""
    canonicalPath: str = ""
    lastSeenPath: str = ""
    boundAt: int = 0
    proposedAt: int | None = None
    declinedAt: int | None = None
    supersededBy: str | None = None

    @classmethod
    def from_json(cls, raw: Any) -> WorkspaceEntry:
        if not isinstance(raw, dict):
            raise ValueError("entry is not an object")
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in raw.items() if k in known}
        for required in ("identityKey", "namespace", "bank"):
            if not isinstance(data.get(required), str) or not data[required]:
                raise ValueError(f"entry lacks {required}")
        return cls(**data)


@dataclass
class DeclinedPath:
    path: str
    declinedAt: int


@dataclass
class IndexData:
    version: int = INDEX_VERSION
    workspaces: list[WorkspaceEntry] = field(default_factory=list)
    declined: list[DeclinedPath] = field(default_factory=list)

    def by_identity(self, identity_key: str) -> WorkspaceEntry | None:
        return next((e for e in self.workspaces if e.identityKey == identity_key), None)

    def by_namespace(self, namespace: str) -> list[WorkspaceEntry]:
        return [e for e in self.workspaces if e.namespace == namespace]

    def active_for(self, identity_key: str) -> WorkspaceEntry | None:
        """The entry an identity resolves to, following `supersededBy` links."""
        entry = self.by_identity(identity_key)
        seen: set[str] = set()
        while entry is not None and entry.supersededBy and entry.identityKey not in seen:
            seen.add(entry.identityKey)
            successor = self.by_identity(entry.supersededBy)
            if successor is None:
                break
            entry = successor
        return entry

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version,
                "workspaces": [asdict(e) for e in self.workspaces],
                "declined": [asdict(d) for d in self.declined]}


@dataclass
class Recovery:
    """What happened when the index could not be read."""

    moved_to: str
    reason: str


def _parse(text: str) -> IndexData:
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError("top level is not an object")
    version = raw.get("version")
    if version != INDEX_VERSION:
        raise ValueError(f"unsupported version {version!r}")
    entries = raw.get("workspaces", [])
    if not isinstance(entries, list):
        raise ValueError("workspaces is not a list")
    declined_raw = raw.get("declined", [])
    if not isinstance(declined_raw, list):
        raise ValueError("declined is not a list")
    declined = []
    for item in declined_raw:
        if (isinstance(item, dict) and isinstance(item.get("path"), str)
                and isinstance(item.get("declinedAt"), int)):
            declined.append(DeclinedPath(item["path"], item["declinedAt"]))
    return IndexData(workspaces=[WorkspaceEntry.from_json(e) for e in entries],
                     declined=declined)


class Index:
    def __init__(self, base: Path | None = None, *, lock_timeout: float = 10.0) -> None:
        self.base = base or paths.data_dir()
        self.path = paths.index_path(self.base)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.lock_timeout = lock_timeout
        self.recovery: Recovery | None = None

    def _read(self) -> IndexData | None:
        """Parse the file; None when it is missing, raise ValueError when corrupt."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise DataError(f"cannot read {self.path}: {exc.strerror}") from None
        try:
            return _parse(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, TypeError) as exc:
            raise _Corrupt(str(exc)) from None

    def load(self) -> IndexData:
        """The current index; a corrupt file is set aside and an empty one returned."""
        try:
            return self._read() or IndexData()
        except _Corrupt:
            # Recovery writes, so it takes the lock and re-checks first.
            with self.transaction() as data:
                return data

    @contextlib.contextmanager
    def transaction(self) -> Iterator[IndexData]:
        with file_lock(self.lock_path, timeout=self.lock_timeout, what="index lock"):
            try:
                data = self._read() or IndexData()
            except _Corrupt as exc:
                data = IndexData()
                self._set_aside(str(exc))
            before = json.dumps(data.to_json(), sort_keys=True)
            yield data
            after = json.dumps(data.to_json(), sort_keys=True)
            if after != before or not self.path.exists():
                atomic_write_text(self.path, json.dumps(data.to_json(), indent=2) + "\n")

    def _set_aside(self, reason: str) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{now_ms() % 1000:03d}")
        self.path.replace(target)
        self.recovery = Recovery(moved_to=str(target), reason=reason)


class _Corrupt(Exception):
    pass
