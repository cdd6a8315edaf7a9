"""What every command shares: settings, JSON output, and error mapping."""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from .. import paths
from ..config import Settings, apply_environment, load_settings
from ..errors import ExitCode, MnemoError

JSON_SCHEMA_VERSION = 1

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]

T = TypeVar("T")


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


def settings(*, json_errors: bool = False) -> Settings:
    """Load settings and prepare Mnemosyne's environment (before any import of it).

    A bad config file ends the command here with its message and exit code
    (a `ConfigError` raised outside `run()` would otherwise be a traceback).
    """
    try:
        loaded = load_settings()
    except MnemoError as exc:
        fail(exc, json_errors=json_errors)
        raise  # unreachable: fail() always exits
    apply_environment(loaded, paths.data_dir())
    return loaded


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: to_jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def emit_json(kind: str, payload: Any) -> None:
    """Print one JSON document: `{"schema_version", "kind", ...payload}`."""
    body = to_jsonable(payload)
    if not isinstance(body, dict):
        body = {"items": body}
    document = {"schema_version": JSON_SCHEMA_VERSION, "kind": kind, **body}
    sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
    sys.stdout.flush()


def run(action: Callable[[], T], *, json_errors: bool = False) -> T:
    """Call the core; turn a `MnemoError` into a message and its exit code."""
    try:
        return action()
    except MnemoError as exc:
        fail(exc, json_errors=json_errors)
    except KeyboardInterrupt:
        err.print("mnemo: interrupted")
        raise typer.Exit(130) from None
    except OSError as exc:
        fail(MnemoError(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "),
                        hint="Check the path and its permissions."), json_errors=json_errors)
    raise AssertionError("unreachable")


def fail(exc: MnemoError, *, json_errors: bool = False) -> None:
    if json_errors:
        document = {"schema_version": JSON_SCHEMA_VERSION, "kind": "error",
                    "error": exc.message, "hint": exc.hint,
                    "exit_code": int(exc.exit_code)}
        sys.stdout.write(json.dumps(document, ensure_ascii=False) + "\n")
    err.print(f"[bold red]mnemo:[/] {escape(exc.message)}")
    if exc.hint:
        err.print(f"  {escape(exc.hint)}")
    raise typer.Exit(int(exc.exit_code))


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def exit_with(code: ExitCode) -> None:
    raise typer.Exit(int(code))
