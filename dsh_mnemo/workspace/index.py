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

from .. import paths
from ..errors import DataError
from ..fsutil import atomic_write_text, file_lock
from .identity import bank_for, is_workspace_namespace, namespace_for

INDEX_VERSION = 1


def now_ms() -> int:
    return int(time.time() * 1000)


_TEXT_FIELDS = ("displayName", "canonicalPath", "lastSeenPath")
_OPTIONAL_MS_FIELDS = ("proposedAt", "declinedAt")


def _as_ms(name: str, value: Any) -> int:
    # bool is an int to Python, but never a timestamp.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"entry field {name} is not a number")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"entry field {name} is not a whole number")
    return int(value)


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
    # Fields this version does not know (e.g. `dshWorkspaceId` from the DSH
    # plugin's index), carried through rewrites so that none is lost.
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, raw: Any) -> WorkspaceEntry:
        """Parse one entry, strictly: a wrongly typed field makes the file corrupt.

        Accepting bad types here would only move the crash to whoever reads
        the field later (a `null` path, a string timestamp).
        """
        if not isinstance(raw, dict):
            raise ValueError("entry is not an object")
        known = {f.name for f in fields(cls)} - {"extra"}
        data: dict[str, Any] = {}
        for required in ("identityKey", "namespace"):
            if not isinstance(raw.get(required), str) or not raw[required]:
                raise ValueError(f"entry lacks {required}")
            data[required] = raw[required]
        bank = raw.get("bank")
        if bank is None and is_workspace_namespace(data["namespace"]):
            # Entries written by the DSH plugin predate banks: give them the
            # bank a bind would have minted (their rows stay in the default
            # database until `mnemo migrate` moves them there).
            bank = bank_for(data["namespace"])
        if not isinstance(bank, str) or not bank:
            raise ValueError("entry lacks bank")
        data["bank"] = bank
        for name in _TEXT_FIELDS:
            value = raw.get(name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"entry field {name} is not text")
            data[name] = value or ""
        data["boundAt"] = _as_ms("boundAt", raw["boundAt"]) if raw.get("boundAt") is not None else 0
        for name in _OPTIONAL_MS_FIELDS:
            value = raw.get(name)
            data[name] = None if value is None else _as_ms(name, value)
        superseded = raw.get("supersededBy")
        if superseded is not None and not isinstance(superseded, str):
            raise ValueError("entry field supersededBy is not text")
        data["supersededBy"] = superseded or None
        extra = {k: v for k, v in raw.items() if k not in known}
        return cls(**data, extra=extra)

    def to_json(self) -> dict[str, Any]:
        body = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**self.extra, **body}


def mint_entry(identity_key: str, root: Path, *, namespace: str | None = None,
               bank: str | None = None, bound_at: int | None = None) -> WorkspaceEntry:
    """A new index entry for the workspace at `root`: the only place entries are made.

    The namespace is minted from the identity key (and the bank from the
    namespace) unless the entry takes over existing ones (adopt, rebind).
    `bound_at=0` marks an entry that is not (yet) in the index.
    """
    namespace = namespace or namespace_for(identity_key)
    return WorkspaceEntry(identityKey=identity_key, namespace=namespace,
                          bank=bank or bank_for(namespace), displayName=root.name,
                          canonicalPath=str(root), lastSeenPath=str(root),
                          boundAt=now_ms() if bound_at is None else bound_at)


@dataclass
class DeclinedPath:
    path: str
    declinedAt: int


@dataclass
class IndexData:
    version: int = INDEX_VERSION
    workspaces: list[WorkspaceEntry] = field(default_factory=list)
    declined: list[DeclinedPath] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)  # unknown top-level keys

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

    def register(self, identity_key: str, root: Path) -> WorkspaceEntry:
        """The identity's active entry, last seen at `root` now (minted if new)."""
        entry = self.active_for(identity_key)
        if entry is None:
            entry = mint_entry(identity_key, root)
            self.workspaces.append(entry)
        else:
            entry.lastSeenPath = str(root)
        return entry

    def resolve(self, identity_key: str, root: Path) -> WorkspaceEntry:
        """The identity's active entry, or the one a bind would mint (not added)."""
        return self.active_for(identity_key) or mint_entry(identity_key, root, bound_at=0)

    def to_json(self) -> dict[str, Any]:
        return {**self.extra, "version": self.version,
                "workspaces": [e.to_json() for e in self.workspaces],
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
    # `True == 1` in Python; a boolean or float version is not ours either.
    if type(version) is not int or version != INDEX_VERSION:
        raise ValueError(f"unsupported version {version!r}")
    entries = raw.get("workspaces", [])
    if not isinstance(entries, list):
        raise ValueError("workspaces is not a list")
    declined_raw = raw.get("declined", [])
    if not isinstance(declined_raw, list):
        raise ValueError("declined is not a list")
    declined = []
    for item in declined_raw:
        if not (isinstance(item, dict) and isinstance(item.get("path"), str)):
            raise ValueError("a declined item lacks its path")
        declined.append(DeclinedPath(item["path"], _as_ms("declinedAt", item.get("declinedAt"))))
    extra = {k: v for k, v in raw.items() if k not in ("version", "workspaces", "declined")}
    return IndexData(workspaces=[WorkspaceEntry.from_json(e) for e in entries],
                     declined=declined, extra=extra)


class Index:
    def __init__(self, base: Path | None = None, *, lock_timeout: float = 10.0) -> None:
        self.base = base or paths.data_dir()
        self.path = paths.index_path(self.base)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.lock_timeout = lock_timeout
        self.recovery: Recovery | None = None

    def read(self) -> IndexData | None:
        """Parse the file, read-only; None when it is missing, `IndexCorrupt` when corrupt."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise DataError(f"cannot read {self.path}: {exc.strerror}") from None
        try:
            return _parse(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, TypeError) as exc:
            raise IndexCorrupt(str(exc)) from None
        except RecursionError:
            # json raises this, not ValueError, for absurdly deep nesting.
            raise IndexCorrupt("nested too deeply") from None

    def peek(self) -> IndexData:
        """The index for a read-only caller: a corrupt file is left where it is (and
        reads as empty) instead of being set aside and rebuilt."""
        try:
            return self.read() or IndexData()
        except IndexCorrupt:
            return IndexData()

    def load(self) -> IndexData:
        """The current index; a corrupt file is set aside and an empty one returned."""
        try:
            return self.read() or IndexData()
        except IndexCorrupt:
            # Recovery writes, so it takes the lock and re-checks first.
            with self.transaction() as data:
                return data

    @contextlib.contextmanager
    def transaction(self) -> Iterator[IndexData]:
        with file_lock(self.lock_path, timeout=self.lock_timeout, what="index lock"):
            try:
                data = self.read() or IndexData()
            except IndexCorrupt as exc:
                data = IndexData()
                self._set_aside(str(exc))
            before = json.dumps(data.to_json(), sort_keys=True)
            yield data
            after = json.dumps(data.to_json(), sort_keys=True)
            if after != before or not self.path.exists():
                atomic_write_text(self.path, json.dumps(data.to_json(), indent=2) + "\n")

    def _set_aside(self, reason: str) -> None:
        """Move the corrupt file to a new, never reused name (it is kept, not deleted)."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        base = f"{self.path.name}.corrupt-{stamp}-{now_ms() % 1000:03d}"
        target = self.path.with_name(base)
        counter = 1
        while target.exists():
            target = self.path.with_name(f"{base}-{counter}")
            counter += 1
        self.path.replace(target)
        self.recovery = Recovery(moved_to=str(target), reason=reason)


class IndexCorrupt(Exception):
    """`identity.json` cannot be parsed (its reason is the message)."""
