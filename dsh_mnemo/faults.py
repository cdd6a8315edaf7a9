"""Test-only fault injection: die at a named point of a migration, an index change or
the resident server.

`MNEMO_TEST_FAULT=<point>` (or `<point>:<n>` for the n-th time the point is
reached) makes the process call `os._exit(86)` there, with no cleanup, as a
kill would; `*:<n>` dies at the n-th point reached, whichever it is.  The
crash-safety tests use it to stop `mnemo migrate run` (and `revert`, `adopt`,
`rebind`, `bind`) between every two steps that change a file.  It is not a
user feature: nothing else reads this variable and it is documented as
test-only in docs/migration.md.
"""

from __future__ import annotations

import os

ENV = "MNEMO_TEST_FAULT"
EXIT_CODE = 86

POINTS = (
    "after-journal-groups",  # journal saved with its groups, target schemas not created
    "after-source-backup",  # source snapshot written, target not yet
    "after-backup",  # both snapshots and the journal header written
    "after-rows-journal",  # row list and target keys journaled, target txn open
    "mid-copy",  # first chunk copied into the target, not committed
    "after-copy-commit",  # target committed, journal still says "copying"
    "after-copied-journal",  # journal says "copied", source untouched
    "mid-delete",  # first table deleted from the source, not committed
    "after-delete-commit",  # source committed, journal not yet "done"
    "after-restore",  # --from-backup: one database restored, the journal says "restoring"
    "index-after-write",  # index written, its last good copy not yet
    "index-after-set-aside",  # corrupt index kept aside, rebuilt index not yet written
    "bind-after-marker",  # bind: marker written, index entry not yet
    "adopt-after-index",  # adopt: index entry written, marker not yet
    "rebind-after-index",  # rebind: index switched, marker not yet
    "import-after-write",  # import: a batch's rows written, their time and ledger not yet
    "server-after-answer",  # resident server: a hook answered, its after-work still queued
)

_seen: dict[str, int] = {}


def fault(point: str) -> None:
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    name, _, nth = wanted.partition(":")
    if name not in (point, "*"):
        return
    _seen[name] = _seen.get(name, 0) + 1
    if _seen[name] >= (int(nth) if nth.isdigit() else 1):
        os._exit(EXIT_CODE)
