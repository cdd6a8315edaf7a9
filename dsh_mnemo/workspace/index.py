"""The workspace index, `identity.json`: which identity owns which namespace.

Reads are lock-free (writes are atomic renames).  Every change happens inside
`Index.transaction()`, which holds an inter-process lock, re-reads the file,
lets the caller mutate it, and writes it back atomically, then writes the same
text to `identity.json.last-good`: a second copy of the last index mnemo wrote.

A corrupt file is moved aside (kept, under a name never reused) and the index
is rebuilt at once from the last good copy plus every entry that still parses
in the corrupt one (`salvage`), so that a rebound or adopted workspace, whose
namespace no marker can give back, keeps its memory.  What was restored is
the `Recovery` record, and a *notice* in `notices.json` keeps it visible
until the user has seen it (`mnemo status` shows and acknowledges notices,
`mnemo doctor` reports them).  Whatever could not be restored fills again from
markers as workspaces are seen.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .. import paths
from ..errors import DataError
from ..faults import fault
from ..fsutil import atomic_write_bytes, atomic_write_text, file_lock, try_lock
from ..record import asdict, field, fields, record
from .identity import bank_for, is_workspace_namespace, namespace_for

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any

INDEX_VERSION = 1


def now_ms() -> int:
    return int(time.time() * 1000)


_TEXT_FIELDS = ("displayName", "canonicalPath", "lastSeenPath")
_OPTIONAL_MS_FIELDS = ("proposedAt", "declinedAt")
PREVIOUS_PATHS_KEPT = 8


def _as_ms(name: str, value: Any) -> int:
    # bool is an int to Python, but never a timestamp.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"entry field {name} is not a number")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"entry field {name} is not a whole number")
    return int(value)


@record
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
    # Other directories the marker was seen at before `lastSeenPath`, oldest
    # first (at most PREVIOUS_PATHS_KEPT): a moved project's old place, or a
    # copy that holds the same marker (`listing.shared_markers`).  Written only
    # when there is one.
    previousPaths: list[str] = field(default_factory=list)
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
        previous = raw.get("previousPaths")
        if previous is not None and not (isinstance(previous, list)
                                         and all(isinstance(p, str) for p in previous)):
            raise ValueError("entry field previousPaths is not a list of text")
        data["previousPaths"] = list(previous or [])
        extra = {k: v for k, v in raw.items() if k not in known}
        return cls(**data, extra=extra)

    def add_previous(self, *others: str) -> None:
        """Record `others` (oldest first) as directories this entry's memory was at
        before `lastSeenPath`: each moves to the newest end, the oldest beyond
        PREVIOUS_PATHS_KEPT are dropped, and `lastSeenPath` itself is never one."""
        added = [p for p in dict.fromkeys(others) if p and p != self.lastSeenPath]
        kept = [p for p in self.previousPaths if p not in added and p != self.lastSeenPath]
        self.previousPaths = [*kept, *added][-PREVIOUS_PATHS_KEPT:]

    def see_at(self, root: str) -> None:
        """The marker was seen at `root` now: the place it was last seen before joins
        `previousPaths`."""
        if self.lastSeenPath != root:
            before, self.lastSeenPath = self.lastSeenPath, root
            self.add_previous(before)

    def to_json(self) -> dict[str, Any]:
        body = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        if not self.previousPaths:
            del body["previousPaths"]
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


@record
class DeclinedPath:
    path: str
    declinedAt: int


@record
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
            entry.see_at(str(root))
        return entry

    def predecessors(self, entry: WorkspaceEntry) -> list[WorkspaceEntry]:
        """The superseded entries that resolve to `entry` (it took over their memory
        by rebind or adopt), in index order."""
        return [e for e in self.workspaces if e is not entry and e.supersededBy
                and self.active_for(e.identityKey) is entry]

    def known_paths(self, entry: WorkspaceEntry) -> list[str]:
        """Every directory recorded for `entry`'s memory, its predecessors' first (each
        once): where it was bound, the earlier places, and where it was last seen."""
        found: dict[str, None] = {}
        for item in (*self.predecessors(entry), entry):
            for path in (item.canonicalPath, *item.previousPaths, item.lastSeenPath):
                if path:
                    found[path] = None
        return list(found)

    def resolve(self, identity_key: str, root: Path) -> WorkspaceEntry:
        """The identity's active entry, or the one a bind would mint (not added)."""
        return self.active_for(identity_key) or mint_entry(identity_key, root, bound_at=0)

    def to_json(self) -> dict[str, Any]:
        return {**self.extra, "version": self.version,
                "workspaces": [e.to_json() for e in self.workspaces],
                "declined": [asdict(d) for d in self.declined]}


@record
class Recovery:
    """What happened when the index could not be read, and what was restored."""

    moved_to: str  # where the corrupt file now is
    reason: str  # why it could not be read
    restored_from: list[str] = field(default_factory=list)  # files the entries came from
    workspaces: int = 0  # entries in the rebuilt index
    from_last_good: int = 0  # of which taken from identity.json.last-good
    from_corrupt: int = 0  # of which salvaged from the corrupt file

    def describe(self, index_name: str = paths.INDEX_FILE) -> str:
        """One sentence for people: what was wrong, where it went, what came back."""
        moved = f"The index {index_name} was corrupt ({self.reason}); it was moved to " \
                f"{self.moved_to}"
        if not self.workspaces:
            return (moved + " and nothing in it could be read (and there was no last good "
                    "copy), so it was rebuilt empty: workspaces come back as their markers "
                    "are seen; `mnemo workspaces` lists memories left without a workspace "
                    "(`mnemo adopt` or `mnemo rebind` recovers them).")
        parts = []
        if self.from_last_good:
            parts.append(f"{self.from_last_good} from its last good copy")
        if self.from_corrupt:
            parts.append(f"{self.from_corrupt} salvaged from the corrupt file")
        return (moved + f" and rebuilt with {self.workspaces} workspace entr"
                f"{'y' if self.workspaces == 1 else 'ies'} ({' and '.join(parts)}).")


# ---------------------------------------------------------------------------
# Salvage: entries that still parse in a damaged file

SALVAGE_MAX_BYTES = 8 * 1024 * 1024  # of a damaged file, only this much is scanned
SALVAGE_MAX_MISSES = 2_000  # decodes that yield nothing, per file (bounds hostile input)
SALVAGE_WINDOW = 256 * 1024  # the largest object a single attempt can recover
_OBJECT_START = re.compile(r'\{\s*"')


def salvage_objects(text: str, accept: Callable[[dict[str, Any]], bool], *,
                    max_misses: int = SALVAGE_MAX_MISSES) -> list[dict[str, Any]]:
    """Every JSON object in `text` that decodes on its own and that `accept` takes.

    A truncated or partly overwritten file still holds whole entries; each
    `{"` is tried as the start of one.  An accepted object is skipped past
    (its insides are not searched again); anything else is searched inside.
    Deep nesting, garbage and huge files cost a bounded amount of work: at
    most `max_misses` decodes that yield nothing, each of at most
    `SALVAGE_WINDOW` characters (a fraction of a second in all).
    """
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    position = misses = 0
    text = text[:SALVAGE_MAX_BYTES]
    while misses < max_misses:
        match = _OBJECT_START.search(text, position)
        if match is None:
            break
        start = match.start()
        try:
            # A slice: a decode error's position is computed by counting lines
            # from the start of the string it was given.
            value, length = decoder.raw_decode(text[start:start + SALVAGE_WINDOW])
        except (ValueError, RecursionError):
            misses += 1
            position = start + 1
            continue
        if isinstance(value, dict) and accept(value):
            found.append(value)
            position = start + length
        else:
            misses += 1
            position = start + 1
    return found


def _is_entry(raw: dict[str, Any]) -> bool:
    try:
        WorkspaceEntry.from_json(raw)
    except (ValueError, TypeError, KeyError):
        return False
    return True


def _is_declined(raw: dict[str, Any]) -> bool:
    return (set(raw) == {"path", "declinedAt"} and isinstance(raw["path"], str)
            and type(raw["declinedAt"]) is int)


def salvage(text: str) -> IndexData:
    """The entries and declined paths that still parse in a damaged index text."""
    data = IndexData()
    for raw in salvage_objects(text, lambda o: _is_entry(o) or _is_declined(o)):
        if "identityKey" in raw:
            entry = WorkspaceEntry.from_json(raw)
            if data.by_identity(entry.identityKey) is None:
                data.workspaces.append(entry)
        elif not any(d.path == raw["path"] for d in data.declined):
            data.declined.append(DeclinedPath(raw["path"], raw["declinedAt"]))
    return data


def _decode(raw: bytes) -> IndexData:
    try:
        return _parse(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, TypeError) as exc:
        raise IndexCorrupt(str(exc)) from None
    except RecursionError:
        # json raises this, not ValueError, for absurdly deep nesting.
        raise IndexCorrupt("nested too deeply") from None


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


LAST_GOOD_SUFFIX = ".last-good"


class Index:
    def __init__(self, base: Path | None = None, *, lock_timeout: float = 10.0) -> None:
        self.base = base or paths.data_dir()
        self.path = paths.index_path(self.base)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.last_good_path = self.path.with_name(self.path.name + LAST_GOOD_SUFFIX)
        self.lock_timeout = lock_timeout
        self.recovery: Recovery | None = None

    def _read_bytes(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise DataError(f"cannot read {self.path}: {exc.strerror}") from None

    def read(self) -> IndexData | None:
        """Parse the file, read-only; None when it is missing, `IndexCorrupt` when corrupt."""
        raw = self._read_bytes()
        return None if raw is None else _decode(raw)

    def peek(self) -> IndexData:
        """The index for a read-only caller: a corrupt file is left where it is (and
        reads as what a recovery would restore) instead of being set aside and rebuilt."""
        raw = self._read_bytes()
        if raw is None:
            return IndexData()
        try:
            return _decode(raw)
        except IndexCorrupt:
            return self._rebuild(raw).data

    def load(self) -> IndexData:
        """The current index; a corrupt file is set aside and the index rebuilt."""
        self._sweep_if_unlocked()
        try:
            return self.read() or IndexData()
        except IndexCorrupt:
            # Recovery writes, so it takes the lock and re-checks first.
            with self.transaction() as data:
                return data

    @contextlib.contextmanager
    def transaction(self) -> Iterator[IndexData]:
        with file_lock(self.lock_path, timeout=self.lock_timeout, what="index lock"):
            self._sweep_temporary_files()
            raw = self._read_bytes()
            try:
                data = IndexData() if raw is None else _decode(raw)
            except IndexCorrupt as exc:
                assert raw is not None
                data = self._recover(raw, str(exc))
            before = json.dumps(data.to_json(), sort_keys=True)
            yield data
            after = json.dumps(data.to_json(), sort_keys=True)
            if after != before or not self.path.exists():
                self._write(data)

    def _sweep_if_unlocked(self) -> None:
        """A writer killed mid-write leaves a temporary file that the next transaction
        removes; a caller that then only loads (a command whose work was already
        done) removes it too, when no writer holds the lock at that moment."""
        if not self._temporary_files():
            return
        with contextlib.suppress(OSError):
            fd = try_lock(self.lock_path)
            if fd is not None:
                try:
                    self._sweep_temporary_files()
                finally:
                    os.close(fd)

    def _temporary_files(self) -> list[Path]:
        """The temporary files of the index, its last good copy and the notices
        (one listing of the data dir)."""
        patterns = [f".{name}.*.tmp" for name in
                    (self.path.name, self.last_good_path.name, NOTICES_FILE)]
        try:
            entries = os.listdir(self.path.parent)
        except OSError:
            return []
        return [self.path.parent / entry for entry in entries
                if any(fnmatch.fnmatchcase(entry, pattern) for pattern in patterns)]

    def _sweep_temporary_files(self) -> None:
        """Remove what a writer killed mid-write left (the lock is held).

        The index, its last good copy and the notices are only written under
        this lock, so a temporary file of theirs that exists now is stale.
        """
        for leftover in self._temporary_files():
            with contextlib.suppress(OSError):
                leftover.unlink()

    def _write(self, data: IndexData) -> None:
        """The index, then its last good copy (both atomic); the lock is held."""
        text = json.dumps(data.to_json(), indent=2) + "\n"
        atomic_write_text(self.path, text)
        fault("index-after-write")
        atomic_write_text(self.last_good_path, text)

    def _last_good(self) -> tuple[IndexData | None, bool]:
        """(the last good copy, whether it had to be salvaged); (None, False) if unusable."""
        try:
            raw = self.last_good_path.read_bytes()
        except OSError:
            return None, False
        try:
            return _decode(raw), False
        except IndexCorrupt:
            found = salvage(raw.decode("utf-8", errors="replace"))
            return (found, True) if found.workspaces or found.declined else (None, False)

    def _rebuild(self, corrupt: bytes) -> _Rebuilt:
        """What a corrupt index is replaced with.

        The corrupt file is the newer of the two, so an entry that still parses
        there wins over the last good copy's; the last good copy fills in what
        the damage took.
        """
        data, _ = self._last_good()
        result = _Rebuilt(data or IndexData())
        if data is not None:
            result.from_last_good = len(data.workspaces)
        rescued = salvage(corrupt.decode("utf-8", errors="replace"))
        result.corrupt_used = bool(rescued.workspaces or rescued.declined)
        workspaces = result.data.workspaces
        for entry in rescued.workspaces:
            for i, known in enumerate(workspaces):
                if known.identityKey == entry.identityKey:
                    workspaces[i] = entry
                    break
            else:
                workspaces.append(entry)
                result.from_corrupt += 1
        for item in rescued.declined:
            if not any(d.path == item.path for d in result.data.declined):
                result.data.declined.append(item)
        return result

    def _recover(self, corrupt: bytes, reason: str) -> IndexData:
        """Keep the corrupt file aside, leave a notice, write the rebuilt index (lock held).

        In that order: a kill at any point leaves either the corrupt file in
        place (the next command recovers it again) or the rebuilt index, never
        no index at all (which would read as an empty one).
        """
        rebuilt = self._rebuild(corrupt)
        kept = self._keep_aside(corrupt)
        fault("index-after-set-aside")
        sources = [str(self.last_good_path)] if rebuilt.from_last_good else []
        if rebuilt.corrupt_used:
            sources.append(kept)
        self.recovery = Recovery(moved_to=kept, reason=reason, restored_from=sources,
                                 workspaces=len(rebuilt.data.workspaces),
                                 from_last_good=rebuilt.from_last_good,
                                 from_corrupt=rebuilt.from_corrupt)
        with contextlib.suppress(OSError):
            add_notice(self.base, "index-recovered", self.recovery.describe(self.path.name),
                       details=asdict(self.recovery))
        # Written now, not at the end of the transaction: a caller that fails
        # inside it must not leave the corrupt file in place to be found again.
        self._write(rebuilt.data)
        return rebuilt.data

    def _keep_aside(self, corrupt: bytes) -> str:
        """A copy of the corrupt file under a new, never reused name (kept, not deleted).

        A hard link keeps the very file (its times too); where links are not
        possible, the bytes that were read are written out.
        """
        stamp = time.strftime("%Y%m%dT%H%M%S")
        base = f"{self.path.name}.corrupt-{stamp}-{now_ms() % 1000:03d}"
        counter = 0
        while True:
            target = self.path.with_name(base if not counter else f"{base}-{counter}")
            counter += 1
            try:
                os.link(self.path, target)
                with contextlib.suppress(OSError):
                    os.chmod(target, 0o600)  # private, whoever wrote the damaged file
                return str(target)
            except FileExistsError:
                continue
            except OSError:
                pass
            if os.path.lexists(target):
                continue
            # Whole or not at all: a writer killed here leaves a temporary file that
            # the next one sweeps.  The lock is held: nobody else writes these names.
            atomic_write_bytes(target, corrupt)
            return str(target)


@record
class _Rebuilt:
    data: IndexData
    from_last_good: int = 0
    from_corrupt: int = 0
    corrupt_used: bool = False


class IndexCorrupt(Exception):
    """`identity.json` cannot be parsed (its reason is the message)."""


# ---------------------------------------------------------------------------
# Notices: what the user must hear about even if another process caused it

NOTICES_FILE = "notices.json"
NOTICES_KEPT = 50  # the newest notices kept in the file, seen or not


@record
class Notice:
    id: str
    kind: str  # "index-recovered"
    at: int  # epoch ms
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    seen_at: int | None = None  # epoch ms `mnemo status` showed it; None while pending


def notices_path(base: Path | None = None) -> Path:
    return (base or paths.data_dir()) / NOTICES_FILE


def read_notices(base: Path | None = None) -> list[Notice]:
    """Every notice kept, oldest first; an unreadable file reads as none (never raises)."""
    try:
        raw = json.loads(notices_path(base).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return []
    items = raw.get("notices") if isinstance(raw, dict) else None
    found = []
    for item in items if isinstance(items, list) else []:
        try:
            notice = Notice(**item)
        except TypeError:
            continue
        if isinstance(notice.id, str) and isinstance(notice.message, str):
            found.append(notice)
    return found


def pending_notices(base: Path | None = None) -> list[Notice]:
    """Notices nobody has seen yet (read-only)."""
    return [n for n in read_notices(base) if n.seen_at is None]


def _write_notices(base: Path | None, notices: list[Notice]) -> None:
    body = {"version": 1, "notices": [asdict(n) for n in notices[-NOTICES_KEPT:]]}
    atomic_write_text(notices_path(base), json.dumps(body, indent=2, ensure_ascii=False) + "\n")


def add_notice(base: Path | None, kind: str, message: str, *,
               details: dict[str, Any] | None = None) -> Notice:
    """Record a notice; the caller holds the index lock (every writer of the file does)."""
    notice = Notice(id=f"{now_ms()}-{os.urandom(3).hex()}", kind=kind, at=now_ms(),
                    message=message, details=dict(details or {}))
    _write_notices(base, [*read_notices(base), notice])
    return notice


def acknowledge_notices(index: Index, ids: list[str]) -> None:
    """Mark the notices `ids` seen (they stay in the file, no longer pending)."""
    if not ids:
        return
    with file_lock(index.lock_path, timeout=index.lock_timeout, what="index lock"):
        notices = read_notices(index.base)
        stamp = now_ms()
        for notice in notices:
            if notice.id in ids and notice.seen_at is None:
                notice.seen_at = stamp
        _write_notices(index.base, notices)
