"""`config show|get|set|unset|path`: read and write the settings file.

Every key, its type, default and meaning come from `config.SCHEMA`; this
module only renders them.  None of these commands needs Mnemosyne, so they
never call `settings()` (which would prepare its environment): a broken
config file must still be inspectable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import typer

from .. import config as core
from .. import paths
from .common import JsonOpt, emit_json, escape, out, run

config_app = typer.Typer(
    name="config",
    help="Show, read and change settings (validated against the documented keys).",
    no_args_is_help=True,
)

KeyArg = Annotated[str, typer.Argument(
    metavar="KEY", help="A dotted setting name, e.g. prefetch.top_k (see `mnemo config show`).",
    show_default=False)]


def register(app: typer.Typer) -> None:
    app.add_typer(config_app)


@dataclass
class KeyReport:
    key: str
    value: Any
    default: Any
    source: str  # "file" when the config file sets it, else "default"
    type: str
    choices: list[Any] | None
    doc: str


def type_name(key: core.Key) -> str:
    """The user-facing name of a key's type (also used by the generated docs)."""
    return {bool: "boolean", int: "integer", float: "number", str: "string",
            list: "list"}.get(key.type, key.type.__name__)


def format_value(value: Any) -> str:
    """Render a value the way `config set` accepts it back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _report(name: str) -> KeyReport:
    key = core.KEYS.get(name)
    if key is None:
        raise core.ConfigError(f"unknown key `{name}`",
                               hint=f"Known keys: {', '.join(core.KEYS)}")
    loaded = core.load_settings()
    explicit = core.user_values()
    return KeyReport(key=name, value=loaded[name], default=key.default,
                     source="file" if name in explicit else "default", type=type_name(key),
                     choices=list(key.choices or key.item_choices or []) or None, doc=key.doc)


@config_app.command("show")
def show(json: JsonOpt = False) -> None:
    """List every setting with its value, default and where the value comes from."""
    def collect() -> tuple[core.Settings, list[KeyReport]]:
        loaded = core.load_settings()
        explicit = core.user_values()
        rows = [KeyReport(key=k.name, value=loaded[k.name], default=k.default,
                          source="file" if k.name in explicit else "default",
                          type=type_name(k),
                          choices=list(k.choices or k.item_choices or []) or None, doc=k.doc)
                for k in core.SCHEMA]
        return loaded, rows

    loaded, rows = run(collect, json_errors=json)
    path = paths.config_path()
    if json:
        emit_json("config-show", {"path": str(path), "exists": loaded.source is not None,
                                  "settings": rows})
        return
    from rich.table import Table

    where = str(path) if loaded.source else f"{path} (not created yet: all defaults)"
    out.print(f"config file: {escape(where)}")
    table = Table("key", "value", "default", "source", box=None)
    for row in rows:
        changed = row.source == "file"
        table.add_row(row.key, f"[bold]{escape(format_value(row.value))}[/]" if changed
                      else escape(format_value(row.value)),
                      escape(format_value(row.default)), row.source)
    out.print(table)


@config_app.command("get")
def get(key: KeyArg, json: JsonOpt = False) -> None:
    """Print the value of one setting."""
    report = run(lambda: _report(key), json_errors=json)
    if json:
        emit_json("config-get", report)
        return
    out.print(escape(format_value(report.value)))


@config_app.command("set")
def set_(key: KeyArg,
         value: Annotated[str, typer.Argument(
             metavar="VALUE", show_default=False,
             help="The new value: true/false, a number, a choice, or a comma-separated "
                  "list.")],
         json: JsonOpt = False) -> None:
    """Validate and store one setting in the config file."""
    run(lambda: core.set_value(key, value), json_errors=json)
    report = run(lambda: _report(key), json_errors=json)
    path = paths.config_path()
    if json:
        emit_json("config-set", {"key": key, "value": report.value, "path": str(path)})
        return
    out.print(f"{key} = {escape(format_value(report.value))}  ({escape(str(path))})")


@config_app.command("unset")
def unset(key: KeyArg, json: JsonOpt = False) -> None:
    """Remove one setting from the config file, so its default applies again."""
    run(lambda: core.unset_value(key), json_errors=json)
    report = run(lambda: _report(key), json_errors=json)
    path = paths.config_path()
    if json:
        emit_json("config-unset", {"key": key, "value": report.value, "path": str(path)})
        return
    out.print(f"{key} = {escape(format_value(report.value))} (default)  "
              f"({escape(str(path))})")


@config_app.command("path")
def path_(json: JsonOpt = False) -> None:
    """Print where the config file is (MNEMO_CONFIG overrides it)."""
    path = paths.config_path()
    if json:
        emit_json("config-path", {"path": str(path), "exists": path.exists()})
        return
    out.print(escape(str(path)))
