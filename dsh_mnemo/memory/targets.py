"""Where a memory goes and where a recall reads: one namespace in one bank.

The storage layout (docs/architecture.md): each bound workspace has its own
bank, global memories live in the `global` bank, and the default bank keeps
legacy rows and the session rows of unbound directories.  A `Target` names
one namespace in one bank; `write_target` and `read_target` turn a resolved
`MemoryContext` into one, or refuse.
"""

from __future__ import annotations

from pathlib import Path

from .. import paths
from ..errors import RefusedError, UnboundError
from ..record import record
from ..workspace.context import REASON_NO_SESSION, MemoryContext
from ..workspace.identity import session_namespace

GLOBAL_SESSION = "global"
LEVELS = ("session", "workspace", "global")


@record(frozen=True)
class Target:
    """One namespace in one bank."""

    bank: str
    namespace: str
    level: str  # "session" | "workspace" | "global"

    def db_path(self, base: Path | None = None) -> Path:
        return paths.bank_db_path(self.bank, base)

    @property
    def scope(self) -> str:
        """Upstream's scope column: only the literal 'global' crosses namespaces."""
        return "global" if self.level == "global" else "session"


GLOBAL_TARGET = Target(bank=paths.GLOBAL_BANK, namespace=GLOBAL_SESSION, level="global")


def bank_target(bank: str, namespace: str) -> Target:
    """The target of a namespace found in a bank (for consolidation of what is due)."""
    return Target(bank=bank, namespace=namespace,
                  level="global" if bank == paths.GLOBAL_BANK else "workspace")


def write_target(ctx: MemoryContext, level: str | None = None) -> Target:
    """Where a write at `level` (default: the context's mode) goes."""
    level = level or ctx.mode
    if level not in LEVELS:
        raise RefusedError(f"unknown scope {level!r}; use session, workspace or global")
    if level == "global":
        return GLOBAL_TARGET
    if level == "workspace":
        if ctx.workspace is None:
            raise UnboundError(
                "this directory is not in a bound workspace; nothing was written",
                hint="Run `mnemo bind` in the project, or use --scope global.")
        return Target(bank=ctx.workspace.bank, namespace=ctx.workspace.namespace,
                      level="workspace")
    if ctx.mode != "session":
        # Only session recall mode reads a session's own namespace: written here, the
        # memory could never be recalled or forgotten (as `auto_write_scope` refuses).
        raise RefusedError(
            "a session-scoped memory is read only in session recall mode; with "
            f"recall_mode: {ctx.mode} it could never be recalled; nothing was written",
            hint="Use --scope workspace (every session of this workspace recalls it), or "
                 "`mnemo config set recall_mode session`.")
    if not ctx.session_id:
        raise UnboundError("a session-scoped memory needs a session id",
                           hint="Pass --session ID.")
    bank = ctx.workspace.bank if ctx.workspace else "default"
    return Target(bank=bank, namespace=session_namespace(ctx.session_id), level="session")


def read_target(ctx: MemoryContext) -> Target:
    """The context's own namespace; raises when the context has none."""
    if not ctx.bound or ctx.namespace is None or ctx.bank is None:
        if ctx.reason == REASON_NO_SESSION:
            raise UnboundError("session recall mode needs a session id",
                               hint="Pass --session ID, or set recall_mode: workspace.")
        raise UnboundError("this directory is not in a bound workspace; no memory is read here",
                           hint="Run `mnemo bind` in the project root.")
    return Target(bank=ctx.bank, namespace=ctx.namespace, level=ctx.mode)
