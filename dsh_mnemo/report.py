"""What a command hands back: a report of data, messages and an exit code.

The core never prints.  A command (in `dsh_mnemo.commands`) returns a
`Report`: the data its `--json` envelope carries, the messages a person
should read (notes and warnings the core decided on), and the exit code.
The CLI renders it once, for people with rich or for scripts as JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import ExitCode

# Long operations report progress as (phase, done, total); the CLI draws a bar.
Progress = Callable[[str, int, int], None]


@dataclass
class Message:
    """A line for people: a `note` (standard output) or a `warning` (standard error)."""

    text: str
    level: str = "note"  # "note" | "warning"


@dataclass
class Report:
    kind: str  # the JSON kind (docs/json.md) and the name of its human view
    data: Any  # a dataclass or a dict: the fields of the JSON document
    messages: list[Message] = field(default_factory=list)
    exit_code: ExitCode = ExitCode.OK

    def note(self, text: str) -> Report:
        self.messages.append(Message(text, "note"))
        return self

    def warn(self, text: str) -> Report:
        self.messages.append(Message(text, "warning"))
        return self
