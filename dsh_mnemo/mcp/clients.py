"""`mnemo mcp install|uninstall|status`: mnemo's server entry in each MCP client's config.

One entry named `mnemo` that runs `<this mnemo> mcp`, merged into the
client's user-level MCP configuration with the safety of `hooks install`:
the file is parsed first (and left untouched when it cannot be), backed up
before it changes, every other key and server is kept, and a second install
changes nothing.  An entry named `mnemo` that runs something else is
someone else's: it is never replaced or removed.

Where each client keeps its servers, and the variable that moves it:

| client | file | key |
|---|---|---|
| claude-code | `$CLAUDE_CONFIG_DIR/.claude.json`, else `~/.claude.json` | `mcpServers` |
| codex | `$CODEX_HOME/config.toml`, else `~/.codex/config.toml` | `[mcp_servers.mnemo]` |
| gemini | `$GEMINI_CLI_HOME/.gemini/settings.json`, else `~/.gemini/settings.json` | `mcpServers` |
| qwen | `$QWEN_HOME/settings.json`, else `~/.qwen/settings.json` | `mcpServers` |
| cursor | `~/.cursor/mcp.json` | `mcpServers` |
| claude-desktop | `claude_desktop_config.json` in Claude's app-data directory | `mcpServers` |

The JSON files are edited in place (`harnesses.jsonc`: mnemo's entry is
spliced in or out, in the file's own layout, its `//` and `/* */` comments
kept in Gemini's and Qwen's `settings.json`, which those clients read as
JSON with comments; the other clients' files are taken as strict JSON, a
comment there refused like any other error) and Codex's TOML as text (only
mnemo's own tables are appended or cut, `harnesses.tomltext`), so every other
byte stays as it was: uninstall after install gives back the very same file.
The result is parsed again and compared with the original: anything but
exactly "the same document, mnemo's entry added or removed" is refused
before the file is written; so is a JSON file with `mcpServers`, or mnemo's
server in it, written twice.  A file install had to create is noted
(`harnesses.created`) and removed again by uninstall when nothing else came
into it, with the folders made for it.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

from .. import paths
from ..errors import DataError, MnemoError, RefusedError
from ..harnesses import created, jsonc, tomltext
from ..record import field, record
from . import CLIENT_NAMES

SERVER_NAME = "mnemo"
SERVER_ARGS = ("mcp",)
# Environment baked into the entry when set at install time, so the server
# uses the same data and settings as the `mnemo` that installed it.
CARRIED_ENV = ("MNEMO_DATA_DIR", "MNEMO_CONFIG")


@record(frozen=True)
class Client:
    name: str
    title: str
    format: str  # "json" | "toml"
    env_var: str | None  # the variable that moves the client's config directory
    next_steps: tuple[str, ...] = ()
    # The client reads its file as JSON with `//` and `/* */` comments (Gemini CLI and
    # Qwen Code strip them, then JSON.parse); the others' are taken as strict JSON.
    comments: bool = False


CLIENT_LIST: tuple[Client, ...] = (
    Client("claude-code", "Claude Code", "json", "CLAUDE_CONFIG_DIR",
           ("Start a new Claude Code session; `claude mcp list` shows the server. Claude Code "
            "asks before the first call of each tool (or allow them with /permissions).",)),
    Client("codex", "Codex CLI", "toml", "CODEX_HOME",
           ("Start a new Codex session; `codex mcp list` shows the server.",)),
    Client("gemini", "Gemini CLI", "json", "GEMINI_CLI_HOME",
           ("Start a new Gemini CLI session; /mcp lists the server and its tools.",),
           comments=True),
    Client("qwen", "Qwen Code", "json", "QWEN_HOME",
           ("Start a new Qwen Code session; /mcp lists the server and its tools.",),
           comments=True),
    Client("cursor", "Cursor", "json", None,
           ("Restart Cursor (or reload its MCP settings) so it starts the server.",)),
    Client("claude-desktop", "Claude Desktop", "json", None,
           ("Quit and reopen Claude Desktop. It starts servers outside any project, so "
            "every call there needs its `path` argument.",)),
)
CLIENTS: dict[str, Client] = {c.name: c for c in CLIENT_LIST}
NAMES: tuple[str, ...] = tuple(CLIENTS)
assert NAMES == CLIENT_NAMES


@record
class McpInstallResult:
    client: str
    action: str  # "installed" | "updated" | "unchanged" | "removed" | "absent"
    config_path: str
    backup_path: str | None
    entry: dict[str, Any] | None  # the server entry written (install) or found
    next_steps: list[str] = field(default_factory=list)
    # Uninstall removed the file: install had created it and nothing else came into it.
    removed_file: bool = field(default=False, metadata={"json": False})


@record
class McpStatus:
    client: str
    config_path: str
    config_exists: bool
    installed: bool  # an entry named mnemo runs `mnemo mcp`
    entry: dict[str, Any] | None
    mnemo_path: str | None
    mnemo_exists: bool
    ok: bool
    problems: list[str] = field(default_factory=list)


# ─── Where ─────────────────────────────────────────────────────────────────

def spec_for(client: str) -> Client:
    spec = CLIENTS.get(client)
    if spec is None:
        raise RefusedError(f"unknown MCP client {client!r}",
                           hint=f"Known clients: {', '.join(NAMES)}")
    return spec


def _env_dir(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


def config_path(client: str) -> Path:
    """The user-level file holding `client`'s MCP servers, honouring its config-dir variable."""
    spec = spec_for(client)
    home = paths.home_dir()
    moved = _env_dir(spec.env_var) if spec.env_var else None
    if client == "claude-code":
        return (moved or home) / ".claude.json"
    if client == "codex":
        return (moved or home / ".codex") / "config.toml"
    if client == "gemini":
        return (moved or home) / ".gemini" / "settings.json"
    if client == "qwen":
        return (moved or home / ".qwen") / "settings.json"
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    # claude-desktop: Electron's app-data directory.
    if sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = _env_dir("APPDATA") or home / "AppData" / "Roaming"
    else:
        base = _env_dir("XDG_CONFIG_HOME") or home / ".config"
    return base / "Claude" / "claude_desktop_config.json"


def server_entry(client: str) -> dict[str, Any]:
    """The entry mnemo writes: this mnemo's absolute path, `mcp`, and its data/config env."""
    from ..harnesses.install import find_mnemo

    mnemo = find_mnemo()
    if mnemo is None:
        raise MnemoError("cannot find the `mnemo` executable for the MCP entry",
                         hint="Install mnemo so `mnemo` is on PATH, then run this again.")
    entry: dict[str, Any] = {}
    if client == "claude-code":
        entry["type"] = "stdio"
    entry["command"] = mnemo
    entry["args"] = list(SERVER_ARGS)
    env = {name: os.environ[name] for name in CARRIED_ENV if os.environ.get(name)}
    if env:
        entry["env"] = env
    return entry


def is_ours(entry: object) -> bool:
    """An entry that runs `… mnemo mcp` (whatever the path of mnemo)."""
    if not isinstance(entry, dict):
        return False
    command = entry.get("command")
    args = entry.get("args")
    return (isinstance(command, str) and Path(command).name == "mnemo"
            and isinstance(args, list) and list(args[:1]) == list(SERVER_ARGS))


def _backup(path: Path, client: str, base: Path | None) -> Path:
    from ..fsutil import backup_copy

    return backup_copy(path, paths.backups_dir(base) / "mcp", client)


def _read_text(path: Path) -> str | None:
    try:
        return jsonc.read_text(path)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None


def _write_text(path: Path, text: str) -> None:
    from ..fsutil import replace_user_file

    # Claude Code's ~/.claude.json holds its login state: a new one is private
    replace_user_file(path, text, new_mode=0o600 if path.name == ".claude.json" else 0o644)


# ─── JSON clients ──────────────────────────────────────────────────────────

def _parse_json(path: Path, text: str | None, comments: bool) -> dict[str, Any] | None:
    """The document, None when there is no file; refuses, untouched, what the client
    itself could not read (`comments`: it reads JSON with comments)."""
    if text is None:
        return None
    if not text.strip():
        return {}
    try:
        document = jsonc.loads(text, comments=comments)
    except jsonc.JsoncError as exc:
        kind = "JSON (with comments)" if comments else "valid JSON"
        raise DataError(f"{path} is not {kind} ({exc}); it was left untouched",
                        hint="Fix or move the file, then run this again.") from None
    if not isinstance(document, dict):
        raise DataError(f"{path} does not hold a JSON object; it was left untouched")
    return document


def _check_unique(path: Path, text: str | None, comments: bool) -> None:
    """Refuse a file with `mcpServers`, or mnemo's server in it, written twice: the client
    reads the last one only, and taking mnemo's entry out could bring the other back."""
    if text is None or not text.strip():
        return
    root = jsonc.parse(text, comments=comments)
    doubled = ["mcpServers"] if root.keys.count("mcpServers") > 1 else []
    index = root.index_of("mcpServers")
    servers = None if index is None else root.children[index]
    if servers is not None and servers.keys.count(SERVER_NAME) > 1:
        doubled.append(f"mcpServers.{SERVER_NAME}")
    if doubled:
        listed = ", ".join(f"`{key}`" for key in doubled)
        raise DataError(f"{path} has {listed} twice (the client reads only the last one); "
                        "it was left untouched",
                        hint="Merge the two into one, then run this again.")


def _servers(document: dict[str, Any], path: Path) -> dict[str, Any]:
    servers = document.get("mcpServers")
    if servers is None:
        return {}
    if not isinstance(servers, dict):
        raise DataError(f"{path}: `mcpServers` is not an object; it was left untouched")
    return servers


def _json_text(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _checked(path: Path, editor: jsonc.Editor, expected: dict[str, Any]) -> str:
    if not jsonc.same(editor.value, expected):
        raise MnemoError(f"internal error: editing {path} would change more than mnemo's "
                         "entry; the file was left untouched",
                         hint="Please report this with a copy of the file.")
    return editor.text


def _json_install(path: Path, text: str | None, document: dict[str, Any] | None,
                  entry: dict[str, Any], comments: bool) -> tuple[str, str | None]:
    """The file's text with mnemo's server set to `entry`, edited in place (its
    comments kept, where the client allows them), and what `mcpServers` held before
    when it was there but empty (`{}` or `null`, as JSON text)."""
    expected = copy.deepcopy(document) if document is not None else {}
    servers = expected.get("mcpServers")
    found = "{}" if servers == {} else "null" if "mcpServers" in expected \
        and servers is None else None
    if not isinstance(servers, dict):
        servers = expected["mcpServers"] = {}
    servers[SERVER_NAME] = entry
    if text is None or not text.strip():
        return _json_text(expected), False
    editor = jsonc.Editor(text, comments=comments)
    current = editor.value.get("mcpServers")
    if isinstance(current, dict) and SERVER_NAME in current:
        editor.replace(("mcpServers", SERVER_NAME), entry)
    elif isinstance(current, dict):
        editor.append(("mcpServers",), entry, key=SERVER_NAME)
    elif "mcpServers" in editor.value:  # null
        editor.replace(("mcpServers",), {SERVER_NAME: entry})
    else:
        editor.append((), {SERVER_NAME: entry}, key="mcpServers")
    return _checked(path, editor, expected), found


def _json_uninstall(path: Path, text: str, document: dict[str, Any], *,
                    held: str | None, comments: bool) -> tuple[str, dict[str, Any]]:
    """The file's text without mnemo's server, and the document it holds. `mcpServers`,
    left empty, goes, unless it was there before mnemo came: it then gets back what it
    `held` (`{}` or `null`)."""
    expected = copy.deepcopy(document)
    del expected["mcpServers"][SERVER_NAME]
    editor = jsonc.Editor(text, comments=comments)
    editor.delete(("mcpServers", SERVER_NAME))
    if not expected["mcpServers"]:
        if held is None:
            del expected["mcpServers"]
            editor.delete(("mcpServers",))
        else:
            expected["mcpServers"] = json.loads(held)
            editor.replace(("mcpServers",), expected["mcpServers"])
    return _checked(path, editor, expected), expected


# ─── Codex's TOML ──────────────────────────────────────────────────────────

def _parse_toml(path: Path, text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        return tomltext.loads(text)
    except ValueError as exc:
        raise DataError(f"{path} is not valid TOML ({exc}); it was left untouched",
                        hint="Fix or move the file, then run this again.") from None


def _is_our_table(key: tomltext.Key) -> bool:
    """`[mcp_servers.mnemo]` and its sub-tables."""
    return key[:2] == ("mcp_servers", SERVER_NAME)


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a valid TOML basic string


def _toml_tables(entry: dict[str, Any]) -> str:
    lines = [f"[mcp_servers.{SERVER_NAME}]",
             f"command = {_toml_string(entry['command'])}",
             "args = [" + ", ".join(_toml_string(a) for a in entry["args"]) + "]"]
    if entry.get("env"):
        lines.append(f"\n[mcp_servers.{SERVER_NAME}.env]")
        lines += [f"{key} = {_toml_string(value)}" for key, value in entry["env"].items()]
    return "\n".join(lines) + "\n"


def _normalised(document: dict[str, Any]) -> dict[str, Any]:
    """For comparison: an empty `mcp_servers` table means the same as none."""
    document = copy.deepcopy(document)
    if document.get("mcp_servers") == {}:
        del document["mcp_servers"]
    return document


def _toml_edit(path: Path, text: str, document: dict[str, Any],
               entry: dict[str, Any] | None) -> str:
    """The new file text with mnemo's entry replaced by `entry` (None: removed)."""
    new_text = tomltext.cut_tables(text, _is_our_table)
    if entry is not None:
        new_text = tomltext.append_tables(new_text, _toml_tables(entry))
    expected = copy.deepcopy(document)
    servers = expected.setdefault("mcp_servers", {})
    servers.pop(SERVER_NAME, None)
    if entry is not None:
        servers[SERVER_NAME] = entry
    try:
        result = tomltext.loads(new_text)
    except ValueError:
        result = None
    if result is None or _normalised(result) != _normalised(expected):
        raise DataError(
            f"{path}: mnemo's [mcp_servers.{SERVER_NAME}] entry could not be changed without "
            "touching anything else (is it written inline or as dotted keys?); the file was "
            "left untouched",
            hint=f"Edit [mcp_servers.{SERVER_NAME}] by hand (see docs/mcp.md), or remove it "
                 "and run this again.")
    return new_text


# ─── The three operations ──────────────────────────────────────────────────

def _load(client: str, path: Path) -> tuple[str | None, dict[str, Any] | None, Any]:
    """(text, parsed document, the current `mnemo` entry or None)."""
    spec = spec_for(client)
    text = _read_text(path)
    if spec.format == "toml":
        document = _parse_toml(path, text)
        servers = (document or {}).get("mcp_servers", {})
        if not isinstance(servers, dict):
            raise DataError(f"{path}: `mcp_servers` is not a table; it was left untouched")
    else:
        document = _parse_json(path, text, spec.comments)
        servers = _servers(document or {}, path)
    return text, document, servers.get(SERVER_NAME)


def _foreign(path: Path, current: Any) -> RefusedError:
    return RefusedError(
        f"{path} already has an MCP server named {SERVER_NAME!r} that does not run "
        "`mnemo mcp`; it was left untouched",
        hint="Rename or remove that entry, then run this again.")


def install(client: str, *, base: Path | None = None) -> McpInstallResult:
    spec = spec_for(client)
    path = config_path(client)
    entry = server_entry(client)
    text, document, current = _load(client, path)
    if current is not None and not is_ours(current):
        raise _foreign(path, current)
    if spec.format == "json":
        _check_unique(path, text, spec.comments)
    if current == entry:
        # Nothing changed: nothing to restart or reload either.
        return McpInstallResult(client=client, action="unchanged", config_path=str(path),
                                backup_path=None, entry=entry)
    found: str | None = None
    if spec.format == "toml":
        new_text = _toml_edit(path, text or "", document or {}, entry)
    else:
        new_text, found = _json_install(path, text, document, entry, spec.comments)
    backup = _backup(path, client, base) if text is not None else None
    made = created.make_parents(path) if text is None else []
    _write_text(path, new_text)
    if text is None or (spec.format == "json" and not text.strip()):
        created.note_created(path, made, base, blank=text)
    elif spec.format == "json" and current is None:
        created.note_kept(path, {"mcpServers": found}, base)
    return McpInstallResult(client=client, action="updated" if current else "installed",
                            config_path=str(path),
                            backup_path=str(backup) if backup else None, entry=entry,
                            next_steps=list(spec.next_steps))


def uninstall(client: str, *, base: Path | None = None) -> McpInstallResult:
    spec = spec_for(client)
    path = config_path(client)
    text, document, current = _load(client, path)
    if current is None or not is_ours(current):
        # Nothing of mnemo's (a foreign `mnemo` entry is not ours to remove).
        return McpInstallResult(client=client, action="absent", config_path=str(path),
                                backup_path=None, entry=None)
    assert text is not None and document is not None
    if spec.format == "toml":
        new_text = _toml_edit(path, text, document, None)
        empty = not new_text.strip()
    else:
        _check_unique(path, text, spec.comments)
        held = created.kept(path, base).get("mcpServers")
        new_text, after = _json_uninstall(path, text, document, held=held,
                                          comments=spec.comments)
        empty = after == {}
    result = McpInstallResult(client=client, action="removed", config_path=str(path),
                              backup_path=str(_backup(path, client, base)), entry=current)
    undone = created.undo(path, base) if empty else None
    if undone is None:
        _write_text(path, new_text)
    result.removed_file = undone == "removed"
    if spec.format == "json":
        created.note_kept(path, {"mcpServers": None}, base)  # the entry is gone: forget
    return result


def status(client: str) -> McpStatus:
    spec_for(client)
    path = config_path(client)
    problems: list[str] = []
    exists = path.exists()
    try:
        _, _, current = _load(client, path)
    except DataError as exc:
        current, exists = None, False
        problems.append(exc.message)
    ours = is_ours(current)
    mnemo = current.get("command") if ours else None
    mnemo_ok = bool(mnemo and os.path.isfile(mnemo) and os.access(mnemo, os.X_OK))
    if current is not None and not ours:
        problems.append(f"the `{SERVER_NAME}` server in {path} does not run `mnemo mcp`")
    elif current is None and not problems:
        problems.append(f"no `{SERVER_NAME}` MCP server in {path}" if exists
                        else f"{path} does not exist")
    elif ours and not mnemo_ok:
        problems.append(f"the entry runs {mnemo}, which is not an executable file")
    return McpStatus(client=client, config_path=str(path), config_exists=exists,
                     installed=ours, entry=current if isinstance(current, dict) else None,
                     mnemo_path=mnemo, mnemo_exists=mnemo_ok, ok=ours and mnemo_ok,
                     problems=problems)
