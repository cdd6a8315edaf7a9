"""The pending-turn spool: pairs a prompt with its turn end.

Most harnesses send the user's message only on the prompt event and the
reply only on the turn-end event.  The prompt hook records the message as
the session's pending turn; turn-end stores it.  A turn whose turn-end never
came is stored by the session's next prompt or by session-end.

One small JSON file per (harness, session) in `<data dir>/spool/`, changed
only under a `flock` and replaced atomically (synced first).  A damaged file
is set aside as `*.corrupt-*` and logged; the turns that still parse in it
are kept.  "Never twice": a turn is *claimed* (with the claimer's pid)
before it is written to the database and removed after; a claim left by a
process that died mid-write (or that ran out of time) is picked up again as
`stale`, and the caller checks the database before storing it.  "Never
lost": a claimed turn leaves the spool only when its claimer stored it.  The
spool is bounded (`MAX_PENDING` turns, `MAX_BYTES` of text per session):
past that the oldest turns nobody is storing are dropped, and the caller
logs how many — the one way a turn can be lost, and never silently.

A spool opened for a request its client may give up on (the resident
server's, `until`) refuses to record a prompt or a turn end once that time
has passed: the client has answered through its own in-process path by
then, which records the event itself, and may already have stored it — a
request that stalled in the server must not spool it again.  The check is
made under the lock, so either the server records the event before the
client gives up (and the fallback finds it pending: one turn) or not at all.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..fsutil import atomic_write_bytes, sha256_hex
from ..record import field, record

SPOOL_VERSION = 1
# A session whose turns cannot be stored (a database locked for hours) keeps
# them here up to these bounds; a session that never ends cannot grow it forever.
MAX_PENDING = 2000
MAX_BYTES = 8 * 1024 * 1024
STALE_CLAIM_MS = 120_000
LOCK_TIMEOUT = 1.0
FORGET_AFTER_MS = 14 * 86_400_000  # leftovers of sessions silent this long are swept
ABANDONED_AFTER_MS = 6 * 3_600_000  # a session silent this long will not end its turn
# An ended session has no next hook: a turn its end could not store (a busy bank)
# is taken up by another session's hook once the spool has been this quiet.
ENDED_AFTER_MS = STALE_CLAIM_MS


RECENT = 16
PLACES = 8  # the places of the session's prompts kept (`SpoolState.places`)


def digest(text: str) -> str:
    return sha256_hex(text.encode("utf-8", "replace"))[:20]


def now_ms() -> int:
    return int(time.time() * 1000)


@record
class Turn:
    id: str
    text: str
    cwd: str | None
    session_id: str | None
    at: int
    claim_pid: int | None = None
    claim_at: int | None = None
    # The assistant's reply that ended the turn (already cleaned), spooled by the
    # turn end before it answers the harness, so storing it later cannot lose it.
    reply: str | None = None
    stale: bool = False  # set in memory only: a dead claimer may have stored it already
    # The identity key of the workspace the prompt was typed in (None: unbound, or not
    # resolved), so that a turn whose directory is gone by the time it is stored (the
    # repository moved or renamed mid-session, a removed worktree) still reaches it.
    workspace: str | None = None

    @classmethod
    def from_json(cls, raw: object) -> Turn | None:
        if not isinstance(raw, dict):
            return None
        try:
            reply = raw.get("reply")
            workspace = raw.get("workspace")
            return cls(id=str(raw["id"]), text=str(raw["text"]), cwd=raw.get("cwd"),
                       session_id=raw.get("session_id"), at=int(raw.get("at") or 0),
                       claim_pid=raw.get("claim_pid"), claim_at=raw.get("claim_at"),
                       reply=reply if isinstance(reply, str) else None,
                       workspace=workspace if isinstance(workspace, str) else None)
        except (KeyError, TypeError, ValueError):
            return None

    def to_json(self) -> dict[str, object]:
        # Spelled out, not `asdict` (a deep copy per field): every turn end of a
        # session rewrites its spool, on the path the harness waits for.
        data: dict[str, object] = {"id": self.id, "text": self.text, "cwd": self.cwd,
                                   "session_id": self.session_id, "at": self.at,
                                   "claim_pid": self.claim_pid, "claim_at": self.claim_at}
        if self.reply is not None:
            data["reply"] = self.reply
        if self.workspace is not None:
            data["workspace"] = self.workspace
        return data

    @property
    def size(self) -> int:
        return len(self.text) + len(self.reply or "")


def reply_digest(text: str) -> str:
    return digest("\0reply\0" + text)


@record
class SpoolState:
    turns: list[Turn] = field(default_factory=list)
    captured: int = 0
    targets: list[list[str]] = field(default_factory=list)  # [bank, namespace] written to
    updated: int = 0
    recent: list[str] = field(default_factory=list)  # digests of the last turns stored
    hinted: bool = False  # the bind hint was shown in this session
    ended: bool = False  # the session ended while a worker was still storing its turns
    standing: bool = False  # the standing memories were given to the model this session
    # The ids of the standing memories that block held (the budget may cut some);
    # None: not recorded (a spool from before), so all of them count as given.
    standing_given: list[str] | None = None
    # The namespaces ("" unbound) whose standing block the session was given: a session
    # that moves to another repository gets that one's block there too.
    standing_for: list[str] = field(default_factory=list)
    # [directory, identity key] of the session's last prompt typed in a bound
    # workspace: a prompt typed there after the directory was deleted still has
    # a workspace to go to.
    place: list[str] = field(default_factory=list)
    # Where the session's prompts were typed (identity keys, or directories when
    # unbound; the last PLACES): a turn that ends anywhere else ended there because
    # the agent moved during the turn, and its reply goes with the prompt.
    places: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "version": SPOOL_VERSION, "turns": [t.to_json() for t in self.turns],
            "captured": self.captured, "targets": self.targets, "updated": self.updated,
            "recent": self.recent, "hinted": self.hinted, "ended": self.ended,
            "standing": self.standing}
        if self.standing_given is not None:
            out["standing_given"] = self.standing_given
        if self.standing_for:
            out["standing_for"] = self.standing_for
        if self.place:
            out["place"] = self.place
        if self.places:
            out["places"] = self.places
        return out

    def reset(self) -> None:
        """Forget the session's counts, never a turn (the callers reset a spool with
        none left).  `hinted` and `standing` stay: a session can be resumed after it
        ended (`codex exec resume`), and its context already holds the hint and the
        standing block."""
        self.captured, self.targets, self.recent = 0, [], []
        self.ended = False


class GaveUp(Exception):
    """The client of this request gave up waiting; its fallback records the event."""


def _pid_alive(pid: int) -> bool:
    """Is `pid` a running process?  A zombie is not: it died, and nobody reaped it yet
    (a killed server or worker is an orphan whose reaper may take its time)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except FileNotFoundError:
        return False
    except (OSError, IndexError):
        pass  # no /proc here: ask the kernel
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


class Spool:
    # Epoch seconds after which this process must not record a new prompt or turn
    # end (a server request its client gave up on); None: no such limit.
    until: float | None = None

    def __init__(self, base: Path, harness: str, session_id: str | None, cwd: str | None,
                 *, until: float | None = None):
        # Without a session id, turns pair by directory: the best key left.
        who = session_id if session_id else f"cwd:{cwd or ''}"
        digest = sha256_hex(f"{harness}\0{who}".encode("utf-8", "replace"))
        self.harness = harness
        self.dir = base / "spool"
        self.path = self.dir / f"{digest[:40]}.json"
        self.lock_path = self.dir / f"{digest[:40]}.lock"
        self.until = until

    def _still_wanted(self) -> None:
        """Under the lock, before an event is recorded: raise GaveUp past `until`."""
        if self.until is not None and time.time() > self.until:
            raise GaveUp(f"the client gave up {time.time() - self.until:.1f}s ago")

    @classmethod
    def at(cls, path: Path) -> Spool:
        """The spool stored in `path` (for recovering other sessions' turns)."""
        spool = cls.__new__(cls)
        spool.harness = "-"
        spool.dir = path.parent
        spool.path = path
        spool.lock_path = path.with_suffix(".lock")
        return spool

    def _load(self, *, repair: bool = False) -> SpoolState:
        """The spool's state.  A damaged file gives the turns that still parse in
        it; with `repair` (under the lock) it is also set aside as `*.corrupt-*`,
        logged, and the spool rewritten with those turns."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return SpoolState()
        except OSError as exc:
            return self._damaged(None, f"{type(exc).__name__}: {exc.strerror}", repair)
        try:
            raw = json.loads(data.decode("utf-8"))
        except ValueError as exc:  # not UTF-8, or not JSON: a torn or damaged write
            return self._damaged(data.decode("utf-8", "replace"), str(exc)[:120], repair)
        if not isinstance(raw, dict):
            return self._damaged(None, f"a JSON {type(raw).__name__}, not an object", repair)
        turns = [t for t in (Turn.from_json(x) for x in raw.get("turns") or []) if t]
        targets = [list(map(str, t)) for t in raw.get("targets") or []
                   if isinstance(t, list) and len(t) == 2]
        captured = raw.get("captured")
        recent = [str(d) for d in raw.get("recent") or [] if isinstance(d, str)]
        given = raw.get("standing_given")
        given_for = raw.get("standing_for")
        place = raw.get("place")
        places = raw.get("places")
        return SpoolState(turns=turns, captured=captured if isinstance(captured, int) else 0,
                          targets=targets, updated=int(raw.get("updated") or 0),
                          recent=recent[-RECENT:], hinted=raw.get("hinted") is True,
                          ended=raw.get("ended") is True,
                          standing=raw.get("standing") is True,
                          standing_given=[str(i) for i in given if isinstance(i, str)]
                          if isinstance(given, list) else None,
                          standing_for=[str(i) for i in given_for if isinstance(i, str)]
                          if isinstance(given_for, list) else [],
                          place=[str(i) for i in place] if isinstance(place, list)
                          and len(place) == 2 and all(isinstance(i, str) for i in place)
                          else [],
                          places=[str(i) for i in places if isinstance(i, str)][-PLACES:]
                          if isinstance(places, list) else [])

    def _damaged(self, text: str | None, reason: str, repair: bool) -> SpoolState:
        """What a damaged spool still holds: its turns that parse, nothing else."""
        state = SpoolState(turns=_salvage(text) if text else [])
        if not repair:
            return state
        from . import log

        aside: Path | None = self.path.with_suffix(f".corrupt-{now_ms()}-{os.urandom(3).hex()}")
        failure = None
        try:
            os.replace(self.path, aside)
        except OSError as exc:
            aside, failure = None, exc.strerror
        # Not trusted, not silently dropped: the file is kept and the log says so.
        log.write(f"damaged spool {self.path} ({reason}): "
                  + (f"set aside as {aside.name}" if aside is not None
                     else f"cannot set it aside ({failure})")
                  + f"; {len(state.turns)} pending turn(s) recovered from it",
                  harness=self.harness, event="spool", level="error", base=self.dir.parent)
        if aside is not None:
            self._save(state)
        return state

    def _save(self, state: SpoolState) -> None:
        if not state.turns and not state.captured and not state.hinted and not state.standing:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            return
        state.updated = now_ms()
        # Synced before and after the rename: a crash never leaves the spool torn.
        atomic_write_bytes(self.path, json.dumps(state.to_json(), ensure_ascii=False).encode())

    @contextlib.contextmanager
    def locked(self) -> Iterator[SpoolState]:
        from ..fsutil import file_lock

        self.dir.mkdir(parents=True, exist_ok=True)
        with file_lock(self.lock_path, timeout=LOCK_TIMEOUT, what="hook spool lock"):
            state = self._load(repair=True)
            before = json.dumps(state.to_json(), sort_keys=True)
            yield state
            if json.dumps(state.to_json(), sort_keys=True) != before:
                self._save(state)

    def _claim_open_turns(self, state: SpoolState, *, exclude: str | None = None) -> list[Turn]:
        """Claim every turn nobody is storing (and those whose claimer died)."""
        now, pid = now_ms(), os.getpid()
        claimed: list[Turn] = []
        for turn in state.turns:
            if turn.id == exclude:
                continue
            stale = False
            if turn.claim_pid is not None:
                alive = _pid_alive(int(turn.claim_pid))
                if alive and now - int(turn.claim_at or 0) < STALE_CLAIM_MS:
                    continue  # another hook is storing it right now
                stale = True
            turn.claim_pid, turn.claim_at, turn.stale = pid, now, stale
            claimed.append(turn)
        return claimed

    def add_prompt(self, text: str, cwd: str | None, session_id: str | None,
                   workspace: str | None = None) -> tuple[list[Turn], int]:
        """Record `text` as the pending turn (typed in the workspace `workspace`).

        Returns the older turns now to be stored (claimed for this process)
        and how many of the oldest unclaimed turns the bounds dropped (0 but
        for a spool that cannot be emptied for a long time).
        """
        with self.locked() as state:
            self._still_wanted()
            open_turns = [t for t in state.turns if t.claim_pid is None]
            if open_turns and open_turns[-1].text == text:
                # The same prompt again (Qwen continuations, a retried hook): one turn.
                return self._claim_open_turns(state, exclude=open_turns[-1].id), 0
            dropped = _enforce_bounds(state, incoming=len(text))
            to_store = self._claim_open_turns(state)
            state.ended = False  # a new prompt: the session goes on (resumed)
            state.turns.append(Turn(id=os.urandom(8).hex(), text=text, cwd=cwd,
                                    session_id=session_id, at=now_ms(), workspace=workspace))
            if cwd and workspace:
                state.place = [cwd, workspace]
            typed = workspace or (os.path.normpath(cwd) if cwd else None)
            if typed:
                state.places = [p for p in state.places if p != typed][-(PLACES - 1):] + [typed]
            return to_store, dropped

    def workspace_at(self, cwd: str) -> str | None:
        """The identity key of the workspace the session's last prompt was typed in,
        if that was in `cwd` or a directory above it (`cwd` is gone now: a prompt
        typed there still belongs to that workspace)."""
        place = self._load().place
        if not place:
            return None
        typed, here = os.path.normpath(place[0]), os.path.normpath(cwd)
        inside = here == typed or here.startswith(typed.rstrip(os.sep) + os.sep)
        return place[1] if inside else None

    def mark_standing(self, *, where: str = "", force: bool = False) -> bool:
        """Note that the standing block of the workspace `where` (its namespace) goes to
        the model now; False if it already did this session (`force`: the context was
        compacted away, give it again; every other workspace's block is gone too)."""
        with self.locked() as state:
            # A spool from before recorded no workspace: its block counts for all.
            given = not state.standing_for or where in state.standing_for
            if state.standing and given and not force:
                return False
            if force or not state.standing:
                state.standing_for, state.standing_given = [], None
            state.standing = True
            state.standing_for.append(where)
            return True

    def note_standing_given(self, ids: list[str]) -> None:
        """Record which standing memories the session's block held (added to those
        of the blocks it had in other workspaces)."""
        with self.locked() as state:
            before = state.standing_given or []
            state.standing_given = before + [i for i in ids if i not in before]

    def standing_given(self) -> frozenset[str] | None:
        """The standing memories this session's block gave the model: an empty set
        when no block was given, None when one was but its contents were not
        recorded (then every standing memory counts as given)."""
        state = self._load()
        if not state.standing:
            return frozenset()
        return None if state.standing_given is None else frozenset(state.standing_given)

    def mark_hinted(self) -> bool:
        """Note that the bind hint was shown; False if it already was this session."""
        with self.locked() as state:
            if state.hinted:
                return False
            state.hinted = True
            return True

    def take_all(self) -> list[Turn]:
        """Claim every pending turn (turn-end, session-end)."""
        with self.locked() as state:
            return self._claim_open_turns(state)

    def take(self, ids: set[str]) -> list[Turn]:
        """Claim the open turns among `ids` (a retry of turns a busy database sent back)."""
        return self._take_where(lambda t: t.id in ids and t.claim_pid is None)

    def take_stale(self) -> list[Turn]:
        """Claim only the turns whose claimer died (a pending prompt waits for its turn end)."""
        return self._take_where(lambda t: t.claim_pid is not None
                                and not _pid_alive(int(t.claim_pid)))

    def _take_where(self, wanted: Callable[[Turn], bool]) -> list[Turn]:
        """Claim, for this process and marked for a duplicate check, the turns `wanted`."""
        with self.locked() as state:
            now, pid = now_ms(), os.getpid()
            taken = [t for t in state.turns if wanted(t)]
            for turn in taken:
                turn.claim_pid, turn.claim_at, turn.stale = pid, now, True
            return taken

    def end_turn(self, user: str | None, reply: str | None, cwd: str | None,
                 session_id: str | None, *, where: str | None = None,
                 workspace: str | None = None) -> tuple[list[Turn], int]:
        """Record how the turn ended, then claim every pending turn.

        `user` is the user's message when the turn-end event carries it (a
        prompt hook may not have spooled it), `reply` the assistant's answer:
        both are on disk before the caller answers the harness, so whatever
        happens to the process that stores them, the next hook finds them.
        A message or reply already pending, claimed or recently stored (the
        same turn end twice, a retry after a server died mid-request) is not
        added again.  The reply goes with the last open turn typed where the
        turn ended (in `where`, the directory the event named, `cwd` if not
        given, or in `workspace`, the identity key of `cwd`'s workspace),
        never with one typed in another place the session typed prompts in: a
        session id used in two repositories must not carry one's reply into
        the other.  A turn that ends where the session never typed a prompt
        ended there because the agent moved during it: its reply goes with the
        last open turn.  Returns the claimed turns and how many old unclaimed
        ones the bounds dropped.
        """
        where = cwd if where is None else where
        with self.locked() as state:
            self._still_wanted()
            dropped = 0
            if (user and not any(t.text == user for t in state.turns)
                    and digest(user) not in state.recent):
                dropped += _enforce_bounds(state, incoming=len(user))
                state.turns.append(Turn(id=os.urandom(8).hex(), text=user, cwd=cwd,
                                        session_id=session_id, at=now_ms(),
                                        workspace=workspace))
            if (reply and not any(t.reply == reply for t in state.turns)
                    and reply_digest(reply) not in state.recent):
                waiting = [t for t in state.turns if t.claim_pid is None]
                open_turns = _typed_at(waiting, where, workspace)
                if not open_turns and waiting and state.places and not (
                        workspace in state.places
                        or (where and os.path.normpath(where) in state.places)):
                    # No prompt of the session was typed where the turn ended: the
                    # agent moved (cd) during the turn, and this is the reply to the
                    # last prompt, stored with it where it was typed.
                    open_turns = waiting
                if open_turns and open_turns[-1].reply is None:
                    open_turns[-1].reply = reply
                elif cwd:
                    dropped += _enforce_bounds(state, incoming=len(reply))
                    state.turns.append(Turn(id=os.urandom(8).hex(), text="", cwd=cwd,
                                            session_id=session_id, at=now_ms(), reply=reply,
                                            workspace=workspace))
            return self._claim_open_turns(state), dropped

    def finish(self, stored: list[Turn], targets: list[tuple[str, str]],
               failed: list[Turn] | None = None) -> None:
        """Drop stored turns, count them, and release the claims of failed ones."""
        done = {t.id for t in stored}
        retry = {t.id for t in failed or []}
        with self.locked() as state:
            kept = []
            for turn in state.turns:
                if turn.id in done and turn.claim_pid == os.getpid():
                    continue
                if turn.id in retry and turn.claim_pid == os.getpid():
                    turn.claim_pid = turn.claim_at = None
                kept.append(turn)
            state.turns = kept
            state.captured += len(done)
            state.recent = (state.recent + [digest(t.text) for t in stored if t.text]
                            + [reply_digest(t.reply) for t in stored if t.reply])[-RECENT:]
            for bank, namespace in targets:
                if [bank, namespace] not in state.targets:
                    state.targets.append([bank, namespace])
            if state.ended and not state.turns:
                state.reset()  # the last worker of an ended session closes its spool

    def recently_stored(self, text: str) -> bool:
        """Was this text one of the session's last stored turns? (a repeated turn-end)"""
        return digest(text) in self._load().recent

    def end_session(self) -> SpoolState:
        """The session's final state; the spool file is removed if nothing is left.

        Only turns already stored have left the spool: a turn still pending
        stays for a later hook, whether a worker is storing it, the database
        sent it back, or it was spooled since (the session goes on, resumed).
        """
        with self.locked() as state:
            final = SpoolState(turns=list(state.turns), captured=state.captured,
                               targets=[list(t) for t in state.targets])
            if state.turns:
                # The last worker to store the session's turns closes the spool.
                state.ended = True
            else:
                state.reset()
        return final


def _salvage(text: str) -> list[Turn]:
    """The turns of a damaged spool's text that still parse: each whole object of
    its `turns` list, up to the first that does not (a torn write cuts the end)."""
    start = text.find("[", text.find('"turns"') + 1) if '"turns"' in text else -1
    if start < 0:
        return []
    decoder = json.JSONDecoder()
    turns: list[Turn] = []
    at = start + 1
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        if at >= len(text) or text[at] != "{":
            return turns
        try:
            raw, at = decoder.raw_decode(text, at)
        except ValueError:
            return turns
        turn = Turn.from_json(raw)
        if turn is not None:
            turns.append(turn)


def _typed_at(turns: list[Turn], where: str | None, workspace: str | None) -> list[Turn]:
    """The turns typed in the directory `where` or in the workspace `workspace`.

    Nothing known of where the turn ended: the turns, if they were all typed in
    one place (no other repository they could belong to), else none."""
    if not where and workspace is None:
        return turns if len({t.workspace or t.cwd for t in turns}) <= 1 else []
    place = os.path.normpath(where) if where else None
    return [t for t in turns
            if (workspace is not None and t.workspace == workspace)
            or (place is not None and t.cwd is not None and os.path.normpath(t.cwd) == place)]


def _enforce_bounds(state: SpoolState, *, incoming: int) -> int:
    """Drop the oldest turns nobody is storing until one more fits; how many went.

    Claimed turns are never dropped: their claimer may be writing them now,
    or has died and they will be stored again (stale claims).
    """
    dropped = 0
    size = sum(t.size for t in state.turns) + incoming
    while len(state.turns) + 1 > MAX_PENDING or size > MAX_BYTES:
        oldest = next((t for t in state.turns if t.claim_pid is None), None)
        if oldest is None:
            break
        state.turns.remove(oldest)
        size -= oldest.size
        dropped += 1
    return dropped


def stale_claims(base: Path) -> list[Spool]:
    """Spools holding turns claimed by a process that died (a killed worker or server).

    The resident server replays them when it starts; any hook of the session
    would pick them up too, but a session that said its last word would not.
    """
    folder = base / "spool"
    if not folder.is_dir():
        return []
    found: list[Spool] = []
    for path in sorted(folder.glob("*.json")):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            claims = {t.get("claim_pid") for t in raw.get("turns") or []
                      if isinstance(t, dict) and isinstance(t.get("claim_pid"), int)}
        except (OSError, ValueError, AttributeError):
            continue
        if any(not _pid_alive(pid) for pid in claims):
            found.append(Spool.at(path))
    return found


def _pending(path: Path) -> tuple[bool, bool]:
    """(the spool holds turns, its session ended); a damaged spool may hold some
    (the hook that takes them up salvages what still parses)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return bool(raw.get("turns")), raw.get("ended") is True
    except (ValueError, AttributeError):
        return True, False
    except OSError:
        return False, False


def _has_turns(path: Path) -> bool:
    return _pending(path)[0]


def abandoned_spools(base: Path, *, exclude: Path | None = None, limit: int = 3,
                     silent_ms: int = ABANDONED_AFTER_MS) -> list[Spool]:
    """Spools that still hold turns of a session silent for `silent_ms`, or of one
    that ended and has been quiet for ENDED_AFTER_MS."""
    folder = base / "spool"
    if not folder.is_dir():
        return []
    now = time.time()
    found: list[Spool] = []
    for path in sorted(folder.glob("*.json")):
        if path == exclude:
            continue
        try:
            quiet = now - path.stat().st_mtime
            if quiet <= min(silent_ms, ENDED_AFTER_MS) / 1000:
                continue
            turns, ended = _pending(path)
            if not turns or (quiet <= silent_ms / 1000 and not ended):
                continue
        except OSError:
            continue
        found.append(Spool.at(path))
        if len(found) >= limit:
            break
    return found


def sweep(base: Path, *, older_than_ms: int = FORGET_AFTER_MS) -> int:
    """Remove what sessions silent for `older_than_ms` left: empty spools, lock files."""
    removed = 0
    folder = base / "spool"
    if not folder.is_dir():
        return 0
    horizon = time.time() - older_than_ms / 1000
    for child in folder.iterdir():
        with contextlib.suppress(OSError):
            if child.stat().st_mtime >= horizon:
                continue
            if child.suffix == ".json" and not _has_turns(child):
                child.unlink()  # only a count of captured turns was left
                removed += 1
            elif child.suffix == ".lock" and _remove_idle_lock(child):
                removed += 1
    return removed


def _remove_idle_lock(path: Path) -> bool:
    """Remove a session's lock file that no spool goes with, only while nobody holds
    it (a hook that opened it meanwhile takes its lock again on the new file:
    `fsutil.file_lock`)."""
    from ..fsutil import release_lock, try_lock

    fd = try_lock(path)
    if fd is None:
        return False  # a hook of that session is at work
    try:
        if path.with_suffix(".json").exists():
            return False
        path.unlink()
        return True
    finally:
        release_lock(fd)
