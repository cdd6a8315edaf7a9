"""The one output path of every command, and what the command modules share.

A command function parses its arguments, calls one function of
`dsh_mnemo.commands` and returns the `Report` it gets.  `@reports` does the
rest, the same way for every command:

- `--json`: one JSON document on stdout, `{"schema_version", "kind", ...}`;
  the report's messages go to stderr;
- otherwise the kind's *view* (registered with `@view`) draws the data with
  rich, and the messages follow (notes on stdout, warnings on stderr);
- any `MnemoError` — from loading the config file as much as from the work —
  becomes the `error` document (with `--json`) or a message and its hint on
  stderr, and the process exits with the error's code; a report exits with
  the code the core put in it.

A bad command line (an unknown option, a value that is not one of an
option's choices or out of its range, a missing argument) takes the same
path: `Group`, the root command, reports Click's usage errors as a
`MnemoError` of exit code 2, and the commands raise one for what only they
can check (an empty text, options that exclude each other).

So no command can forget to print its errors as JSON, or decide an exit
code of its own.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, Literal

import typer
from rich.console import Console

# Typer's own (vendored) Click raises these; pyproject pins Typer to 0.26.
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer._click.types import StringParamType
from typer.core import TyperGroup
from typer.models import TyperPath

from .. import paths
from ..config import Settings, apply_environment, load_settings
from ..errors import MnemoError, usage_error
from ..report import Progress, Report, error_document, json_document

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


class _LazyModule:
    """A core module imported on first use.

    Each command needs one core module; importing all of them up front
    (migration, doctor, hooks …) would slow every `mnemo` invocation.
    """

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self._name)
        self.__dict__.update(module.__dict__)
        return getattr(module, attr)


def lazy(name: str) -> Any:
    return _LazyModule(name)


def choice(values: Sequence[str]) -> Any:
    """The type of a value that must be one of `values` (a registry's names).

    Typer makes it a choice: a value outside it is a usage error (exit 2),
    and the generated completions offer the values.
    """
    return Literal[tuple(values)]


class _PathType(TyperPath):
    """Typer's path type, but an empty path is a usage error: `Path("")` is the
    current directory, so an unset variable (`--data-dir "$DIR"`) would quietly
    mean wherever the command runs."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and not value:
            self.fail("the path is empty; give `.` for the current directory", param, ctx)
        return super().convert(value, param, ctx)


PATH = _PathType()  # the `click_type` of every path on the command line


class _IdType(StringParamType):
    """Text that is UTF-8: a session id is stored (in a namespace) and compared
    with stored ones, and bytes that are not UTF-8 (lone surrogates once
    decoded) cannot be."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        value = super().convert(value, param, ctx)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # the message names the option (and its variable)
            self.fail(f"{value!r} is not UTF-8 text", param, ctx)
        return value


ID = _IdType()  # the `click_type` of a session id


def settings() -> Settings:
    """Load settings and prepare Mnemosyne's environment (before any import of it)."""
    loaded = load_settings()
    apply_environment(loaded, paths.data_dir())
    return loaded


# ─── Rendering ─────────────────────────────────────────────────────────────

View = Callable[[Any], None]
VIEWS: dict[str, View] = {}


def view(kind: str) -> Callable[[View], View]:
    """Register how a report of `kind` is drawn for people."""
    def register(function: View) -> View:
        VIEWS[kind] = function
        return function
    return register


def emit_json(kind: str, payload: Any) -> None:
    """Print one JSON document: `{"schema_version", "kind", ...payload}`."""
    sys.stdout.write(json.dumps(json_document(kind, payload), ensure_ascii=False, indent=2)
                     + "\n")
    sys.stdout.flush()


def render(report: Report, *, as_json: bool) -> None:
    if as_json:
        emit_json(report.kind, report.data)
        for message in report.messages:
            err.print(escape(message.text))
        return
    VIEWS[report.kind](report.data)
    for message in report.messages:
        if message.level == "warning":
            err.print(f"[yellow]{escape(message.text)}[/]")
        else:
            out.print(escape(message.text))


def fail(exc: MnemoError, *, as_json: bool) -> typer.Exit:
    """Print the error (as the `error` document with --json); the exit to raise."""
    if as_json:
        document = error_document(exc.message, exc.hint, int(exc.exit_code))
        sys.stdout.write(json.dumps(document, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    err.print(f"[bold red]mnemo:[/] {escape(exc.message)}")
    if exc.hint:
        err.print(f"  {escape(exc.hint)}")
    return typer.Exit(int(exc.exit_code))


_JSON_ASKED = "mnemo.json"  # ctx.meta: --json is on the command line


class Group(TyperGroup):
    """The root command: a bad command line is reported as every other error is.

    Click would print its usage and a box; here it is `mnemo: <what is wrong>`
    and a hint on stderr, with `--json` the `error` document on stdout, and
    exit 2, whichever option or argument was wrong and whichever subcommand.
    """

    def make_context(self, info_name: str | None, args: list[str],
                     parent: Any = None, **extra: Any) -> Any:
        as_json = "--json" in args  # read before parsing, which consumes `args`
        try:
            context = super().make_context(info_name, args, parent=parent, **extra)
        except UsageError as exc:
            raise _usage(exc, as_json=as_json) from None
        context.meta[_JSON_ASKED] = as_json
        return context

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:  # the subcommand's own command line
            raise _usage(exc, as_json=json_asked(ctx)) from None


def json_asked(ctx: typer.Context) -> bool:
    """Whether `--json` is on the command line, for a group's callback (whose own
    `--json` is not the subcommand's)."""
    return bool(ctx.meta.get(_JSON_ASKED))


def _usage(exc: UsageError, *, as_json: bool) -> typer.Exit:
    if isinstance(exc, NoArgsIsHelpError):  # a bare `mnemo hooks`: its help, as Click shows it
        raise exc
    message = " ".join(exc.format_message().split())
    message = message[:1].lower() + message[1:]
    command = exc.ctx.command_path if exc.ctx is not None else "mnemo"
    return fail(usage_error(message, f"`{command} --help` shows how to use it."),
                as_json=as_json)


def reports(function: Callable[..., Report | None]) -> Callable[..., None]:
    """Turn a command returning a `Report` into one that renders it and exits."""
    @functools.wraps(function)
    def command(*args: Any, **kwargs: Any) -> None:
        as_json = bool(kwargs.get("json", False))
        try:
            report = function(*args, **kwargs)
        except MnemoError as exc:
            raise fail(exc, as_json=as_json) from None
        except OSError as exc:
            where = f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")
            raise fail(MnemoError(where, hint="Check the path and its permissions."),
                       as_json=as_json) from None
        except KeyboardInterrupt:
            err.print("mnemo: interrupted")
            raise typer.Exit(130) from None
        if report is None:  # the command ended on purpose without a report
            return
        render(report, as_json=as_json)
        if report.exit_code:
            raise typer.Exit(int(report.exit_code))
    return command


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def removed_file_line(config_path: str) -> str:
    """What `hooks uninstall` and `mcp uninstall` say when they removed the file mnemo
    had created: through a symlink, that is the file it points at (the link stays)."""
    from pathlib import Path

    if Path(config_path).is_symlink():
        return ("  mnemo had created the file this link points at and nothing else was in "
                "it: removed it (the link stays)")
    return "  mnemo had created that file and nothing else was in it: removed it"


def table(*columns: str, **options: Any) -> Any:
    """A borderless rich table that folds long cells rather than cutting them."""
    from rich.table import Table

    grid = Table(*columns, box=None, pad_edge=False, **options)
    for column in grid.columns:
        column.overflow = "fold"
    return grid


@contextmanager
def progress_bar(*, enabled: bool, one_line: bool = False) -> Iterator[Progress | None]:
    """A rich progress bar on a terminal; nothing otherwise.

    One bar per phase, or with `one_line` a single bar whose label follows
    the phase (for a loop over many items, each its own "phase").
    """
    if not enabled or not err.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    bar = Progress(TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(),
                   console=err, transient=True)
    tasks: dict[str, Any] = {}

    def update(phase: str, done: int, total: int) -> None:
        key = "" if one_line else phase
        if key not in tasks:
            tasks[key] = bar.add_task(escape(phase), total=total)
        bar.update(tasks[key], completed=done, total=total, description=escape(phase))

    with bar:
        yield update
