"""Workspace identity: the `.mnemosyne-id` marker and the names minted from it.

A marker holds one UUID.  The identity key is `id:<uuid>`; the namespace is
`dsh_v2_workspace_` + sha256(identity key) and the bank `ws-` + its first 48
hex digits.  Both are minted once at bind time and stored in the index; no
identity is ever derived from a path or a git remote.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .. import paths
from ..errors import DataError, RefusedError
from ..fsutil import atomic_create_bytes, sha256_hex
from ..record import field, record

MARKER_NAME = ".mnemosyne-id"
MARKER_PREFIX = "mnemosyne-workspace-v1:"
NAMESPACE_PREFIX = "dsh_v2_workspace_"
SESSION_PREFIX = "dsh_v2_session_"
BANK_PREFIX = "ws-"


class MarkerError(DataError):
    """A `.mnemosyne-id` file that is not a valid marker."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} is not a valid mnemo marker: {reason}",
                         hint="Fix or remove the file; mnemo never guesses at a marker.")
        self.path = path
        self.reason = reason


def identity_key_for(workspace_uuid: str) -> str:
    return f"id:{workspace_uuid}"


def namespace_for(identity_key: str) -> str:
    digest = sha256_hex(identity_key.encode("utf-8"))
    return NAMESPACE_PREFIX + digest


def bank_for(namespace: str) -> str:
    if not is_workspace_namespace(namespace):
        raise ValueError(f"not a workspace namespace: {namespace!r}")
    return BANK_PREFIX + namespace[len(NAMESPACE_PREFIX):][:48]


def is_workspace_namespace(value: str) -> bool:
    digest = value[len(NAMESPACE_PREFIX):]
    return (value.startswith(NAMESPACE_PREFIX) and len(digest) == 64
            and all(c in "0123456789abcdef" for c in digest))


def session_namespace(session_id: str) -> str:
    return SESSION_PREFIX + session_id


# What `str(uuid.UUID(...))` gives: the only spelling a marker may use.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def parse_marker(text: str, path: Path = Path(MARKER_NAME)) -> str:
    """Return the UUID of a marker's text, or raise `MarkerError` saying why not."""
    found: str | None = None
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        if found is not None:
            raise MarkerError(path, "more than one identity line")
        if not line.startswith(MARKER_PREFIX):
            raise MarkerError(path, f"expected a line starting with {MARKER_PREFIX!r}")
        value = line[len(MARKER_PREFIX):].strip()
        if _CANONICAL_UUID.fullmatch(value) is None:
            import uuid  # only to say what is wrong (it costs a hook 1-2 ms to import)

            try:
                uuid.UUID(value)
            except ValueError:
                raise MarkerError(path, f"{value!r} is not a UUID") from None
            raise MarkerError(path, f"{value!r} is not a lower-case canonical UUID")
        found = value
    if found is None:
        raise MarkerError(path, "no identity line")
    return found


MAX_MARKER_BYTES = 64 * 1024


def read_marker(path: Path) -> str:
    try:
        # Only a regular file (or a symlink to one): reading a FIFO or a
        # device named `.mnemosyne-id` would block or never end.
        if path.exists() and not path.is_file():
            raise MarkerError(path, "not a regular file")
        with open(path, "rb") as handle:
            data = handle.read(MAX_MARKER_BYTES + 1)
    except OSError as exc:
        raise MarkerError(path, f"unreadable ({exc.strerror})") from None
    if len(data) > MAX_MARKER_BYTES:
        raise MarkerError(path, "too large")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MarkerError(path, "not UTF-8 text") from None
    if "\x00" in text:
        raise MarkerError(path, "contains NUL bytes")
    return parse_marker(text, path)


def marker_text(workspace_uuid: str) -> str:
    return (f"{MARKER_PREFIX} {workspace_uuid}\n")


class MarkerExistsError(RefusedError):
    """`write_marker` found a `.mnemosyne-id` already in place (another binder won)."""


def write_marker(root: Path, workspace_uuid: str) -> Path:
    """Create `root/.mnemosyne-id`; never overwrites an existing file.

    The content goes to a temporary file of a name no other bind uses, synced,
    that is then hard-linked into place (`atomic_create_bytes`), so the marker
    appears whole or not at all, and two binders racing on one directory cannot
    both win.
    """
    target = root / MARKER_NAME
    try:
        atomic_create_bytes(target, marker_text(workspace_uuid).encode("utf-8"), mode=0o644)
    except FileExistsError:
        raise MarkerExistsError(f"{target} already exists") from None
    except OSError as exc:
        raise RefusedError(f"cannot write {target}: {exc.strerror}",
                           hint="Check that the directory is writable.") from None
    return target


@record(frozen=True)
class MarkerProblem:
    path: str
    reason: str


@record
class Location:
    """Where the upward search from a directory ended."""

    start: Path
    root: Path | None = None  # directory holding the marker that wins
    workspace_uuid: str | None = None
    marker_path: Path | None = None
    via_worktree: Path | None = None  # main work tree whose marker was used
    main_worktree: Path | None = None  # for a linked worktree: its main work tree
    git_top: Path | None = None  # top of the enclosing git work tree, if any
    # The top of the submodule `start` is in, when the walk went on past it into its
    # superproject (an unbound submodule is part of its superproject's checkout).
    submodule_top: Path | None = None
    stopped_at: str = "root"  # "marker" | "git-top" | "home" | "root"
    problems: list[MarkerProblem] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.workspace_uuid is not None


def _main_worktree(git_file: Path, gitdir: Path) -> Path | None:
    """For a linked worktree's `.git` file (pointing at `gitdir`), the main work
    tree's directory."""
    commondir_file = gitdir / "commondir"
    if not commondir_file.is_file():
        return None  # a submodule, not a linked worktree
    try:
        common = Path(commondir_file.read_text(encoding="utf-8").strip())
    except OSError:
        return None
    if not common.is_absolute():
        common = gitdir / common
    common = common.resolve()
    if common.name == ".git":
        return common.parent
    # A bare repository has no main work tree.  Its worktrees still share one
    # memory when they live inside the repository's own directory: the bare
    # repository itself (`proj.git/feature`), or the directory holding it and
    # a `.git` file pointing at it (`proj/.bare` with `proj/main`, `proj/feature`).
    worktree = git_file.parent
    if common in worktree.parents:
        return common
    holder = common.parent
    if holder in worktree.parents and (holder / ".git").is_file():
        return holder
    return None


def _gitdir_of(git_file: Path) -> Path | None:
    """The directory a `.git` file points at (`gitdir: …`), resolved."""
    try:
        text = git_file.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    line = text.splitlines()[0] if text else ""
    if not line.startswith("gitdir:"):
        return None
    gitdir = Path(line[len("gitdir:"):].strip())
    if not gitdir.is_absolute():
        gitdir = git_file.parent / gitdir
    try:
        return gitdir.resolve()
    except (OSError, RuntimeError):
        return None


def _superproject(module: Path, top: Path) -> Path | None:
    """For a submodule whose `.git` file points at `module`, the superproject's work
    tree around `top`: the nearest enclosing repository whose git directory holds
    the submodule's (`<super>/.git/modules/<name>`, or
    `…/.git/worktrees/<tree>/modules/<name>` for a submodule of a linked
    worktree).  None for anything else."""
    if "modules" not in module.parts:
        return None
    for above in top.parents:
        entry = above / ".git"
        if entry.is_dir():
            gitdir: Path | None = entry.resolve()
        elif entry.is_file():
            gitdir = _gitdir_of(entry)
        else:
            continue
        if gitdir is not None and gitdir in module.parents:
            return above
        return None  # the enclosing repository is not the one it belongs to
    return None


def _check_marker(directory: Path, location: Location) -> bool:
    marker = directory / MARKER_NAME
    if not (marker.exists() or marker.is_symlink()):
        return False
    try:
        location.workspace_uuid = read_marker(marker)
    except MarkerError as exc:
        location.problems.append(MarkerProblem(str(marker), exc.reason))
        return False
    location.root = directory
    location.marker_path = marker
    location.stopped_at = "marker"
    return True


def find_workspace(start: Path) -> Location:
    """Walk upward from `start`; the nearest valid marker wins.

    Stops at the top of the enclosing git work tree (checked, then not
    crossed), at `$HOME` and at `/` (neither may hold a workspace).  A linked
    worktree without its own marker resolves through its main work tree; an
    unbound git submodule is part of its superproject (the walk goes on up to
    the superproject's top); any other nested repository is a project of its
    own.
    An invalid marker is reported in `problems` and the walk goes on.
    """
    try:
        current = start.resolve(strict=True)
    except (OSError, RuntimeError):
        raise RefusedError(f"{start} does not exist") from None
    if not current.is_dir():
        current = current.parent
    location = Location(start=current)
    home = paths.home_dir()
    while True:
        if current == home:
            location.stopped_at = "home"
            return location
        if current.parent == current:
            location.stopped_at = "root"
            return location
        if _check_marker(current, location):
            git_entry = current / ".git"
            if git_entry.exists():
                location.git_top = current
            return location
        git_entry = current / ".git"
        if git_entry.exists():
            if git_entry.is_file():
                gitdir = _gitdir_of(git_entry)  # the file is read once for both checks
                main = _main_worktree(git_entry, gitdir) if gitdir is not None else None
                if main is None and gitdir is not None \
                        and _superproject(gitdir, current) is not None:
                    # An unbound submodule: its superproject's memory, as for any
                    # other directory of that checkout (a bound submodule won above).
                    location.submodule_top = location.submodule_top or current
                    current = current.parent
                    continue
                location.git_top = current
                location.stopped_at = "git-top"
                if main is not None and main != current:
                    location.main_worktree = main
                    if _check_marker(main, location):
                        location.via_worktree = main
                return location
            location.git_top = current
            location.stopped_at = "git-top"
            return location
        current = current.parent


def new_workspace_uuid() -> str:
    import uuid

    return str(uuid.uuid4())


def temp_dirs() -> set[Path]:
    """The system's temporary directories (`$TMPDIR`, /tmp, /var/tmp), as written:
    every scratch folder under one would share its memory."""
    found = {Path("/tmp"), Path("/var/tmp")}
    if os.environ.get("TMPDIR"):
        found.add(Path(os.environ["TMPDIR"]).expanduser())
    return {p for p in found if p.is_absolute()}


def never_a_root(resolved: Path) -> str | None:
    """Why the resolved directory can never be a workspace root, or None."""
    if resolved == paths.home_dir():
        return f"your home directory ({resolved})"
    if resolved.parent == resolved:
        return "the filesystem root /"
    for temp in temp_dirs():
        try:
            same = resolved == temp.resolve()
        except (OSError, RuntimeError):
            same = False
        if same:
            return f"the temporary directory {resolved} (every folder under it would share it)"
    return None


def check_bindable(path: Path) -> Path:
    """Resolve `path` and refuse what can never be a workspace root."""
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise RefusedError(f"{path} does not exist") from None
    if not resolved.is_dir():
        raise RefusedError(f"{path} is not a directory")
    reason = never_a_root(resolved)
    if reason is not None:
        raise RefusedError(f"refusing to bind {reason}",
                           hint="Bind a project directory instead.")
    return resolved
