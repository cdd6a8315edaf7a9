"""Killing `mnemo migrate` at every step: no row is ever lost, a re-run finishes.

The process is stopped with `os._exit` (no cleanup, like a kill) through the
test-only `MNEMO_TEST_FAULT` hook, at each point between two file changes.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from dsh_mnemo import paths
from dsh_mnemo.faults import EXIT_CODE
from dsh_mnemo.migrate import Selection, revert_migration, run_migration
from dsh_mnemo.migrate import journal as journals
from tests.conftest import bind_repo, mnemo_executable
from tests.migrate.conftest import OWNED_UUID, audit, rows_by_key

pytestmark = pytest.mark.e2e

RUN_POINTS = ("after-journal-groups", "after-source-backup", "after-backup",
              "after-rows-journal", "mid-copy", "mid-copy:3", "after-copy-commit",
              "after-copied-journal", "mid-delete", "mid-delete:4", "after-delete-commit")


def mnemo(args: list[str], cwd: Path, fault: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("MNEMO_TEST_FAULT", None)
    if fault:
        env["MNEMO_TEST_FAULT"] = fault
    return subprocess.run([mnemo_executable(), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def lost(before: Counter, after: Counter) -> Counter:
    """Rows of `before` that exist nowhere now (duplicates in flight are fine)."""
    return Counter({k: n - after[k] for k, n in before.items() if after[k] < n})


@pytest.fixture
def repo(dsh_data: Path, projects: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = bind_repo(projects / "owned-repo", OWNED_UUID).path
    monkeypatch.chdir(path)
    return path


@pytest.mark.parametrize("point", RUN_POINTS)
def test_a_killed_run_loses_nothing_and_a_rerun_completes_it(point: str, repo: Path,
                                                             dsh_data: Path):
    before = audit(dsh_data)
    killed = mnemo(["migrate", "run", "--legacy-dsh", "--yes"], repo, fault=point)
    assert killed.returncode == EXIT_CODE, killed.stderr
    assert not lost(before, audit(dsh_data))
    done = mnemo(["migrate", "run", "--legacy-dsh", "--yes", "--json"], repo)
    assert done.returncode == 0, done.stderr
    assert audit(dsh_data) == before
    left = {v[0] for v in rows_by_key(paths.default_db_path(dsh_data),
                                      "working_memory").values()}
    assert not {"dsh_s1", "dsh_s2"} & left
    assert all(journals.load(j, dsh_data).status == "done" for j in journals.all_ids(dsh_data))


@pytest.mark.parametrize("point", ("after-rows-journal", "after-copy-commit", "mid-delete"))
def test_a_killed_revert_loses_nothing_and_reverting_again_completes_it(
        point: str, repo: Path, dsh_data: Path):
    before = audit(dsh_data)
    original = rows_by_key(paths.default_db_path(dsh_data), "working_memory")
    run_migration(Selection(legacy_dsh=True))
    killed = mnemo(["migrate", "revert", "--yes"], repo, fault=point)
    assert killed.returncode == EXIT_CODE, killed.stderr
    assert not lost(before, audit(dsh_data))
    assert revert_migration().status == "reverted"
    assert audit(dsh_data) == before
    assert rows_by_key(paths.default_db_path(dsh_data), "working_memory") == original


@pytest.mark.parametrize("point", ("after-rows-journal", "mid-copy", "after-copy-commit"))
def test_a_run_killed_before_any_move_can_be_reverted_instead(point: str, repo: Path,
                                                              dsh_data: Path):
    """Before its copy committed, the bank never got the tables upstream makes on first
    use (annotations, gists): the revert has nothing of theirs to move back."""
    before = audit(dsh_data)
    killed = mnemo(["migrate", "run", "--legacy-dsh", "--yes"], repo, fault=point)
    assert killed.returncode == EXIT_CODE
    assert revert_migration().status == "reverted"
    assert audit(dsh_data) == before


def test_a_run_killed_before_the_target_exists_is_completed_not_stuck(repo: Path,
                                                                       dsh_data: Path):
    """Killed after the journal names its groups, before the target bank exists.

    The re-run used to exit 9 ("cannot back up ... it does not exist") on
    every try, and `plan --check` kept exiting 8 for the unfinished journal.
    """
    before = audit(dsh_data)
    target = next(iter(journals_targets(repo)))
    assert not target.exists()
    killed = mnemo(["migrate", "run", "--legacy-dsh", "--yes"], repo,
                   fault="after-journal-groups")
    assert killed.returncode == EXIT_CODE, killed.stderr
    assert not target.exists()
    assert mnemo(["migrate", "plan", "--check"], repo).returncode == 8  # unfinished
    done = mnemo(["migrate", "run", "--legacy-dsh", "--yes", "--json"], repo)
    assert done.returncode == 0, done.stderr
    assert audit(dsh_data) == before
    assert all(journals.load(j, dsh_data).status == "done" for j in journals.all_ids(dsh_data))
    assert mnemo(["migrate", "plan", "--legacy-dsh", "--check"], repo).returncode == 0


def journals_targets(repo: Path) -> list[Path]:
    from dsh_mnemo.migrate import plan_migration

    return [Path(g.target_db) for g in plan_migration(Selection(legacy_dsh=True)).groups]


def test_a_restore_killed_halfway_says_so_and_completes_when_run_again(repo: Path,
                                                                      dsh_data: Path):
    """Killed after the first database was restored, before the second: the journal says
    `restoring` (not `done`), nothing reverts it from its journal onto half a restore, and
    `--from-backup` again completes it."""
    before = audit(dsh_data)
    journal_id = run_migration(Selection(legacy_dsh=True)).journal or ""
    killed = mnemo(["migrate", "revert", "--from-backup", "--yes"], repo, fault="after-restore")
    assert killed.returncode == EXIT_CODE, killed.stderr
    assert journals.load(journal_id, dsh_data).status == "restoring"
    for args in (["migrate", "revert", "--yes"], ["migrate", "run", "--legacy-dsh", "--yes"]):
        refused = mnemo(args, repo)
        assert refused.returncode == 5, refused.stderr
        assert "--from-backup" in refused.stderr and "Traceback" not in refused.stderr
    planned = mnemo(["migrate", "plan", "--check"], repo)
    assert planned.returncode == 8 and "--from-backup` completes it" in planned.stderr
    done = mnemo(["migrate", "revert", "--from-backup", "--yes"], repo)
    assert done.returncode == 0, done.stderr
    assert audit(dsh_data) == before
    assert journals.load(journal_id, dsh_data).status == "restored"
    assert not (paths.backups_dir(dsh_data) / journal_id / "before-restore").exists()
