"""What a command hands back: a report of data, messages and an exit code.

The core never prints.  A command (in `dsh_mnemo.commands`) returns a
`Report`: the data its `--json` envelope carries, the messages a person
should read (notes and warnings the core decided on), and the exit code.
The CLI renders it once, for people with rich or for scripts as JSON.
"""

from __future__ import annotations

from collections.abc import Callable

# Long operations report progress as (phase, done, total); the CLI draws a bar.
Progress = Callable[[str, int, int], None]
