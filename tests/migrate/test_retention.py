"""Migration snapshots are pruned by a documented policy, and `mnemo backups` shows them.

Snapshots hold every row as it was, forgotten rows included; they used to be
kept forever.  A pruned run stays revertible from its journal, not from its
backups, and both the listing and `revert --from-backup` say so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_mnemo import paths
from dsh_mnemo.cli import app
from dsh_mnemo.errors import DataError, ExitCode, RefusedError
from dsh_mnemo.faults import EXIT_CODE
from dsh_mnemo.migrate import Selection, retention, revert_migration, run_migration
from dsh_mnemo.migrate import journal as journals
from dsh_mnemo.migrate.retention import Policy
from tests.conftest import bind_repo, configure, mnemo_executable
from tests.migrate.conftest import OWNED_UUID, audit, rows_by_key

runner = CliRunner()
KEEP_ALL = Policy(keep_days=0, keep_migrations=0)


@pytest.fixture
def repo(dsh_data: Path, projects: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = bind_repo(projects / "owned-repo", OWNED_UUID).path
    monkeypatch.chdir(path)
    return path


def three_runs(policy: Policy = KEEP_ALL) -> list[str]:
    """Three migrations, oldest first (each takes its own snapshots)."""
    ids = []
    for selection in (Selection(sessions=["dsh_s1"]), Selection(sessions=["dsh_s2"]),
                      Selection(default_to_global=True)):
        result = run_migration(selection, policy=policy)
        assert result.status == "moved"
        ids.append(result.journal)
    return ids


def backup_folder(data: Path, journal_id: str) -> Path:
    return paths.backups_dir(data) / journal_id


def age(data: Path, journal_id: str, days: float) -> None:
    """Make a run look `days` old."""
    journal = journals.load(journal_id, data)
    journal.created_at = journals.now_ms() - int(days * retention.DAY_MS)
    journal.save()


def cli_json(*args: str, code: int = 0) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def test_a_run_prunes_the_snapshots_of_runs_beyond_the_newest_n(repo: Path, dsh_data: Path):
    first, second, third = three_runs()
    assert all(backup_folder(dsh_data, j).is_dir() for j in (first, second, third))
    fourth = run_migration(Selection(legacy_dsh=True), policy=Policy(30, 2))
    assert fourth.status == "nothing-to-do"  # nothing moved: nothing pruned either
    again = run_migration(Selection(sessions=["dsh_v2_session_s9"]), policy=Policy(30, 2))
    assert again.pruned_backups == [second, first]
    assert not backup_folder(dsh_data, first).exists()
    assert not backup_folder(dsh_data, second).exists()
    assert backup_folder(dsh_data, third).is_dir()
    assert backup_folder(dsh_data, again.journal or "").is_dir()  # its own: always kept
    assert journals.load(first, dsh_data).backups_pruned_at


def test_old_snapshots_are_pruned_by_age(repo: Path, dsh_data: Path):
    first, second, third = three_runs()
    age(dsh_data, first, 45)
    age(dsh_data, second, 31)
    result = retention.prune(dsh_data, Policy(keep_days=30, keep_migrations=10))
    assert [s.journal for s in result.pruned] == [second, first]
    assert result.kept == 1 and result.freed_bytes > 0
    assert [s.journal for s in retention.inventory(dsh_data) if s.exists] == [third]


def test_a_pruned_run_is_revertible_from_its_journal_not_from_its_backups(
        repo: Path, dsh_data: Path):
    original = rows_by_key(paths.default_db_path(dsh_data), "working_memory")
    before = audit(dsh_data)
    first, second, third = three_runs()
    retention.prune(dsh_data, older_than_days=0)
    listed = {s["journal"]: s for s in cli_json("backups")["backups"]}
    assert listed[first]["state"] == "pruned" and not listed[first]["from_backup"]
    assert listed[first]["revert_command"] == f"mnemo migrate revert --journal {first}"
    assert listed[first]["pruned_at"] and not listed[first]["exists"]
    with pytest.raises(RefusedError) as caught:
        revert_migration(first, from_backup=True)
    assert "pruned" in caught.value.message
    assert f"mnemo migrate revert --journal {first}" in (caught.value.hint or "")
    result = runner.invoke(app, ["migrate", "revert", "--journal", first, "--from-backup",
                                 "--yes"])
    assert result.exit_code == ExitCode.REFUSED and "pruned" in result.stderr
    for journal_id in (third, second, first):
        assert revert_migration(journal_id).status == "reverted"
    assert audit(dsh_data) == before
    assert rows_by_key(paths.default_db_path(dsh_data), "working_memory") == original


def test_the_listing_says_what_retention_does_with_each_set(repo: Path, dsh_data: Path):
    first, second, third = three_runs()
    age(dsh_data, first, 40)
    configure(backups__keep_days=30, backups__keep_migrations=10)
    document = cli_json("backups")
    assert document["policy"] == {"keep_days": 30, "keep_migrations": 10}
    states = {s["journal"]: s["state"] for s in document["backups"]}
    assert states == {first: "due", second: "kept", third: "kept"}
    assert [s["journal"] for s in document["backups"]] == [third, second, first]
    assert document["due"] == 1
    assert document["bytes"] == sum(s["bytes"] for s in document["backups"]) > 0
    entry = document["backups"][0]
    assert entry["from_backup"] and {f["database"] for f in entry["files"]} == {
        str(paths.default_db_path(dsh_data)), str(paths.bank_db_path("global", dsh_data))}
    human = runner.invoke(app, ["backups"])
    assert human.exit_code == 0 and first in human.stdout and "due" in human.stdout
    assert "backups prune" in human.stdout


def test_prune_dry_run_older_than_and_the_configured_policy(repo: Path, dsh_data: Path):
    first, second, third = three_runs()
    configure(backups__keep_migrations=1)
    dry = cli_json("backups", "prune", "--dry-run")
    assert dry["dry_run"] and [s["journal"] for s in dry["pruned"]] == [second, first]
    assert all(s["state"] == "due" for s in dry["pruned"])
    assert all(backup_folder(dsh_data, j).is_dir() for j in (first, second, third))
    done = cli_json("backups", "prune", "--yes")
    assert [s["journal"] for s in done["pruned"]] == [second, first]
    assert all(s["state"] == "pruned" and not s["exists"] for s in done["pruned"])
    assert done["kept"] == 1
    everything = cli_json("backups", "prune", "--older-than", "0", "--yes")
    assert [s["journal"] for s in everything["pruned"]] == [third]
    assert not any(p.name != "hooks" for p in paths.backups_dir(dsh_data).iterdir())
    assert cli_json("backups", "prune", "--yes")["pruned"] == []
    bad = runner.invoke(app, ["backups", "prune", "--older-than", "-1"])
    assert bad.exit_code == ExitCode.USAGE and "Traceback" not in bad.output


def test_a_migrate_run_from_the_command_line_applies_the_configured_policy(
        repo: Path, dsh_data: Path):
    configure(backups__keep_migrations=1)
    first = cli_json("migrate", "run", "--session", "dsh_s1", "--yes")
    assert first["pruned_backups"] == []
    second = cli_json("migrate", "run", "--session", "dsh_s2", "--yes")
    assert second["pruned_backups"] == [first["journal"]]
    configure(backups__keep_migrations=0, backups__keep_days=0)  # keep everything
    third = cli_json("migrate", "run", "--default-to-global", "--yes")
    assert third["pruned_backups"] == []
    assert backup_folder(dsh_data, second["journal"]).is_dir()


@pytest.mark.e2e
def test_an_unfinished_run_keeps_its_snapshots_whatever_the_policy(repo: Path, dsh_data: Path):
    env = dict(os.environ, MNEMO_TEST_FAULT="after-copy-commit")
    killed = subprocess.run([mnemo_executable(), "migrate", "run", "--legacy-dsh", "--yes"],
                            cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode == EXIT_CODE, killed.stderr
    (unfinished,) = journals.unfinished(dsh_data)
    age(dsh_data, unfinished.id, 400)
    result = retention.prune(dsh_data, older_than_days=0)
    assert result.pruned == []
    (entry,) = retention.inventory(dsh_data)
    assert entry.state == "protected" and backup_folder(dsh_data, unfinished.id).is_dir()
    # Finishing it (the next run does) makes it an ordinary, prunable set.
    assert run_migration(Selection(legacy_dsh=True), policy=KEEP_ALL).resumed \
        == [unfinished.id]
    assert [s.journal for s in retention.prune(dsh_data, older_than_days=0).pruned] \
        == [unfinished.id]


def test_a_prune_killed_after_marking_the_journal_is_finished_by_the_next(
        repo: Path, dsh_data: Path):
    (only,) = three_runs()[:1]
    journal = journals.load(only, dsh_data)
    journal.backups_pruned_at = journals.now_ms()  # marked, folder not yet deleted
    journal.save()
    (entry,) = [s for s in retention.inventory(dsh_data) if s.journal == only]
    assert entry.state == "due" and not entry.from_backup
    with pytest.raises(RefusedError, match="pruned"):
        revert_migration(only, from_backup=True)
    assert [s.journal for s in retention.prune(dsh_data, KEEP_ALL).pruned] == [only]
    assert not backup_folder(dsh_data, only).exists()


def test_a_missing_snapshot_restores_nothing_rather_than_half(repo: Path, dsh_data: Path):
    result = run_migration(Selection(legacy_dsh=True), policy=KEEP_ALL)
    journal = journals.load(result.journal or "", dsh_data)
    source, target = (Path(b["backup"]) for b in journal.backups)
    target.unlink()
    before = audit(dsh_data)
    with pytest.raises(DataError, match="nothing was restored") as caught:
        revert_migration(journal.id, from_backup=True)
    assert f"--journal {journal.id}" in (caught.value.hint or "")
    assert audit(dsh_data) == before and source.exists()
    assert revert_migration(journal.id).status == "reverted"


def test_folders_without_a_journal_age_out_and_config_copies_are_left_alone(
        repo: Path, dsh_data: Path):
    stray = paths.backups_dir(dsh_data) / "20200101T000000000-abcdef"
    stray.mkdir(parents=True)
    (stray / "default.db").write_bytes(b"x" * 10)
    old = 1_600_000_000  # 2020
    os.utime(stray, (old, old))
    # copies of harness and MCP client configs (the only copies of the user's files
    # from before mnemo edited them), and a folder of the user's own: not snapshots
    copies = [paths.backups_dir(dsh_data) / name / "settings.json"
              for name in ("hooks", "mcp", "my-notes")]
    for copy in copies:
        copy.parent.mkdir()
        copy.write_text("{}")
        os.utime(copy.parent, (old, old))
    (entry,) = retention.inventory(dsh_data)
    assert entry.journal == stray.name and entry.kind is None and entry.state == "due"
    assert entry.revert_command is None and not entry.from_backup
    assert [s.journal for s in retention.prune(dsh_data).pruned] == [stray.name]
    assert not stray.exists() and all(copy.exists() for copy in copies)


def test_a_symlinked_folder_is_never_followed(repo: Path, dsh_data: Path, tmp_path: Path):
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    # an hour old, so that `--older-than 0` finds it due whatever the clock's resolution
    # (a folder made in the same millisecond as the prune is 0 days old, not older)
    old = time.time() - 3600
    os.utime(outside, (old, old))
    paths.backups_dir(dsh_data).mkdir(parents=True, exist_ok=True)
    link = paths.backups_dir(dsh_data) / "20200101T000000000-feeded"
    link.symlink_to(outside, target_is_directory=True)
    result = retention.prune(dsh_data, older_than_days=0)
    assert result.errors and (outside / "keep.txt").read_text() == "mine"
    shutil.rmtree(outside)
