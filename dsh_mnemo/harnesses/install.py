"""`mnemo hooks install|uninstall|status`: mnemo's entries in each harness's config.

Install writes the fail-open wrapper (`hooks/mnemo-hook.sh`, with the path
of this mnemo filled in) into `<data dir>/hooks/`, then merges one entry per
event into the harness's config file: every other key and hook is kept, the
file is backed up before it changes, and a second install changes nothing.
Uninstall removes only mnemo's entries.  An entry is mnemo's when its
command runs `mnemo-hook.sh` or `mnemo hook`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import paths
from ..errors import DataError, MnemoError, RefusedError
from .registry import HARNESSES, NAMES, Harness

WRAPPER_NAME = "mnemo-hook.sh"
HOOK_TIMEOUT_SECONDS = 10  # above the wrapper's own kill limit (8 s + 1 s grace)
WRAPPER_PLACEHOLDERS = ("@MNEMO_BIN@", "@MNEMO_DATA_DIR@", "@MNEMO_CONFIG@")

_OURS = re.compile(r"mnemo-hook\.sh|(?:^|[\s/'\"])mnemo['\"]?\s+hook\s")


# ─── Results ───────────────────────────────────────────────────────────────

@dataclass
class InstallResult:
    harness: str
    action: str  # "installed" | "updated" | "unchanged" | "removed" | "absent"
    config_path: str | None
    backup_path: str | None
    wrapper_path: str | None
    commands: dict[str, str] = field(default_factory=dict)
    next_steps: list[str] = field(default_factory=list)


@dataclass
class HarnessStatus:
    harness: str
    config_path: str | None
    config_exists: bool
    installed: bool  # every event mnemo uses has its entry
    events: dict[str, bool]
    commands: list[str]
    wrapper_path: str | None
    wrapper_exists: bool
    mnemo_path: str | None
    mnemo_exists: bool
    ok: bool  # installed and the command leads to a working mnemo
    problems: list[str] = field(default_factory=list)


# ─── Paths ─────────────────────────────────────────────────────────────────

def spec_for(harness: str) -> Harness:
    spec = HARNESSES.get(harness)
    if spec is None:
        raise RefusedError(f"unknown harness {harness!r}",
                           hint=f"Known harnesses: {', '.join(NAMES)}")
    return spec


def config_path(harness: str, project: Path | None = None) -> Path | None:
    spec = spec_for(harness)
    if spec.config_style == "none":
        return None
    if project is not None:
        root = project.expanduser().resolve()
        if not root.is_dir():
            raise RefusedError(f"{project} is not a directory")
        return root / str(spec.project_config)
    return paths.home_dir() / str(spec.user_config)


def wrapper_path(base: Path | None = None) -> Path:
    return (base or paths.data_dir()) / "hooks" / WRAPPER_NAME


def wrapper_source() -> str:
    """The wrapper script shipped with mnemo (its placeholders unfilled)."""
    from importlib.resources import files

    return files(__package__).joinpath(WRAPPER_NAME).read_text(encoding="utf-8")


def find_mnemo() -> str | None:
    """This installation's `mnemo` executable."""
    beside = Path(sys.executable).with_name("mnemo")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("mnemo")
    return str(Path(found).resolve()) if found else None


def render_wrapper(mnemo_bin: str) -> str:
    text = wrapper_source()
    data_dir = os.environ.get("MNEMO_DATA_DIR", "")
    config = os.environ.get("MNEMO_CONFIG", "")

    def quoted(value: str) -> str:
        return value.replace("'", "'\"'\"'")  # inside single quotes in the script

    return (text.replace("@MNEMO_BIN@", quoted(mnemo_bin))
            .replace("@MNEMO_DATA_DIR@", quoted(data_dir))
            .replace("@MNEMO_CONFIG@", quoted(config)))


def write_wrapper(base: Path | None = None) -> Path:
    mnemo_bin = find_mnemo()
    if mnemo_bin is None:
        raise MnemoError("cannot find the `mnemo` executable to point the hooks at",
                         hint="Install mnemo so `mnemo` is on PATH, then run this again.")
    target = wrapper_path(base)
    text = render_wrapper(mnemo_bin)
    try:
        current = target.read_text(encoding="utf-8")
    except OSError:
        current = None
    if current != text or not os.access(target, os.X_OK):
        from ..fsutil import atomic_write_text

        atomic_write_text(target, text, mode=0o700)  # private, like the whole data dir
    return target


def command_for(wrapper: Path, harness: str, kind: str) -> str:
    return f"{shlex.quote(str(wrapper))} {kind} {harness}"


def _timeout(spec: Harness) -> int | None:
    if spec.timeout_unit == "s":
        return HOOK_TIMEOUT_SECONDS
    if spec.timeout_unit == "ms":
        return HOOK_TIMEOUT_SECONDS * 1000
    return None


# ─── Reading and writing config files ──────────────────────────────────────

def _read_config(path: Path) -> dict[str, Any] | None:
    """The parsed file, None if absent; refuses (never rewrites) what it cannot parse."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None
    if not text.strip():
        return {}
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise DataError(f"{path} is not valid JSON ({exc}); it was left untouched",
                        hint="Fix or move the file, then run this again.") from None
    if not isinstance(document, dict):
        raise DataError(f"{path} does not hold a JSON object; it was left untouched")
    return document


def _backup(path: Path, harness: str, base: Path | None) -> Path:
    folder = paths.backups_dir(base) / "hooks"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = folder / f"{harness}-{stamp}-{int(time.time() * 1000) % 1000:03d}-{path.name}"
    shutil.copy2(path, target)
    target.chmod(0o600)  # a copy in the private data dir, whatever the original's mode
    return target


def _write_config(path: Path, document: dict[str, Any]) -> None:
    from ..fsutil import atomic_write_text

    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    atomic_write_text(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n", mode=mode)


def is_ours(entry: object) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("command"), str) \
        and bool(_OURS.search(entry["command"]))


def _hooks_table(document: dict[str, Any], path: Path) -> dict[str, Any]:
    hooks = document.get("hooks")
    if hooks is None:
        hooks = document["hooks"] = {}
    if not isinstance(hooks, dict):
        raise DataError(f"{path}: `hooks` is not an object; it was left untouched")
    return hooks


def remove_ours(document: dict[str, Any], spec: Harness, path: Path) -> None:
    """Drop mnemo's entries (and only groups/lists that held nothing else)."""
    if not isinstance(document.get("hooks"), dict):
        return
    hooks = document["hooks"]
    for name in list(hooks):
        groups = hooks[name]
        if not isinstance(groups, list):
            continue
        kept: list[Any] = []
        changed = False
        for group in groups:
            if spec.config_style == "flat":
                if is_ours(group):
                    changed = True
                    continue
                kept.append(group)
                continue
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                inner = [h for h in group["hooks"] if not is_ours(h)]
                if len(inner) != len(group["hooks"]):
                    changed = True
                    if not inner:
                        continue
                    group = {**group, "hooks": inner}
            elif is_ours(group):  # a flat entry someone wrote by hand
                changed = True
                continue
            kept.append(group)
        if changed:
            if kept:
                hooks[name] = kept
            else:
                del hooks[name]
    if not hooks:
        del document["hooks"]


def add_ours(document: dict[str, Any], spec: Harness, wrapper: Path,
             path: Path) -> dict[str, str]:
    hooks = _hooks_table(document, path)
    commands: dict[str, str] = {}
    timeout = _timeout(spec)
    for kind in spec.installed_events:
        name = spec.event_names[kind]
        command = command_for(wrapper, spec.name, kind)
        commands[kind] = command
        groups = hooks.setdefault(name, [])
        if not isinstance(groups, list):
            raise DataError(f"{path}: `hooks.{name}` is not a list; it was left untouched")
        if spec.config_style == "flat":
            groups.append({"command": command})
            continue
        entry: dict[str, Any] = {"type": "command", "command": command}
        if spec.named_entries:
            entry["name"] = f"mnemo-{kind}"
        if timeout is not None:
            entry["timeout"] = timeout
        groups.append({"hooks": [entry]})
    if spec.config_style == "flat":
        document.setdefault("version", 1)
    return commands


# ─── The three operations ──────────────────────────────────────────────────

def install(harness: str, project: Path | None = None, *,
            base: Path | None = None) -> InstallResult:
    spec = spec_for(harness)
    path = config_path(harness, project)
    wrapper = write_wrapper(base)
    if path is None:  # generic: nothing to merge into
        return InstallResult(harness=harness, action="installed", config_path=None,
                             backup_path=None, wrapper_path=str(wrapper),
                             commands={k: command_for(wrapper, harness, k)
                                       for k in spec.installed_events},
                             next_steps=list(spec.next_steps))
    existing = _read_config(path)
    document = json.loads(json.dumps(existing)) if existing is not None else {}
    remove_ours(document, spec, path)
    commands = add_ours(document, spec, wrapper, path)
    if existing is not None and document == existing:
        return InstallResult(harness=harness, action="unchanged", config_path=str(path),
                             backup_path=None, wrapper_path=str(wrapper), commands=commands,
                             next_steps=list(spec.next_steps))
    backup = _backup(path, harness, base) if existing is not None else None
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_config(path, document)
    had_ours = existing is not None and _find_ours(existing, spec)
    return InstallResult(harness=harness, action="updated" if had_ours else "installed",
                         config_path=str(path), backup_path=str(backup) if backup else None,
                         wrapper_path=str(wrapper), commands=commands,
                         next_steps=list(spec.next_steps))


def uninstall(harness: str, project: Path | None = None, *,
              base: Path | None = None) -> InstallResult:
    spec = spec_for(harness)
    path = config_path(harness, project)
    if path is None:
        return InstallResult(harness=harness, action="absent", config_path=None,
                             backup_path=None, wrapper_path=str(wrapper_path(base)))
    existing = _read_config(path)
    if existing is None or not _find_ours(existing, spec):
        return InstallResult(harness=harness, action="absent", config_path=str(path),
                             backup_path=None, wrapper_path=None)
    document = json.loads(json.dumps(existing))
    remove_ours(document, spec, path)
    backup = _backup(path, harness, base)
    _write_config(path, document)
    return InstallResult(harness=harness, action="removed", config_path=str(path),
                         backup_path=str(backup), wrapper_path=None)


def _find_ours(document: dict[str, Any], spec: Harness) -> dict[str, list[str]]:
    """Event name → commands of mnemo's entries found under it."""
    found: dict[str, list[str]] = {}
    hooks = document.get("hooks")
    if not isinstance(hooks, dict):
        return found
    for name, groups in hooks.items():
        if not isinstance(groups, list):
            continue
        for group in groups:
            entries = group.get("hooks") if isinstance(group, dict) and \
                isinstance(group.get("hooks"), list) else [group]
            for entry in entries:
                if is_ours(entry):
                    found.setdefault(name, []).append(entry["command"])
    return found


def _wrapper_target(wrapper: Path) -> str | None:
    """The mnemo executable an installed wrapper runs."""
    try:
        text = wrapper.read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r"^installed_bin='(.*)'$", text, re.M)
    value = match.group(1).replace("'\"'\"'", "'") if match else ""
    if not value or value.startswith("@"):
        found = shutil.which("mnemo")
        return found
    return value


def _command_target(command: str) -> tuple[Path | None, str | None]:
    """(wrapper path, mnemo executable) a hook command leads to."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None, None
    if not words:
        return None, None
    first = words[0]
    if first in ("sh", "bash", "/bin/sh", "/bin/bash") and len(words) > 1:
        first = words[1]
    if first.endswith(WRAPPER_NAME):
        wrapper = Path(first).expanduser()
        return wrapper, _wrapper_target(wrapper)
    # A direct `mnemo hook …` entry.
    if Path(first).name == "mnemo":
        return None, first if os.sep in first else shutil.which(first)
    return None, None


def harness_status(harness: str, project: Path | None = None, *,
                   base: Path | None = None) -> HarnessStatus:
    """Is mnemo installed for `harness`, and does its command reach a working mnemo?"""
    spec = spec_for(harness)
    path = config_path(harness, project)
    problems: list[str] = []
    if path is None:
        wrapper = wrapper_path(base)
        mnemo = _wrapper_target(wrapper) if wrapper.exists() else None
        mnemo_ok = bool(mnemo and os.access(mnemo, os.X_OK))
        if not wrapper.exists():
            problems.append(f"the wrapper {wrapper} is missing: run `mnemo hooks install "
                            "--harness generic`")
        elif not mnemo_ok:
            problems.append(f"the wrapper points at a missing mnemo ({mnemo})")
        return HarnessStatus(harness=harness, config_path=None, config_exists=False,
                             installed=wrapper.exists(), events={}, commands=[],
                             wrapper_path=str(wrapper), wrapper_exists=wrapper.exists(),
                             mnemo_path=mnemo, mnemo_exists=mnemo_ok,
                             ok=wrapper.exists() and mnemo_ok, problems=problems)
    try:
        document = _read_config(path)
    except DataError as exc:
        document = None
        problems.append(exc.message)
    found = _find_ours(document or {}, spec)
    events = {kind: spec.event_names[kind] in found for kind in spec.installed_events}
    commands = [c for cs in found.values() for c in cs]
    installed = bool(events) and all(events.values())
    wrapper_file: Path | None = None
    mnemo: str | None = None
    for command in commands:
        wrapper_file, mnemo = _command_target(command)
        if mnemo:
            break
    wrapper_exists = bool(wrapper_file and wrapper_file.exists())
    mnemo_ok = bool(mnemo and os.path.isfile(mnemo) and os.access(mnemo, os.X_OK))
    if document is not None and not found:
        problems.append(f"no mnemo entries in {path}")
    elif document is None and not problems:
        problems.append(f"{path} does not exist")
    missing = [spec.event_names[k] for k, v in events.items() if not v]
    if found and missing:
        problems.append(f"missing entries for {', '.join(missing)}")
    if commands and wrapper_file is not None and not wrapper_exists:
        problems.append(f"the hook command runs {wrapper_file}, which does not exist")
    if commands and not mnemo_ok:
        problems.append(f"the hook command does not lead to an existing mnemo ({mnemo})")
    return HarnessStatus(harness=harness, config_path=str(path),
                         config_exists=document is not None, installed=installed,
                         events=events, commands=commands,
                         wrapper_path=str(wrapper_file) if wrapper_file else None,
                         wrapper_exists=wrapper_exists, mnemo_path=mnemo,
                         mnemo_exists=mnemo_ok, ok=installed and mnemo_ok and (
                             wrapper_file is None or wrapper_exists),
                         problems=problems)
