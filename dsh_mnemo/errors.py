"""The one error family of mnemo's core, and the exit codes it maps to.

The core never prints and never exits: it raises a `MnemoError` carrying the
exit code the CLI should use.  The table below is the single source of the
exit codes that the docs and man page show.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1  # unexpected failure (a bug or an environment problem)
    USAGE = 2  # bad command line (Typer/Click's own code)
    CONFIG = 3  # invalid configuration file or value
    UNBOUND = 4  # the command needs a bound workspace (or a session id)
    REFUSED = 5  # not found, or belongs to another workspace, or refused path
    FILTERED = 6  # the write filter rejected the memory
    BUSY = 7  # a lock or the database stayed busy past the wait
    PENDING = 8  # `--check`: work is pending / `doctor`: action needed
    DATA = 9  # bad data on disk: corrupt marker, index or database


EXIT_CODE_DESCRIPTIONS: dict[ExitCode, str] = {
    ExitCode.OK: "success",
    ExitCode.ERROR: "unexpected error",
    ExitCode.USAGE: "invalid command line",
    ExitCode.CONFIG: "invalid configuration",
    ExitCode.UNBOUND: "no bound workspace (or no session id) for this directory",
    ExitCode.REFUSED: "refused: not found, another workspace's row, or a forbidden path",
    ExitCode.FILTERED: "the memory was rejected by the write filter",
    ExitCode.BUSY: "a lock or the database stayed busy too long",
    ExitCode.PENDING: "work pending (migrate --check) or action needed (doctor, hooks status, "
                      "hooks test, mcp status)",
    ExitCode.DATA: "corrupt or unreadable data on disk",
}


class MnemoError(Exception):
    """Base of every error the core raises; carries an exit code and a hint."""

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, *, hint: str | None = None,
                 exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class ConfigError(MnemoError):
    exit_code = ExitCode.CONFIG


class UnboundError(MnemoError):
    exit_code = ExitCode.UNBOUND


class RefusedError(MnemoError):
    exit_code = ExitCode.REFUSED


class FilteredError(MnemoError):
    exit_code = ExitCode.FILTERED


class BusyError(MnemoError):
    exit_code = ExitCode.BUSY


class DataError(MnemoError):
    exit_code = ExitCode.DATA


def usage_error(message: str, hint: str | None = None) -> MnemoError:
    """A bad command line that only the command can see: exit 2, like Click's own."""
    return MnemoError(message, hint=hint, exit_code=ExitCode.USAGE)
