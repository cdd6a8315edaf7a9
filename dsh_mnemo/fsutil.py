"""Small filesystem primitives: atomic writes, inter-process locks, private modes.

Everything mnemo keeps is private to the user who runs it: files 0600,
directories 0700 (docs/privacy.md).  `secure_process` sets the process umask
so that whatever a process creates (SQLite's databases, WAL and journal
files included) is private, and makes an existing data dir private once: the
CLI, the hook and the server call it first.  A program that uses the library
itself keeps its own umask; `private_files` makes mnemo's calls private
there, for their duration only.  The primitives here do not rely on the
umask: their files are 0600, and the directories they create 0700.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from . import paths
from .errors import BusyError

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any, BinaryIO

PRIVATE_UMASK = 0o077  # new files 0600 (0700 if executable), new directories 0700
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def make_dirs(folder: Path, *, private: bool = True) -> None:
    """Create `folder` and any missing parent, each 0700 when `private`.

    `Path.mkdir(mode=..., parents=True)` gives its mode to the last directory
    only, the parents it creates get the umask's (0755 under the usual 022):
    a new data dir would be listable by everyone.  Directories that exist are
    left as they are."""
    if folder.is_dir():
        return
    if not private:
        folder.mkdir(parents=True, exist_ok=True)
        return
    missing: list[Path] = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            each.mkdir(mode=PRIVATE_DIR)


def atomic_write_text(path: Path, text: str, *, mode: int = PRIVATE_FILE) -> None:
    """Write `text` to `path` so readers see the old or the new file, never half.

    A missing directory is created 0700 for a private file (`mode` without
    group or other bits), as the umask would for any other file."""
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = PRIVATE_FILE,
                       sync: bool = True) -> None:
    """`atomic_write_text` of bytes: written to a temporary file of its own in the
    same folder and synced, renamed over `path`, the rename synced (a crash or a
    power loss leaves the old file or the new one, never a torn one).

    `sync=False` leaves out both syncs, for a file whose loss in a power cut costs
    nothing (a time stamp): readers still see the old file or the new one whole."""
    make_dirs(path.parent, private=not (mode & 0o077))
    tmp = _written_aside(path, data, mode, sync)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync:
        sync_dir(path.parent)


def atomic_create_bytes(path: Path, data: bytes, *, mode: int = PRIVATE_FILE) -> None:
    """A new file at `path`, whole or not at all, never written over another.

    Written aside and synced as `atomic_write_bytes` does, then hard-linked into
    place: FileExistsError if anything is at `path` already (a symlink too, even
    a dangling one), so of two writers racing for one name exactly one wins.
    The folder must exist (FileNotFoundError), and allow hard links."""
    tmp = _written_aside(path, data, mode, True)
    try:
        os.link(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    sync_dir(path.parent)


def _written_aside(path: Path, data: bytes, mode: int, sync: bool) -> str:
    """`data` in a new temporary file beside `path` (a name no other writer uses,
    `.NAME.PID.RANDOM.tmp`), with `mode`, synced unless told not to; its path."""
    tmp = str(path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def sync_dir(folder: Path) -> None:
    """fsync `folder`, so that a rename in it survives a crash (best effort)."""
    with contextlib.suppress(OSError):
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def fnv64(data: bytes) -> int:
    """64-bit FNV-1a of `data`: a stable key for a cache, without importing
    hashlib (its OpenSSL start-up is about 2 ms of a hook process)."""
    value = 0xCBF29CE484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def sha256_hex(data: bytes) -> str:
    """SHA-256 of `data` in hex, from the standard library's built-in implementation
    where there is one: `hashlib` loads OpenSSL first (about 3 ms of a new hook
    process), and a hook hashes a few short strings (bank names, spool keys)."""
    global _sha256_of
    if _sha256_of is None:
        _sha256_of = _sha256_factory()
    return str(_sha256_of(data).hexdigest())


def _sha256_factory() -> Callable[[bytes], Any]:
    for module in ("_sha2", "_sha256"):  # CPython 3.12+, then 3.10-3.11
        try:
            return __import__(module).sha256  # type: ignore[no-any-return]
        except (ImportError, AttributeError):
            continue
    from hashlib import sha256

    return sha256


_sha256_of: Callable[[bytes], Any] | None = None


def write_cache_file(path: Path, data: bytes | Callable[[BinaryIO], None]) -> None:
    """Replace `path` with `data`, 0600, without an fsync: for a cache, whose
    reader checks what it reads (a crash may leave the old file, or none).

    `data` is the bytes, or a function that writes them to the open file (a
    large matrix, written without a copy of it).  The file is written whole
    under a temporary name (`.NAME.PID.THREAD.tmp`), then renamed."""
    make_dirs(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
        with os.fdopen(fd, "wb") as handle:
            if callable(data):
                data(handle)
            else:
                handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json_cache(path: Path, identity: dict[str, Any], *,
                    limit: int = 1 << 22) -> dict[str, Any] | None:
    """The JSON object a `keep_json_cache` left in `path`, if each of `identity`'s
    fields (a format version, the key of what it was derived from) is the same;
    else None: no file, a damaged one, or one of something else."""
    import json

    try:
        with open(path, "rb") as handle:
            kept = json.loads(handle.read(limit))
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or any(kept.get(k) != v for k, v in identity.items()):
        return None
    return kept


def keep_json_cache(path: Path, document: dict[str, Any]) -> bool:
    """Write `document` to `path` as a cache (`write_cache_file`) if JSON gives it
    back exactly (not a date, a set or a number as a key); whether it was written."""
    import json

    try:
        text = json.dumps(document)
        if json.loads(text) != document:
            return False
        write_cache_file(path, text.encode("utf-8"))
    except (OSError, ValueError, TypeError, RecursionError):
        return False  # a cache: the next process derives it again
    return True


def backup_copy(path: Path, folder: Path, label: str) -> Path:
    """A private copy (0600) of `path` in `folder`, named LABEL-STAMP-MS-NAME: a
    user's config file as it was before mnemo edited it."""
    import shutil

    make_dirs(folder)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = folder / f"{label}-{stamp}-{int(time.time() * 1000) % 1000:03d}-{path.name}"
    shutil.copy2(path, target)
    target.chmod(PRIVATE_FILE)  # in the private data dir, whatever the original's mode
    return target


def written_file(path: Path) -> Path:
    """The file that `replace_user_file(path, …)` writes: a symlink's target (even one
    that does not exist yet), else `path` itself."""
    return path.resolve() if path.is_symlink() else path


def replace_user_file(path: Path, text: str, *, new_mode: int = 0o644) -> None:
    """Replace the text of a user's file atomically, keeping its mode (`new_mode` for
    a new file); a symlink stays a symlink: the file it points at is replaced."""
    target = written_file(path)
    try:
        mode = target.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = new_mode
    atomic_write_text(target, text, mode=mode)


@contextlib.contextmanager
def file_lock(path: Path, *, timeout: float = 10.0, what: str = "lock") -> Iterator[None]:
    """An exclusive `flock` on `path`, waiting at most `timeout` seconds.

    The kernel drops the lock when the holder dies, so a killed process never
    leaves a stale lock behind.  A lock file that a sweep removed (or replaced)
    while this process waited on it locks nothing any more: the lock is taken
    again on the file now at `path`, so that two processes never both hold
    "the" lock on two files of one name.
    """
    make_dirs(path.parent)
    deadline = time.monotonic() + timeout
    while True:
        fd = _wait_for_lock(path, deadline, what)
        if _still_at(fd, path):
            break
        os.close(fd)  # swept while this process waited: lock the file there now
    try:
        yield
    finally:
        os.close(fd)


def _wait_for_lock(path: Path, deadline: float, what: str) -> int:
    """An fd of the file at `path`, exclusively locked, waiting until `deadline`."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise BusyError(
                        f"the {what} at {path} is held by another mnemo process",
                        hint="Try again in a moment.") from None
                time.sleep(0.02)
    except BaseException:
        os.close(fd)
        raise


def _still_at(fd: int, path: Path) -> bool:
    """Is the file open as `fd` the one at `path` (not removed or replaced since)?"""
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def try_lock(path: Path) -> int | None:
    """Take an exclusive lock without waiting; returns the fd or None if held."""
    make_dirs(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def release_lock(fd: int) -> None:
    os.close(fd)


# ─── Private modes ─────────────────────────────────────────────────────────


def private_mode(mode: int, *, is_dir: bool) -> int:
    """The private version of a permission mode: no group or other bits.

    Directories get 0700; files 0600, or 0700 when the owner may execute
    them (the hook wrapper).
    """
    if is_dir:
        return PRIVATE_DIR
    return 0o700 if mode & stat.S_IXUSR else PRIVATE_FILE


def make_private(root: Path) -> list[str]:
    """Remove group and other access from `root` and everything under it.

    Symbolic links are neither followed nor changed (their own mode means
    nothing on Linux).  Entries that cannot be changed (owned by another
    user, a read-only mount) are skipped; their paths are returned.
    """
    failed: list[str] = []

    def fix(path: str, is_dir: bool) -> None:
        try:
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                return
            wanted = private_mode(info.st_mode, is_dir=stat.S_ISDIR(info.st_mode))
            if stat.S_IMODE(info.st_mode) != wanted:
                os.chmod(path, wanted)
        except FileNotFoundError:
            pass  # removed meanwhile (a lock, a temporary file)
        except OSError:
            failed.append(path)

    fix(str(root), True)
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs:
            fix(os.path.join(folder, name), True)
        for name in files:
            fix(os.path.join(folder, name), False)
    return failed


def exposed_paths(root: Path, *, limit: int = 20, max_entries: int = 20_000) -> list[str]:
    """Up to `limit` entries under `root` that group or others may access (read-only)."""
    found: list[str] = []
    seen = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in [*dirs, *files]:
            seen += 1
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISLNK(info.st_mode) and info.st_mode & 0o077:
                found.append(path)
                if len(found) >= limit:
                    return found
            if seen >= max_entries:
                return found
    return found


def secure_process(base: Path | None = None, *, fix_existing: bool = True) -> bool:
    """Make this process's files private; make an existing data dir private once.

    Call it at the start of every mnemo process (the CLI and the hook), before
    anything is written.  It sets the umask to 077, so every file the process
    creates is 0600 and every directory 0700 (SQLite's databases and their
    `-wal`/`-shm` files included).  Then, unless `fix_existing` is false
    (`mnemo doctor`, which changes nothing), it checks for the stamp file
    `DATA/.private-v1` (one `stat`) and, when it is missing, chmods everything
    under the data dir private and writes the stamp: installs made before
    mnemo kept its files private are fixed on their first run.  Only a data
    dir of mnemo's own (`paths.data_dir_owner`): a home or a project given as
    the data dir keeps every mode, and gets no stamp.

    Never raises; returns True when it changed modes this time.
    """
    global _saved_umask
    with _umask_lock:
        os.umask(PRIVATE_UMASK)
        # Called inside a `private_files` block: its end keeps the process private.
        _saved_umask = PRIVATE_UMASK
    if not fix_existing:
        return False
    try:
        base = base or paths.data_dir()
        stamp = paths.privacy_stamp(base)
        if stamp.exists() or not base.is_dir():
            return False  # done before, or nothing yet (created private)
        if not paths.data_dir_owner(base)[0]:
            return False  # not mnemo's directory (or nothing of mnemo's in it yet)
        failed = make_private(base)
        if failed:
            return True  # try again next run
        fd = os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("mnemo made every file under this directory private (0600/0700).\n")
        return True
    except (OSError, ValueError):
        return False


# ─── Private files in a host process ───────────────────────────────────────
#
# A program that imports the library (not the CLI, the hook or the server,
# which call `secure_process` first) has its own umask, usually 022.  What
# mnemo writes itself is private whatever the umask (the primitives above),
# but most of its files are created by others: SQLite creates a bank, and its
# `-wal`/`-shm` files with the bank's mode; Mnemosyne creates bank folders,
# seeds `config.yaml`, opens its query cache; later versions may add more.
# Creating each of those private by hand would miss the next one, and a chmod
# after the fact leaves a moment in which another user can open the file and
# keep it open.  So mnemo's entry points (`memory.store`'s reads and writes,
# the memory commands) run under umask 077 for their duration only, and give
# the host its umask back afterwards.  The umask belongs to the whole process:
# meanwhile, a file another thread of the host creates is private too (never
# less private than it asked).  Nested and concurrent calls share one window:
# the first sets it, the last to leave restores it.

_umask_lock = threading.Lock()
_umask_depth = 0  # mnemo calls inside a `private_files` block right now
_saved_umask = 0  # the umask to give back when the last one leaves


@contextlib.contextmanager
def private_files() -> Iterator[None]:
    """Run the block (or, as `@private_files()`, the function) with umask 077.

    Every file created meanwhile is 0600 and every directory 0700, whoever
    creates it (SQLite, Mnemosyne); bits the caller's umask already removes
    stay removed.  The caller's umask is restored when the last block ends
    (it is the process's: see above).  A process that called `secure_process`
    stays private."""
    global _umask_depth, _saved_umask
    with _umask_lock:
        if _umask_depth == 0:
            previous = os.umask(PRIVATE_UMASK)
            if previous & ~PRIVATE_UMASK:
                os.umask(previous | PRIVATE_UMASK)
            _saved_umask = previous
        _umask_depth += 1
    try:
        yield
    finally:
        with _umask_lock:
            _umask_depth -= 1
            if _umask_depth == 0:
                os.umask(_saved_umask)


def _after_fork_in_child() -> None:
    # A child forked while another thread held the lock would wait for it forever.
    global _umask_lock
    _umask_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def unreadable(path: str | None, parsed: bool) -> bool:
    """A file (a harness's or an MCP client's config) that is there, but that could not
    be read or parsed (`parsed` false)."""
    return path is not None and not parsed and os.path.lexists(path)
