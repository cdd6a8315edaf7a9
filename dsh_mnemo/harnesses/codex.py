"""Codex CLI's hook trust: which entries of a hooks.json it will run.

Codex runs a user- or project-level hook only when its `config.toml` holds,
for that exact entry,

    [hooks.state."<hooks file>:<event label>:<group index>:<handler index>"]
    trusted_hash = "sha256:…"

and the hash matches the entry as it is now.  An entry with no record, or
with a record of another hash (the command or timeout changed, or the entry
moved to another position), is skipped by `codex exec` without a word; the
interactive `/hooks` review writes the records.  The hash is sha256 over the
compact, key-sorted JSON of `{"event_name", "matcher"?, "hooks": [{"type",
"command", "timeout", "async", "statusMessage"?}]}` with the effective
timeout (600 when absent, at least 1, SessionEnd at most 3).  Facts and how
they were established: docs/harnesses-real.md.

`assess` reports each entry's state; `trust` writes records for the entries
it is given (mnemo's own, when the user asks with `--trust`), and
`without_trust` takes out the records that trust them (when mnemo's entries
are uninstalled), cutting only their tables from the file's text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..record import record

EVENT_LABELS = {
    "PreToolUse": "pre_tool_use", "PermissionRequest": "permission_request",
    "PostToolUse": "post_tool_use", "PreCompact": "pre_compact", "PostCompact": "post_compact",
    "SessionStart": "session_start", "UserPromptSubmit": "user_prompt_submit",
    "SubagentStart": "subagent_start", "SubagentStop": "subagent_stop", "Stop": "stop",
    "SessionEnd": "session_end",
}
DEFAULT_TIMEOUT = 600
SESSION_END_MAX_TIMEOUT = 3

TRUSTED, UNTRUSTED, CHANGED, DISABLED = "trusted", "untrusted", "changed", "disabled"


def effective_timeout(event: str, handler: dict[str, Any]) -> int:
    timeout = handler.get("timeout", handler.get("timeoutSec"))
    seconds = max(1, int(timeout)) if isinstance(timeout, (int, float)) \
        and not isinstance(timeout, bool) else DEFAULT_TIMEOUT
    if event == "SessionEnd":
        seconds = min(seconds, SESSION_END_MAX_TIMEOUT)
    return seconds


def trusted_hash(event: str, handler: dict[str, Any], matcher: str | None = None) -> str:
    """The `trusted_hash` Codex expects for one command handler under `event`."""
    normalized: dict[str, Any] = {"type": "command", "command": handler.get("command"),
                                  "timeout": effective_timeout(event, handler),
                                  "async": bool(handler.get("async"))}
    if handler.get("statusMessage") is not None:
        normalized["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": EVENT_LABELS[event], "hooks": [normalized]}
    if matcher is not None:
        identity["matcher"] = matcher
    data = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()


def trust_key(hooks_file: Path, event: str, group: int, handler: int) -> str:
    return f"{hooks_file}:{EVENT_LABELS[event]}:{group}:{handler}"


@record
class EntryTrust:
    event: str  # Codex's event name
    group: int
    handler: int
    key: str
    command: str
    ours: bool
    state: str  # trusted | untrusted | changed | disabled


@record
class Entry:
    event: str
    group: int
    handler: int
    spec: dict[str, Any]
    matcher: str | None


def command_entries(document: dict[str, Any]) -> list[Entry]:
    """Every command handler of a hooks.json document, with its position."""
    found: list[Entry] = []
    hooks = document.get("hooks")
    if not isinstance(hooks, dict):
        return found
    for event, groups in hooks.items():
        if event not in EVENT_LABELS or not isinstance(groups, list):
            continue
        for group_index, group in enumerate(groups):
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                continue
            matcher = group.get("matcher") if isinstance(group.get("matcher"), str) else None
            for handler_index, handler in enumerate(group["hooks"]):
                if isinstance(handler, dict) and handler.get("type", "command") == "command":
                    found.append(Entry(event, group_index, handler_index, handler, matcher))
    return found


def read_state(config: Path) -> dict[str, dict[str, Any]]:
    """The `[hooks.state]` records of a Codex config.toml (empty when it is absent)."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        text = config.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {config}: {exc}") from None
    try:
        document = tomlkit.parse(text).unwrap()
    except TOMLKitError as exc:
        raise DataError(f"{config} is not valid TOML ({exc})") from None
    hooks = document.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    if not isinstance(state, dict):
        return {}
    return {str(k): v for k, v in state.items() if isinstance(v, dict)}


def _key_files(hooks_file: Path) -> list[Path]:
    """The spellings of the hooks file a record may use: as given (the one Codex
    uses, and the one written), then resolved."""
    spellings = [hooks_file.absolute()]
    resolved = hooks_file.resolve()
    if resolved != spellings[0]:
        spellings.append(resolved)
    return spellings


def assess(hooks_file: Path, document: dict[str, Any], config: Path,
           is_ours: Any) -> list[EntryTrust]:
    """The trust state of every command entry in `document` (read from `hooks_file`)."""
    state = read_state(config)
    result: list[EntryTrust] = []
    for entry in command_entries(document):
        expected = trusted_hash(entry.event, entry.spec, entry.matcher)
        keys = [trust_key(f, entry.event, entry.group, entry.handler)
                for f in _key_files(hooks_file)]
        record = next((state[k] for k in keys if k in state), None)
        if record is None:
            verdict = UNTRUSTED
        elif record.get("enabled") is False:
            verdict = DISABLED
        elif record.get("trusted_hash") == expected:
            verdict = TRUSTED
        else:
            verdict = CHANGED
        result.append(EntryTrust(event=entry.event, group=entry.group, handler=entry.handler,
                                 key=keys[0], command=str(entry.spec.get("command", "")),
                                 ours=bool(is_ours(entry.spec)), state=verdict))
    return result


def project_trusted(config: Path, project: Path) -> bool:
    """Is `project` trusted in the user's config.toml (`[projects."<dir>"]`)?"""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        document = tomlkit.parse(config.read_text(encoding="utf-8")).unwrap()
    except (OSError, UnicodeDecodeError, TOMLKitError):
        return False
    projects = document.get("projects")
    if not isinstance(projects, dict):
        return False
    for spelling in {str(project.absolute()), str(project.resolve())}:
        entry = projects.get(spelling)
        if isinstance(entry, dict) and entry.get("trust_level") == "trusted":
            return True
    return False


def trust(config: Path, hooks_file: Path, entries: Iterable[Entry]) -> list[str]:
    """Write (or update) the records that trust `entries` as they are now.

    Only `trusted_hash` is written; any other field of an existing record
    (`enabled`) is kept.  New records are appended as tables at the end of the
    text (`tomltext`: every other byte stays, and `without_trust` can cut them
    out again exactly); an existing record is updated where it is.  Returns the
    keys that changed; the file is left untouched when none did.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    from .jsonc import read_text

    try:
        text = read_text(config)
    except FileNotFoundError:
        text = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {config}: {exc}") from None
    try:
        document = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise DataError(f"{config} is not valid TOML ({exc}); it was left untouched") from None
    hooks = document.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise DataError(f"{config}: `hooks` is not a table; it was left untouched")
    state = hooks.get("state") if hooks is not None else None
    if state is not None and not isinstance(state, dict):
        raise DataError(f"{config}: `hooks.state` is not a table; it was left untouched")
    existing = {str(k): k for k in state or {}}
    changed: list[str] = []
    added: dict[str, str] = {}
    for entry in entries:
        digest = trusted_hash(entry.event, entry.spec, entry.matcher)
        keys = [trust_key(f, entry.event, entry.group, entry.handler)
                for f in _key_files(hooks_file)]
        key = next((k for k in keys if k in existing), keys[0])
        record = state.get(key) if state is not None else None
        if isinstance(record, dict):
            if record.get("trusted_hash") != digest:
                record["trusted_hash"] = digest
                changed.append(key)
        elif key not in added:
            added[key] = digest
            changed.append(key)
    if not changed:
        return changed
    new_text = tomlkit.dumps(document) if len(changed) > len(added) else text
    if added:
        new_text = _append_records(config, new_text, added)
    from ..fsutil import replace_user_file

    config.parent.mkdir(parents=True, exist_ok=True)
    replace_user_file(config, new_text, new_mode=0o600)
    return changed


def _append_records(config: Path, text: str, added: dict[str, str]) -> str:
    """`text` with the records `added` (key: hash) as tables at its end; through tomlkit
    where such tables would not read as they should (a `[hooks.state]` written inline,
    say)."""
    import tomlkit

    from . import tomltext

    block = "\n".join(f"[hooks.state.{_toml_string(key)}]\n"
                      f"trusted_hash = {_toml_string(digest)}\n"
                      for key, digest in added.items())
    appended = tomltext.append_tables(text, block)
    expected = tomltext.loads(text)
    hooks = expected.setdefault("hooks", {})
    records = hooks.setdefault("state", {}) if isinstance(hooks, dict) else None
    if isinstance(records, dict):
        records.update({key: {"trusted_hash": digest} for key, digest in added.items()})
    try:
        if tomltext.loads(appended) == expected:
            return appended
    except ValueError:
        pass
    from tomlkit.exceptions import TOMLKitError
    from tomlkit.items import InlineTable

    def child(parent: Any, *, super_table: bool) -> Any:  # inline in an inline table
        return tomlkit.inline_table() if isinstance(parent, InlineTable) \
            else tomlkit.table(is_super_table=super_table)

    try:
        document: Any = tomlkit.parse(text)
        if "hooks" not in document:
            document["hooks"] = tomlkit.table(is_super_table=True)
        if "state" not in document["hooks"]:
            document["hooks"]["state"] = child(document["hooks"], super_table=True)
        state = document["hooks"]["state"]
        for key, digest in added.items():
            table = child(state, super_table=False)
            table["trusted_hash"] = digest
            if not isinstance(table, InlineTable):
                table.add(tomlkit.nl())
            state[key] = table
        return tomlkit.dumps(document)
    except (TOMLKitError, ValueError, TypeError) as exc:
        raise DataError(f"cannot add trust records to {config} ({exc}); it was "
                        "left untouched") from None


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a valid TOML basic string


def _is_state(key: tuple[str, ...]) -> bool:
    return len(key) == 3 and key[:2] == ("hooks", "state")


def _pruned(document: dict[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """`document` without the `[hooks.state]` records `keys` (nor, then empty, the
    `state` and `hooks` tables)."""
    document = dict(document)
    hooks = document.get("hooks")
    if not isinstance(hooks, dict):
        return document
    hooks = document["hooks"] = dict(hooks)
    state = hooks.get("state")
    if isinstance(state, dict):
        drop = set(keys)
        state = hooks["state"] = {k: v for k, v in state.items() if k not in drop}
        if not state:
            del hooks["state"]
    if not hooks:
        del document["hooks"]
    return document


def without_trust(config: Path, hooks_file: Path,
                  entries: Iterable[Entry]) -> tuple[list[str], str | None]:
    """The records that trust `entries` exactly as they are (whoever wrote them), and
    the text of `config` without them; ([], None) when there is none.

    Only those records' tables are cut from the text (`tomltext`), so every other
    byte stays, and records that `trust` appended come out leaving the file as it
    was before; a record written in another shape (dotted keys, an inline table) is
    taken out by tomlkit instead.
    """
    from . import tomltext

    state = read_state(config)
    keys: list[str] = []
    for entry in entries:
        digest = trusted_hash(entry.event, entry.spec, entry.matcher)
        for spelling in _key_files(hooks_file):
            key = trust_key(spelling, entry.event, entry.group, entry.handler)
            record = state.get(key)
            if record is not None and record.get("trusted_hash") == digest and key not in keys:
                keys.append(key)
    if not keys:
        return [], None
    from .jsonc import read_text

    text = read_text(config)
    expected = _pruned(tomltext.loads(text), keys)
    new_text = tomltext.cut_tables(text, lambda key: _is_state(key) and key[2] in keys)
    try:
        same = _pruned(tomltext.loads(new_text), ()) == expected
    except ValueError:
        same = False
    if not same:
        import tomlkit
        from tomlkit.exceptions import TOMLKitError

        try:
            document: Any = tomlkit.parse(text)
            state_table = document["hooks"]["state"]
            for key in keys:
                del state_table[key]
            if not state_table:
                del document["hooks"]["state"]
            if not document["hooks"]:
                del document["hooks"]
            new_text = tomlkit.dumps(document)
        except (TOMLKitError, KeyError, TypeError) as exc:
            raise DataError(f"cannot take mnemo's trust records out of {config} ({exc})") \
                from None
    return keys, new_text
