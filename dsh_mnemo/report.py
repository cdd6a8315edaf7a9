"""What a command hands back: a report of data, messages and an exit code.

The core never prints.  A command (in `dsh_mnemo.commands`) returns a
`Report`: the data its `--json` envelope carries, the messages a person
should read (notes and warnings the core decided on), and the exit code.
The CLI renders it once, for people with rich or for scripts as JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import record as records
from .errors import ExitCode
from .record import field, record

# Long operations report progress as (phase, done, total); the CLI draws a bar.
Progress = Callable[[str, int, int], None]


@record
class Message:
    """A line for people: a `note` (standard output) or a `warning` (standard error)."""

    text: str
    level: str = "note"  # "note" | "warning"


@record
class Report:
    kind: str  # the JSON kind (docs/json.md) and the name of its human view
    data: Any  # a record or a dict: the fields of the JSON document
    messages: list[Message] = field(default_factory=list)
    exit_code: ExitCode = ExitCode.OK

    def note(self, text: str) -> Report:
        self.messages.append(Message(text, "note"))
        return self

    def warn(self, text: str) -> Report:
        self.messages.append(Message(text, "warning"))
        return self


# Version of the JSON contracts (docs/json.md); bumped on any incompatible change.
JSON_SCHEMA_VERSION = 1


def to_jsonable(value: Any) -> Any:
    """Records (`dsh_mnemo.record`), dicts, lists and paths as plain JSON values.

    A record field with `metadata={"json": False}` (a vector, say) is left out.
    """
    if records.is_record(value):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in records.fields(value)
                if f.metadata.get("json", True)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def json_document(kind: str, data: Any) -> dict[str, Any]:
    """The versioned envelope `{"schema_version", "kind", ...data}` of a report."""
    body = to_jsonable(data)
    if not isinstance(body, dict):
        body = {"items": body}
    return {"schema_version": JSON_SCHEMA_VERSION, "kind": kind, **body}


def error_document(message: str, hint: str | None, exit_code: int) -> dict[str, Any]:
    return {"schema_version": JSON_SCHEMA_VERSION, "kind": "error", "error": message,
            "hint": hint, "exit_code": exit_code}
