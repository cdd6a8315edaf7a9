"""`config show|get|set|unset|path`: read and write the settings file.

Every key, its type, default and meaning come from `config.SCHEMA`; this
module only renders them.  None of these commands prepares Mnemosyne's
environment: a broken config file must still be inspectable and repairable.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..config import format_value
from .common import JsonOpt, escape, lazy, out, reports, table, view

core = lazy("dsh_mnemo.commands.config")

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


@config_app.command("show")
@reports
def show(json: JsonOpt = False):
    """List every setting with its value, default and where the value comes from."""
    return core.show()


@view("config-show")
def _shown(data: dict[str, Any]) -> None:
    where = data["path"] if data["exists"] else f"{data['path']} (not created yet: all defaults)"
    out.print(f"config file: {escape(where)}")
    grid = table("key", "value", "default", "source")
    for row in data["settings"]:
        value = escape(format_value(row.value))
        grid.add_row(row.key, f"[bold]{value}[/]" if row.source == "file" else value,
                     escape(format_value(row.default)), row.source)
    out.print(grid)


@config_app.command("get")
@reports
def get(key: KeyArg, json: JsonOpt = False):
    """Print the value of one setting."""
    return core.get(key)


@view("config-get")
def _got(report: Any) -> None:
    out.print(escape(format_value(report.value)))


@config_app.command("set")
@reports
def set_(key: KeyArg,
         value: Annotated[str, typer.Argument(
             metavar="VALUE", show_default=False,
             help="The new value: true/false, a number, a choice, or a comma-separated "
                  "list.")],
         json: JsonOpt = False):
    """Validate and store one setting in the config file."""
    return core.set_(key, value)


@view("config-set")
def _set(data: dict[str, Any]) -> None:
    out.print(f"{data['key']} = {escape(format_value(data['value']))}  "
              f"({escape(data['path'])})")


@config_app.command("unset")
@reports
def unset(key: KeyArg, json: JsonOpt = False):
    """Remove one setting from the config file, so its default applies again."""
    return core.unset(key)


@view("config-unset")
def _unset(data: dict[str, Any]) -> None:
    out.print(f"{data['key']} = {escape(format_value(data['value']))} (default)  "
              f"({escape(data['path'])})")


@config_app.command("path")
@reports
def path_(json: JsonOpt = False):
    """Print where the config file is (MNEMO_CONFIG overrides it)."""
    return core.path()


@view("config-path")
def _path(data: dict[str, Any]) -> None:
    out.print(escape(data["path"]))
