"""`mnemo hooks install|uninstall|status`: mnemo's entries in each harness's config.

Install writes the fail-open wrapper (`hooks/mnemo-hook.sh`, with the path
of this mnemo filled in) into `<data dir>/hooks/`, then edits one entry per
event into the harness's config file, in place (`harnesses.jsonc`):

- every other key, hook, comment and line of the file stays as it was, and
  no entry ever changes position (Codex trusts hooks by position): mnemo's
  entry is updated where it is, or appended at the end of its event;
- a second install, with nothing to change, does not write at all;
- the file is backed up before it changes; a file the harness itself could
  not read is refused, untouched.

Uninstall removes only mnemo's entries (for Codex, an entry followed by
others becomes an empty group, so the others keep their position, and the
records of Codex's `config.toml` that trusted mnemo's entries go with them),
and, left empty, the `hooks` object and event lists that install added (one
the user had, even empty, stays: install notes them); a file that mnemo
created and that holds nothing else afterwards is removed (`harnesses.created`,
shared with `mcp uninstall`).
An entry is mnemo's when its command is one install writes (`command_for`):
the wrapper's absolute path, an event and a harness, quoted as `shlex.quote`
quotes them; a command that only mentions the wrapper or `mnemo hook` is the
user's, and neither install nor uninstall ever touches it.
The user-level config directory follows each harness's own variable
(`CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `GEMINI_CLI_HOME`, `QWEN_HOME`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from .. import paths
from ..errors import DataError, MnemoError, RefusedError, usage_error
from ..record import field, record
from . import created, jsonc
from .registry import EVENTS, HARNESSES, NAMES, Harness

WRAPPER_NAME = "mnemo-hook.sh"
HOOK_TIMEOUT_SECONDS = 10  # above the wrapper's own kill limit (8 s + 1 s grace)
WRAPPER_PLACEHOLDERS = ("@MNEMO_BIN@", "@MNEMO_DATA_DIR@", "@MNEMO_CONFIG@",
                        "@MNEMO_PYTHON@", "@MNEMO_CLIENT@", "@MNEMO_HOME@")


# ─── Results ───────────────────────────────────────────────────────────────

@record
class InstallResult:
    harness: str
    action: str  # "installed" | "updated" | "unchanged" | "removed" | "absent"
    config_path: str | None
    backup_path: str | None
    wrapper_path: str | None
    commands: dict[str, str] = field(default_factory=dict)
    next_steps: list[str] = field(default_factory=list)
    config_dir_env: str | None = None  # the variable that placed the config, if set
    trusted: list[str] = field(default_factory=list)  # Codex trust records written
    removed_file: bool = False  # uninstall removed the file mnemo had created
    # Uninstall (Codex): the trust records of mnemo's entries taken out of config.toml.
    untrusted: list[str] = field(default_factory=list, metadata={"json": False})


@record
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
    ok: bool  # installed, leads to a working mnemo, and (Codex) trusted
    problems: list[str] = field(default_factory=list)
    config_dir_env: str | None = None
    # Codex: the trust state of every command entry in the file.
    trust: list[dict[str, Any]] = field(default_factory=list)
    trusted: bool | None = None  # all of mnemo's entries trusted; None: no such step
    trust_fix: str | None = None
    # Gemini: would it run hooks at all in the current (or project) directory?
    folder_trust: dict[str, Any] | None = None
    # Files with mnemo's entries that the harness does not read (a moved config dir).
    unread_configs: list[str] = field(default_factory=list)
    # Epoch ms of the last time the prompt hook gave this harness context (injections).
    last_injection: int | None = None


# ─── Paths ─────────────────────────────────────────────────────────────────

def spec_for(harness: str) -> Harness:
    spec = HARNESSES.get(harness)
    if spec is None:
        raise RefusedError(f"unknown harness {harness!r}",
                           hint=f"Known harnesses: {', '.join(NAMES)}")
    return spec


def config_dir_variable(harness: str) -> str | None:
    """The harness's config-directory variable, when it is set (non-empty)."""
    spec = spec_for(harness)
    name = spec.config_dir_env
    return name if name and os.environ.get(name, "").strip() else None


def user_config_dir(harness: str) -> Path | None:
    """Where the harness keeps its user-level config, as it would find it."""
    spec = spec_for(harness)
    if spec.config_dir is None:
        return None
    variable = config_dir_variable(harness)
    if variable:
        moved = Path(os.environ[variable].strip()).expanduser()
        moved = moved if moved.is_absolute() else Path.cwd() / moved
        return moved / spec.config_dir if spec.config_dir_env_is_home else moved
    return paths.home_dir() / spec.config_dir


def config_path(harness: str, project: Path | None = None) -> Path | None:
    spec = spec_for(harness)
    if spec.config_style == "none" or spec.config_dir is None:
        return None
    if project is not None:
        root = project.expanduser().resolve()
        if not root.is_dir():
            raise RefusedError(f"{project} is not a directory")
        return root / spec.config_dir / str(spec.config_file)
    folder = user_config_dir(harness)
    assert folder is not None
    return folder / str(spec.config_file)


def wrapper_path(base: Path | None = None) -> Path:
    return (base or paths.data_dir()) / "hooks" / WRAPPER_NAME


def generic_record(base: Path | None = None) -> Path:
    """Written by `hooks install --harness generic`, removed by its uninstall: the
    generic harness has no config file to hold mnemo's entries, and the wrapper, which
    every harness's install writes and no uninstall removes, says nothing about it."""
    return (base or paths.data_dir()) / "hooks" / "generic-installed"


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


def client_path() -> Path:
    """The hook client script (standard library only) the wrapper runs."""
    from ..server import client

    return Path(client.__file__).resolve()


def render_wrapper(mnemo_bin: str, base: Path | None = None) -> str:
    """The wrapper with this installation's paths filled in.

    The data dir and config are pinned only if they were overridden when
    installing; the client gets the data dir the wrapper lives in (the
    harness's MNEMO_DATA_DIR still wins) and this installation's Python.
    """
    text = wrapper_source()
    data_dir = os.environ.get("MNEMO_DATA_DIR", "")
    config = os.environ.get("MNEMO_CONFIG", "")

    def quoted(value: str) -> str:
        return value.replace("'", "'\"'\"'")  # inside single quotes in the script

    return (text.replace("@MNEMO_BIN@", quoted(mnemo_bin))
            .replace("@MNEMO_DATA_DIR@", quoted(data_dir))
            .replace("@MNEMO_CONFIG@", quoted(config))
            .replace("@MNEMO_PYTHON@", quoted(sys.executable))
            .replace("@MNEMO_CLIENT@", quoted(str(client_path())))
            .replace("@MNEMO_HOME@", quoted(str(base or paths.data_dir()))))


def write_wrapper(base: Path | None = None) -> Path:
    mnemo_bin = find_mnemo()
    if mnemo_bin is None:
        raise MnemoError("cannot find the `mnemo` executable to point the hooks at",
                         hint="Install mnemo so `mnemo` is on PATH, then run this again.")
    target = wrapper_path(base)
    text = render_wrapper(mnemo_bin, base)
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


def timeout_for(spec: Harness, kind: str) -> int | None:
    """The timeout written for `kind`, in the harness's unit."""
    seconds = min(HOOK_TIMEOUT_SECONDS, spec.event_timeouts.get(kind, HOOK_TIMEOUT_SECONDS))
    if spec.timeout_unit == "s":
        return seconds
    if spec.timeout_unit == "ms":
        return seconds * 1000
    return None


def desired_entry(spec: Harness, wrapper: Path, kind: str) -> dict[str, Any]:
    """mnemo's config entry for `kind`, exactly as install writes it."""
    command = command_for(wrapper, spec.name, kind)
    if spec.config_style == "flat":
        return {"command": command}
    entry: dict[str, Any] = {"type": "command", "command": command}
    if spec.named_entries:
        entry["name"] = f"mnemo-{kind}"
    timeout = timeout_for(spec, kind)
    if timeout is not None:
        entry["timeout"] = timeout
    return entry


# ─── Reading config files ──────────────────────────────────────────────────

def _open(path: Path, spec: Harness) -> tuple[jsonc.Editor, str | None]:
    """An editor on the file (a new `{}` when it is absent or blank) and its text.

    Refuses, untouched, what the harness itself could not read.
    """
    try:
        text = jsonc.read_text(path)
    except FileNotFoundError:
        return jsonc.Editor("{}"), None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None
    if not text.strip():
        return jsonc.Editor("{}"), text
    try:
        editor = jsonc.Editor(text, comments=spec.config_comments)
    except jsonc.JsoncError as exc:
        kind = "JSON (with comments)" if spec.config_comments else "valid JSON"
        raise DataError(f"{path} is not {kind}: {exc}; it was left untouched",
                        hint="Fix the file (the harness cannot read it either), then run "
                             "this again.") from None
    if not isinstance(editor.value, dict):
        raise DataError(f"{path} does not hold a JSON object; it was left untouched")
    return editor, text


def _read_config(path: Path, spec: Harness) -> dict[str, Any] | None:
    """The parsed file, None if absent; refuses what the harness could not read."""
    try:
        path.stat()  # not `exists()`, which is False for a symbolic link loop too
    except (FileNotFoundError, NotADirectoryError):
        return None  # absent, or a symbolic link to nothing yet
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from None
    editor, _ = _open(path, spec)
    return editor.value


def is_ours(entry: object) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("command"), str) \
        and is_our_command(entry["command"])


def is_our_command(command: str) -> bool:
    """`command` is exactly one that install writes, for any data dir, event and harness
    (not `logger 'mnemo hook finished'`, nor `~/old-mnemo-hook.sh.disabled --audit`)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if len(words) != 3 or words[1] not in EVENTS or words[2] not in HARNESSES:
        return False
    wrapper = Path(words[0])
    return wrapper.name == WRAPPER_NAME and wrapper.is_absolute() \
        and command == command_for(wrapper, words[2], words[1])


@record(frozen=True)
class Located:
    """One of mnemo's entries: `handler` is None for an entry directly in the list."""

    event: str
    group: int
    handler: int | None
    entry: dict[str, Any]

    def path(self) -> jsonc.Path_:
        base: jsonc.Path_ = ("hooks", self.event, self.group)
        return base if self.handler is None else (*base, "hooks", self.handler)


def find_ours(document: dict[str, Any]) -> list[Located]:
    """mnemo's entries, in file order."""
    found: list[Located] = []
    hooks = document.get("hooks")
    if not isinstance(hooks, dict):
        return found
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            continue
        for gi, group in enumerate(groups):
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                for hi, entry in enumerate(group["hooks"]):
                    if is_ours(entry):
                        found.append(Located(event, gi, hi, entry))
            elif is_ours(group):
                found.append(Located(event, gi, None, group))
    return found


def _find_ours(document: dict[str, Any], spec: Harness | None = None) -> dict[str, list[str]]:
    """Event name → commands of mnemo's entries found under it."""
    found: dict[str, list[str]] = {}
    for located in find_ours(document):
        found.setdefault(located.event, []).append(located.entry["command"])
    return found


# ─── Editing ───────────────────────────────────────────────────────────────

def _check_shape(document: dict[str, Any], path: Path) -> None:
    hooks = document.get("hooks")
    if "hooks" in document and not isinstance(hooks, dict):  # `null` too
        raise DataError(f"{path}: `hooks` is not an object (it is {json.dumps(hooks)[:40]}); "
                        "it was left untouched",
                        hint="Make it an object of hooks (`{}` for none) or remove it, then "
                             "run this again.")
    for name, groups in (hooks or {}).items():
        if not isinstance(groups, list):
            raise DataError(f"{path}: `hooks.{name}` is not a list; it was left untouched")


def _check_unique(editor: jsonc.Editor, spec: Harness, path: Path, events: set[str]) -> None:
    """Refuse a file that has twice a key mnemo edits under (`hooks`, one of `events`, a
    group's `hooks`; Cursor's `version`): the harness reads the last one only, and
    taking mnemo's entries out of it could bring the other one back."""
    def twice(node: jsonc.Node | None, key: str) -> bool:
        return node is not None and node.kind == "object" and node.keys.count(key) > 1

    def member(node: jsonc.Node | None, key: str) -> jsonc.Node | None:
        if node is None or node.kind != "object":
            return None
        index = node.index_of(key)
        return None if index is None else node.children[index]

    root = editor.root
    keys = ("hooks", "version") if spec.config_style == "flat" else ("hooks",)
    doubled = [key for key in keys if twice(root, key)]
    hooks = member(root, "hooks")
    for event in sorted(events):
        groups = member(hooks, event)
        if twice(hooks, event):
            doubled.append(f"hooks.{event}")
        elif groups is not None and groups.kind == "array":
            doubled += [f"hooks.{event}[{i}].hooks" for i, group in enumerate(groups.children)
                        if twice(group, "hooks")]
    if doubled:
        listed = ", ".join(f"`{key}`" for key in doubled)
        raise DataError(f"{path} has {listed} twice (the harness reads only the last one); "
                        "it was left untouched",
                        hint="Merge the two into one, then run this again.")


def _found_members(document: dict[str, Any], spec: Harness) -> dict[str, str | None]:
    """What install may add to or fill in the file (`hooks`, `hooks.EVENT` of mnemo's
    events, Cursor's `version`), each mapped to what it holds, as JSON text, or None
    when it is not there; a member that holds anything is left out.  Noted with
    `created.note_kept`, so that uninstall takes away only the members mnemo added."""
    hooks = document.get("hooks")
    values: dict[str, Any] = {"hooks": hooks}
    for kind in spec.installed_events:
        name = spec.event_names[kind]
        values[f"hooks.{name}"] = hooks.get(name) if isinstance(hooks, dict) else None
    found = {k: None if v is None else json.dumps(v) for k, v in values.items()
             if v in (None, {}, [])}
    if spec.config_style == "flat":
        found["version"] = json.dumps(document["version"]) if "version" in document else None
    return found


def _own_members(kept: dict[str, str]) -> dict[str, None]:
    """The hooks' members among `created.kept` (`mcpServers` may share the file)."""
    return {k: None for k in kept if k in ("hooks", "version") or k.startswith("hooks.")}


def _is_placeholder(group: object) -> bool:
    return isinstance(group, dict) and group.get("hooks") == [] and \
        set(group) <= {"hooks", "matcher"}


def _remove(editor: jsonc.Editor, spec: Harness, located: Located, *,
            keep_positions: bool = False, kept: dict[str, str] | None = None) -> None:
    """Remove one of mnemo's entries (its group too when nothing else is in it, and the
    event's list and `hooks` when left empty, unless they are `kept`: the user's).

    With `keep_positions`, an entry that shares its group with later handlers is
    left alone: removing it would move them (and lose their Codex trust).
    """
    groups = editor.value["hooks"][located.event]
    event_path: jsonc.Path_ = ("hooks", located.event)
    group = groups[located.group]
    if located.handler is not None and len(group["hooks"]) > 1:
        if keep_positions and located.handler < len(group["hooks"]) - 1:
            return
        editor.delete(located.path())
    elif spec.positional_trust and located.group < len(groups) - 1:
        # Later groups keep their index (and so their Codex trust): leave it empty.
        if located.handler is None:
            editor.replace((*event_path, located.group), {"hooks": []})
        else:
            editor.replace((*event_path, located.group, "hooks"), [])
    else:
        editor.delete((*event_path, located.group))
        if spec.positional_trust:  # trailing empty groups hold no position for anyone
            while editor.value["hooks"][located.event] and \
                    _is_placeholder(editor.value["hooks"][located.event][-1]):
                editor.delete((*event_path, len(editor.value["hooks"][located.event]) - 1))
    kept = kept or {}
    if editor.value["hooks"][located.event] == [] and f"hooks.{located.event}" not in kept:
        editor.delete(event_path)
    if editor.value["hooks"] == {} and "hooks" not in kept:
        editor.delete(("hooks",))


def _remove_all(editor: jsonc.Editor, spec: Harness, chosen: list[Located], *,
                keep_positions: bool = False, kept: dict[str, str] | None = None) -> None:
    """Remove `chosen`, last first, so earlier positions stay valid meanwhile."""
    for located in sorted(chosen, key=lambda x: (x.event, x.group, x.handler or 0),
                          reverse=True):
        _remove(editor, spec, located, keep_positions=keep_positions, kept=kept)


def _new_group(spec: Harness, entry: dict[str, Any]) -> Any:
    return entry if spec.config_style == "flat" else {"hooks": [entry]}


def _apply_install(editor: jsonc.Editor, spec: Harness, wrapper: Path, path: Path,
                   kept: dict[str, str] | None = None) -> None:
    _check_shape(editor.value, path)
    wanted = {spec.event_names[kind]: kind for kind in spec.installed_events}
    ours = find_ours(editor.value)
    # 1. Update mnemo's first entry of each event where it is.
    kept: set[str] = set()
    extra: list[Located] = []
    for located in ours:
        kind = wanted.get(located.event)
        if kind is None or located.event in kept:
            extra.append(located)  # an event mnemo no longer uses, or a duplicate
            continue
        kept.add(located.event)
        desired = desired_entry(spec, wrapper, kind)
        if located.handler is None and spec.config_style != "flat":
            editor.replace(located.path(), _new_group(spec, desired))
        else:
            editor.replace(located.path(), desired)
    # 2. Drop duplicates and entries under events mnemo does not install.
    _remove_all(editor, spec, extra, keep_positions=spec.positional_trust, kept=kept)
    # 3. Append what is missing, at the end of its event: nothing moves.
    for kind in spec.installed_events:
        name = spec.event_names[kind]
        if name in kept:
            continue
        group = _new_group(spec, desired_entry(spec, wrapper, kind))
        hooks = editor.value.get("hooks")
        if hooks is None:
            editor.append((), {name: [group]}, key="hooks")
        elif name not in hooks:
            editor.append(("hooks",), [group], key=name)
        else:
            editor.append(("hooks", name), group)
    if spec.config_style == "flat" and "version" not in editor.value:
        editor.append((), 1, key="version")


def fresh_document(harness: str, wrapper: Path) -> dict[str, Any]:
    """What install writes into an empty config file (the hooks/*.json snippets)."""
    spec = spec_for(harness)
    editor = jsonc.Editor("{}")
    _apply_install(editor, spec, wrapper, Path(f"<{harness}>"))
    return editor.value


def _without_ours(document: dict[str, Any], spec: Harness) -> Any:
    """The document with mnemo's entries (and what only they filled) taken out."""
    clone = json.loads(json.dumps(document))
    if spec.config_style == "flat":
        clone.pop("version", None)
    hooks = clone.get("hooks")
    if not isinstance(hooks, dict):
        return clone
    for name in list(hooks):
        kept = []
        for group in hooks[name]:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                inner = [h for h in group["hooks"] if not is_ours(h)]
                if not inner and (len(group["hooks"]) or _is_placeholder(group)):
                    continue
                kept.append({**group, "hooks": inner})
            elif not is_ours(group):
                kept.append(group)
        if kept:
            hooks[name] = kept
        else:
            del hooks[name]
    if not hooks:
        del clone["hooks"]
    return clone


def _positions(document: dict[str, Any]) -> dict[tuple[str, int, int], str]:
    """(event, group, handler) → command of every entry that is not mnemo's."""
    found: dict[tuple[str, int, int], str] = {}
    for name, groups in (document.get("hooks") or {}).items():
        for gi, group in enumerate(groups if isinstance(groups, list) else []):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for hi, entry in enumerate(handlers if isinstance(handlers, list) else []):
                if not is_ours(entry):
                    found[(name, gi, hi)] = json.dumps(entry, sort_keys=True)
    return found


def _verify(before: dict[str, Any], after: dict[str, Any], spec: Harness, path: Path,
            *, moved_ok: bool = False) -> None:
    """Every foreign key and hook is as it was (and, for Codex, where it was)."""
    if not jsonc.same(_without_ours(before, spec), _without_ours(after, spec)):
        raise MnemoError(f"internal error: editing {path} would change more than mnemo's "
                         "entries; the file was left untouched",
                         hint="Please report this with a copy of the file.")
    if spec.positional_trust and not moved_ok:
        old, new = _positions(before), _positions(after)
        if any(new.get(where) != entry for where, entry in old.items()):
            raise MnemoError(f"internal error: editing {path} would move other hooks; the "
                             "file was left untouched",
                             hint="Please report this with a copy of the file.")


# ─── Backups, writes and what mnemo created ────────────────────────────────

def _backup(path: Path, harness: str, base: Path | None) -> Path:
    from ..fsutil import backup_copy

    return backup_copy(path, paths.backups_dir(base) / "hooks", harness)


def _write_text(path: Path, text: str) -> None:
    from ..fsutil import replace_user_file

    replace_user_file(path, text)


# ─── The three operations ──────────────────────────────────────────────────

def install(harness: str, project: Path | None = None, *,
            base: Path | None = None, trust: bool = False) -> InstallResult:
    spec = spec_for(harness)
    if trust and not spec.positional_trust:
        raise usage_error(f"--trust applies to Codex only: {harness} has no per-hook trust "
                          "records for mnemo to write",
                          hint="Run the install without --trust; its next steps say what "
                               "the harness needs.")
    path = config_path(harness, project)
    wrapper = write_wrapper(base)
    variable = None if project is not None else config_dir_variable(harness)
    if path is None:  # generic: nothing to merge into, only the install to record
        from ..fsutil import atomic_write_text

        atomic_write_text(generic_record(base), "`mnemo hooks install --harness generic` "
                          "was run; `mnemo hooks uninstall --harness generic` removes this "
                          "file.\n")
        return InstallResult(harness=harness, action="installed", config_path=None,
                             backup_path=None, wrapper_path=str(wrapper),
                             commands={k: command_for(wrapper, harness, k)
                                       for k in spec.installed_events},
                             next_steps=list(spec.next_steps))
    editor, original = _open(path, spec)
    before = json.loads(json.dumps(editor.value))
    had_ours = bool(find_ours(before))
    _check_unique(editor, spec, path, {spec.event_names[k] for k in spec.installed_events}
                  | {located.event for located in find_ours(before)})
    found = _found_members(before, spec)
    _apply_install(editor, spec, wrapper, path, created.kept(path, base))
    _verify(before, editor.value, spec, path)
    commands = {k: command_for(wrapper, harness, k) for k in spec.installed_events}
    result = InstallResult(harness=harness, action="unchanged", config_path=str(path),
                           backup_path=None, wrapper_path=str(wrapper), commands=commands,
                           next_steps=list(spec.next_steps), config_dir_env=variable)
    text = editor.text if original is not None and original.strip() else \
        jsonc.dumps(editor.value)
    if original is None or text != original:
        if original is not None:
            result.backup_path = str(_backup(path, harness, base))
        made = created.make_parents(path) if original is None else []
        _write_text(path, text)
        if original is None or not original.strip():
            created.note_created(path, made, base, blank=original)
        created.note_kept(path, found, base)
        result.action = "updated" if had_ours else "installed"
    changed = result.action != "unchanged"
    if spec.positional_trust:
        result.trusted, step = _codex_trust(harness, path, project, trust, base)
        result.next_steps = [step] if step else []
    elif harness == "gemini":
        result.next_steps = _gemini_steps(harness, project, changed=changed)
    elif not changed:
        result.next_steps = []  # nothing new for the harness to load
    return result


def uninstall(harness: str, project: Path | None = None, *,
              base: Path | None = None) -> InstallResult:
    spec = spec_for(harness)
    path = config_path(harness, project)
    if path is None:  # generic: forget the install; the wrapper stays for the others
        record = generic_record(base)
        recorded = record.exists()
        record.unlink(missing_ok=True)
        return InstallResult(harness=harness, action="removed" if recorded else "absent",
                             config_path=None,
                             backup_path=None, wrapper_path=str(wrapper_path(base)))
    variable = None if project is not None else config_dir_variable(harness)
    if not path.exists():
        return InstallResult(harness=harness, action="absent", config_path=str(path),
                             backup_path=None, wrapper_path=None, config_dir_env=variable)
    editor, original = _open(path, spec)
    before = json.loads(json.dumps(editor.value))
    ours = find_ours(before)
    if not ours:
        return InstallResult(harness=harness, action="absent", config_path=str(path),
                             backup_path=None, wrapper_path=None, config_dir_env=variable)
    _check_shape(before, path)
    _check_unique(editor, spec, path, {located.event for located in ours})
    kept = created.kept(path, base)
    _remove_all(editor, spec, ours, kept=kept)
    if spec.config_style == "flat" and set(editor.value) == {"version"} \
            and editor.value["version"] == 1 and "version" not in kept:
        editor.delete(("version",))
    _verify(before, editor.value, spec, path, moved_ok=True)
    untrust: tuple[Path, list[str], str] | None = None
    problem = None
    if spec.positional_trust:
        try:
            untrust = _codex_untrust(path, project, before)
        except DataError as exc:
            problem = (f"The records that trusted mnemo's entries were left in Codex's "
                       f"config.toml: {exc.message}")
    result = InstallResult(harness=harness, action="removed", config_path=str(path),
                           backup_path=str(_backup(path, harness, base)), wrapper_path=None,
                           config_dir_env=variable)
    result.removed_file = _write_or_remove(path, editor.text, editor.value == {}, base)
    created.note_kept(path, _own_members(kept), base)  # mnemo's entries are gone: forget
    if untrust is not None:
        config, result.untrusted, text = untrust
        _backup(config, harness, base)
        _write_or_remove(config, text, not text.strip(), base)
    if spec.positional_trust:
        result.next_steps = _codex_moved_steps(before, editor.value, path)
        if problem:
            result.next_steps.append(problem)
    return result


def _write_or_remove(path: Path, text: str, empty: bool, base: Path | None) -> bool:
    """Write `text`; when nothing is left in it, give back what was there before mnemo
    created the file (True: it removed the file)."""
    undone = created.undo(path, base) if empty else None
    if undone is None:
        _write_text(path, text)
    return undone == "removed"


# ─── Trust: Codex hooks, Gemini folders ────────────────────────────────────

def codex_config_toml(project: Path | None = None) -> Path:
    """The user's Codex config.toml, where trust records live (also for project hooks)."""
    folder = user_config_dir("codex")
    assert folder is not None
    return folder / "config.toml"


def codex_key_file(path: Path, project: Path | None) -> Path:
    """The hooks file as Codex spells it in trust keys: `$CODEX_HOME` resolved
    (Codex canonicalizes it), but `$HOME/.codex` as HOME is given (it does not)."""
    if project is not None or config_dir_variable("codex"):
        return path.resolve()
    home = os.environ.get("HOME")
    return Path(home).absolute() / ".codex" / "hooks.json" if home else path


def _codex_trust(harness: str, path: Path, project: Path | None, write: bool,
                 base: Path | None = None) -> tuple[list[str], str | None]:
    """Write trust for mnemo's entries if asked; the step still to do, if any."""
    from . import codex

    document = _read_config(path, spec_for(harness)) or {}
    config = codex_config_toml(project)
    written: list[str] = []
    if write:
        ours = [e for e in codex.command_entries(document) if is_ours(e.spec)]
        existed, missing = config.exists(), created.missing_parents(config)
        written = codex.trust(config, codex_key_file(path, project), ours)
        if written and not existed:
            created.note_created(config, missing, base)
    status = harness_status(harness, project)
    steps = []
    if status.trusted is False and any(e["ours"] and e["state"] != codex.TRUSTED
                                       for e in status.trust):
        steps.append(spec_for(harness).next_steps[0])
    if project is not None and not codex.project_trusted(config, path.parent.parent):
        steps.append(f"Codex reads {path} only in a trusted project: trust "
                     f"{path.parent.parent} when Codex asks (or set [projects."
                     f'"{path.parent.parent}"] trust_level = "trusted" in {config}).')
    return written, " ".join(steps) or None


def _codex_untrust(path: Path, project: Path | None,
                   document: dict[str, Any]) -> tuple[Path, list[str], str] | None:
    """(config.toml, keys, its new text) without the records that trust mnemo's
    entries of `document` as they are; None when there is none."""
    from . import codex

    config = codex_config_toml(project)
    ours = [e for e in codex.command_entries(document) if is_ours(e.spec)]
    keys, text = codex.without_trust(config, codex_key_file(path, project), ours)
    return (config, keys, text) if keys and text is not None else None


def _codex_moved_steps(before: dict[str, Any], after: dict[str, Any], path: Path) -> list[str]:
    moved = [cmd for where, cmd in _positions(before).items()
             if _positions(after).get(where) != cmd]
    if not moved:
        return []
    return [f"Removing mnemo's entries moved {len(moved)} of your other hooks in {path}; "
            "Codex now treats them as new and skips them until you trust them again in "
            "/hooks."]


def _gemini_steps(harness: str, project: Path | None, *, changed: bool = True) -> list[str]:
    """What to do for Gemini CLI to run the hooks (with nothing `changed`: only what the
    folder's trust still requires)."""
    spec = spec_for(harness)
    steps = list(spec.next_steps) if changed else []
    if project is not None and changed:
        steps.append("Project-level hooks: on the first run in this project Gemini CLI "
                     "prints a warning listing them, runs them, and trusts them from then "
                     "on (until their name or command changes).")
    trust = gemini_folder_trust(project or Path.cwd())
    if trust is not None and not trust["trusted"]:
        from .gemini import trust_fix

        steps.append(f"Gemini CLI does not trust {trust['path']} ({trust['detail']}): "
                     + trust_fix(trust["path"]))
    return steps


def gemini_folder_trust(directory: Path) -> dict[str, Any] | None:
    from ..record import asdict
    from .gemini import folder_trust

    folder = user_config_dir("gemini")
    if folder is None:
        return None
    try:
        resolved = directory.resolve()
    except OSError:
        resolved = directory
    return asdict(folder_trust(resolved, folder))


def _codex_status(path: Path, document: dict[str, Any] | None, project: Path | None,
                  status: HarnessStatus) -> None:
    from . import codex

    config = codex_config_toml(project)
    try:
        entries = codex.assess(codex_key_file(path, project), document or {}, config,
                               is_ours)
    except DataError as exc:
        status.problems.append(f"cannot read Codex's trust records: {exc.message}")
        status.trusted = False
        return
    status.trust = [{"event": e.event, "key": e.key, "command": e.command, "ours": e.ours,
                     "state": e.state} for e in entries]
    mine = [e for e in entries if e.ours]
    if not mine:
        return
    bad = [e for e in mine if e.state != codex.TRUSTED]
    status.trusted = not bad
    if project is not None and not codex.project_trusted(config, path.parent.parent):
        status.trusted = False
        status.problems.append(f"Codex does not read {path}: the project "
                               f"{path.parent.parent} is not trusted in {config}")
    if bad:
        words = {codex.UNTRUSTED: "not trusted yet", codex.CHANGED: "changed since trusted",
                 codex.DISABLED: "disabled in /hooks"}
        listed = ", ".join(f"{e.event} ({words[e.state]})" for e in bad)
        flag = " --project " + shlex.quote(str(project)) if project is not None else ""
        status.trust_fix = (
            "Trust them in Codex's /hooks review, or run `mnemo hooks install --harness "
            f"codex{flag} --trust` (records trust for mnemo's own entries only).")
        status.problems.append(f"Codex will skip mnemo's {listed} hook(s) without a word: "
                               + status.trust_fix)
    others = [e for e in entries if not e.ours and e.state != codex.TRUSTED]
    if others:
        status.problems.append(
            f"{len(others)} other hook(s) in {path} are not trusted by Codex (it skips them): "
            + ", ".join(f"{e.event} {e.command!r}" for e in others[:3]))


# ─── Status ────────────────────────────────────────────────────────────────

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


def _unread_configs(harness: str) -> list[str]:
    """The default user-level file, when a variable moved the config and it still
    holds mnemo's entries (the harness no longer reads it)."""
    spec = spec_for(harness)
    if not config_dir_variable(harness) or spec.config_dir is None:
        return []
    default = paths.home_dir() / spec.config_dir / str(spec.config_file)
    if default == config_path(harness):
        return []
    try:
        document = _read_config(default, spec)
    except DataError:
        return []
    return [str(default)] if document and find_ours(document) else []


def harness_status(harness: str, project: Path | None = None, *,
                   base: Path | None = None, cwd: Path | None = None) -> HarnessStatus:
    """Is mnemo installed for `harness`, does its command reach a working mnemo, and
    will the harness run it (Codex trust, Gemini folder trust of `cwd`)?"""
    from .injections import last_injection

    spec = spec_for(harness)
    path = config_path(harness, project)
    problems: list[str] = []
    injected = last_injection(base or paths.data_dir(), harness)
    if path is None:  # generic: installed when its install was run and not undone
        wrapper = wrapper_path(base)
        recorded = generic_record(base).exists()
        mnemo = _wrapper_target(wrapper) if wrapper.exists() else None
        mnemo_ok = bool(mnemo and os.access(mnemo, os.X_OK))
        if not recorded:
            problems.append("not installed: run `mnemo hooks install --harness generic`")
        elif not wrapper.exists():
            problems.append(f"the wrapper {wrapper} is missing: run `mnemo hooks install "
                            "--harness generic`")
        elif not mnemo_ok:
            problems.append(f"the wrapper points at a missing mnemo ({mnemo})")
        return HarnessStatus(harness=harness, config_path=None, config_exists=False,
                             installed=recorded, events={}, commands=[],
                             wrapper_path=str(wrapper), wrapper_exists=wrapper.exists(),
                             mnemo_path=mnemo, mnemo_exists=mnemo_ok,
                             ok=recorded and wrapper.exists() and mnemo_ok, problems=problems,
                             last_injection=injected)
    try:
        document = _read_config(path, spec)
    except DataError as exc:
        document = None
        problems.append(exc.message)
    found = _find_ours(document or {})
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
    variable = None if project is not None else config_dir_variable(harness)
    unread = [] if project is not None else _unread_configs(harness)
    if document is not None and not found:
        problems.append(f"no mnemo entries in {path}")
    elif document is None and not problems:
        problems.append(f"{path} does not exist")
    for other in unread:
        problems.append(f"mnemo's entries are in {other}, which {harness} does not read while "
                        f"{variable} is set: run `mnemo hooks install --harness {harness}` "
                        f"(writes {path})")
    missing = [spec.event_names[k] for k, v in events.items() if not v]
    if found and missing:
        problems.append(f"missing entries for {', '.join(missing)}")
    if commands and wrapper_file is not None and not wrapper_exists:
        problems.append(f"the hook command runs {wrapper_file}, which does not exist")
    if commands and not mnemo_ok:
        problems.append(f"the hook command does not lead to an existing mnemo ({mnemo})")
    status = HarnessStatus(harness=harness, config_path=str(path),
                           config_exists=document is not None, installed=installed,
                           events=events, commands=commands,
                           wrapper_path=str(wrapper_file) if wrapper_file else None,
                           wrapper_exists=wrapper_exists, mnemo_path=mnemo,
                           mnemo_exists=mnemo_ok, ok=False, problems=problems,
                           config_dir_env=variable, unread_configs=unread,
                           last_injection=injected)
    if spec.positional_trust and found:
        _codex_status(path, document, project, status)
    if harness == "gemini" and found:
        status.folder_trust = gemini_folder_trust(project or cwd or Path.cwd())
    status.ok = installed and mnemo_ok and (wrapper_file is None or wrapper_exists) \
        and status.trusted is not False
    return status
