"""Moving rows out of the default database: plan, backup, copy-verify-delete, revert.

See `api` for the commands' semantics, `engine` for the move itself,
`schema` for how tables are classified, `journal` for what is recorded,
`retention` for how long the backups are kept.
"""

from __future__ import annotations

from .api import (
    Plan,
    PlanGroup,
    PlanNamespace,
    RevertResult,
    RunResult,
    Selection,
    plan_migration,
    revert_migration,
    run_migration,
)

__all__ = ["Plan", "PlanGroup", "PlanNamespace", "RevertResult", "RunResult", "Selection",
           "plan_migration", "revert_migration", "run_migration"]
