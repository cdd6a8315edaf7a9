"""`mnemo migrate` on bad input, clashes, damaged journals, and its progress reports."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_mnemo import paths
from dsh_mnemo.cli import app
from dsh_mnemo.errors import BusyError, DataError, ExitCode, RefusedError
from dsh_mnemo.migrate import Selection, retention, revert_migration, run_migration
from dsh_mnemo.migrate import backup as backups
from dsh_mnemo.migrate import journal as journals
from dsh_mnemo.workspace import identity
from tests.conftest import bind_repo
from tests.migrate.conftest import OWNED_UUID, audit, uuid_namespace

runner = CliRunner()
OWNED = uuid_namespace(OWNED_UUID)


@pytest.fixture
def repo(dsh_data: Path, projects: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = bind_repo(projects / "owned-repo", OWNED_UUID).path
    monkeypatch.chdir(path)
    return path


def test_bad_arguments_are_clear_errors(repo: Path):
    for args, code in ((["plan", "--session", ""], ExitCode.USAGE),
                       (["revert", "--journal", "../etc", "--yes"], ExitCode.REFUSED),
                       (["revert", "--journal", "20990101T000000-abcdef", "--yes"],
                        ExitCode.REFUSED)):
        result = runner.invoke(app, ["migrate", *args])
        assert result.exit_code == code, args
        assert "Traceback" not in result.output


def test_revert_with_nothing_to_revert_says_so(repo: Path):
    result = runner.invoke(app, ["migrate", "revert", "--yes", "--json"])
    assert result.exit_code == ExitCode.REFUSED
    assert json.loads(result.stdout.splitlines()[0])["kind"] == "error"


def test_no_default_database_means_nothing_to_migrate(projects: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(bind_repo(projects / "fresh", OWNED_UUID).path)
    result = runner.invoke(app, ["migrate", "run", "--legacy-dsh", "--yes", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["status"] == "nothing-to-do"


def test_a_clashing_row_in_the_target_stops_the_run_before_any_change(
        repo: Path, dsh_data: Path):
    source = sqlite3.connect(paths.default_db_path(dsh_data))
    memory_id = source.execute(
        "SELECT id FROM working_memory WHERE session_id = 'dsh_s1' LIMIT 1").fetchone()[0]
    source.close()
    run_migration(Selection(sessions=["dsh_s2"]))  # creates the bank
    bank = sqlite3.connect(paths.bank_db_path(identity.bank_for(OWNED), dsh_data))
    bank.execute("INSERT INTO working_memory (id, content, session_id) VALUES (?, ?, ?)",
                 (memory_id, "a different memory with the same id", OWNED))
    bank.commit()
    bank.close()
    before = audit(dsh_data)
    with pytest.raises(DataError, match="already exist in the target"):
        run_migration(Selection(sessions=["dsh_s1"]))
    assert audit(dsh_data) == before
    result = runner.invoke(app, ["migrate", "run", "--session", "dsh_s1", "--yes"])
    assert result.exit_code == ExitCode.DATA
    # The failed run moved nothing and blocks nothing: other runs still work.
    assert not journals.unfinished(dsh_data)
    assert run_migration(Selection(sessions=["dsh_s2"])).status == "nothing-to-do"
    assert run_migration(Selection(default_to_global=True)).status == "moved"
    assert audit(dsh_data) == before


def test_a_damaged_journal_points_to_the_backups(repo: Path, dsh_data: Path):
    result = run_migration(Selection(legacy_dsh=True))
    journal = journals.load(result.journal or "", dsh_data)
    journal.rows_path(journal.groups[0].rows_file or "").write_text("{not json")
    with pytest.raises(DataError) as caught:
        revert_migration(result.journal)
    assert "--from-backup" in (caught.value.hint or "")
    assert revert_migration(result.journal, from_backup=True).status == "restored"


def test_progress_reports_backup_copy_and_delete(repo: Path):
    seen: dict[str, tuple[int, int]] = {}

    def progress(phase: str, done: int, total: int) -> None:
        assert 0 <= done <= total
        seen[phase] = (done, total)

    run_migration(Selection(legacy_dsh=True), progress=progress)
    assert set(seen) == {"backup", "copy", "delete"}
    assert all(done == total and total > 0 for done, total in seen.values())


def test_restoring_an_older_backup_waits_for_later_runs_to_be_reverted(
        repo: Path, dsh_data: Path):
    first = run_migration(Selection(legacy_dsh=True))
    run_migration(Selection(default_to_global=True))
    result = runner.invoke(app, ["migrate", "revert", "--journal", first.journal or "",
                                 "--from-backup", "--yes"])
    assert result.exit_code == ExitCode.REFUSED
    assert "later migration" in result.stderr
    assert revert_migration().status == "reverted"  # the later one, from its journal
    assert revert_migration(first.journal, from_backup=True).status == "restored"


def test_the_plan_warns_about_global_rows_that_would_become_workspace_only(
        repo: Path, dsh_data: Path):
    from mnemosyne.core.memory import Mnemosyne

    Mnemosyne(session_id="dsh_s2", db_path=paths.default_db_path(dsh_data)).remember(
        "Our company style guide applies to every project.", scope="global")
    result = runner.invoke(app, ["migrate", "plan", "--legacy-dsh", "--json"])
    notes = json.loads(result.stdout)["notes"]
    assert any("1 selected memories have scope 'global'" in n for n in notes)


def test_a_target_that_cannot_be_prepared_closes_the_run_as_failed(repo: Path, dsh_data: Path):
    """Before anything moved, an error preparing the target (here a bank file that is
    not a database) leaves a `failed` journal, never one that blocks later runs."""
    before = audit(dsh_data)
    target = paths.bank_db_path(identity.bank_for(OWNED), dsh_data)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"this is not a database" * 100)
    result = runner.invoke(app, ["migrate", "run", "--legacy-dsh", "--yes"])
    assert result.exit_code == ExitCode.DATA, result.output
    assert "Traceback" not in result.output
    assert not journals.unfinished(dsh_data)
    assert [journals.load(j, dsh_data).status for j in journals.all_ids(dsh_data)] == ["failed"]
    assert runner.invoke(app, ["migrate", "plan", "--legacy-dsh", "--check"]).exit_code \
        == ExitCode.PENDING  # rows pending, no unfinished journal
    target.unlink()
    assert audit(dsh_data) == before
    assert run_migration(Selection(legacy_dsh=True)).status == "moved"


def _columns(db: Path, table: str) -> dict[str, tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {r[1]: tuple(r[2:]) for r in conn.execute(f"PRAGMA table_info({table})")}
    finally:
        conn.close()


def test_columns_the_bank_lacks_are_added_as_upstream_adds_them(repo: Path, dsh_data: Path):
    """A store whose tables grew a column (upstream's sync adds three to memory_events
    when it first opens a database; a newer upstream adds its own) moves whole: the
    bank gets the column with the source's declaration, and every value with it."""
    source = paths.default_db_path(dsh_data)
    conn = sqlite3.connect(source)
    with conn:
        conn.execute("ALTER TABLE working_memory ADD COLUMN mood TEXT DEFAULT 'calm'")
        conn.execute("UPDATE working_memory SET mood = 'keen' WHERE session_id = 'dsh_s1'")
    conn.close()
    run_migration(Selection(sessions=["dsh_s1"]))
    bank = sorted((dsh_data / "banks").glob("ws-*/mnemosyne.db"))[0]
    assert _columns(bank, "working_memory")["mood"] == _columns(source, "working_memory")["mood"]
    conn = sqlite3.connect(f"file:{bank}?mode=ro", uri=True)
    try:
        moods = {r[0] for r in conn.execute("SELECT mood FROM working_memory")}
    finally:
        conn.close()
    assert moods == {"keen"}
    assert revert_migration().status == "reverted"
    conn = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        assert {r[0] for r in conn.execute(
            "SELECT mood FROM working_memory WHERE session_id = 'dsh_s1'")} == {"keen"}
    finally:
        conn.close()


def test_a_column_that_cannot_be_added_stops_the_run_before_any_change(
        repo: Path, dsh_data: Path):
    source = paths.default_db_path(dsh_data)
    run_migration(Selection(sessions=["dsh_s2"]))  # creates the bank
    conn = sqlite3.connect(source)
    with conn:  # a NOT NULL column without a default: SQLite cannot add it to a table
        conn.execute("CREATE TABLE scratchpad_new AS SELECT * FROM scratchpad")
        conn.execute("DROP TABLE scratchpad")
        columns = ", ".join(f"{n} {t}" for n, (t, *_rest) in _columns(
            source, "scratchpad_new").items())
        conn.execute(f"CREATE TABLE scratchpad ({columns}, lane TEXT NOT NULL)")
        conn.execute("DROP TABLE scratchpad_new")
        conn.execute("INSERT INTO scratchpad (id, session_id, content, lane) "
                     "VALUES ('pad-1', 'dsh_s1', 'note', 'left')")
    conn.close()
    before = audit(dsh_data)
    with pytest.raises(DataError, match="lacks column.*lane.*cannot be added"):
        run_migration(Selection(sessions=["dsh_s1"]))
    assert audit(dsh_data) == before


def _damage(snapshot: Path, how: str) -> None:
    size = snapshot.stat().st_size
    if how == "truncated":
        with snapshot.open("r+b") as file:
            file.truncate(3000)
    elif how == "cut-at-a-page":  # whole pages, a valid header: only reading them all tells
        with snapshot.open("r+b") as file:
            file.truncate(size // 2 // 4096 * 4096)
    elif how == "empty":  # SQLite opens it as a new, empty database
        snapshot.write_bytes(b"")
    elif how == "garbage":
        snapshot.write_bytes(b"not a database at all " * 200)
    elif how == "another-database":
        snapshot.unlink()
        conn = sqlite3.connect(snapshot)
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.commit()
        conn.close()


@pytest.mark.parametrize(("which", "how"), [
    (-1, "truncated"), (-1, "cut-at-a-page"), (-1, "empty"), (-1, "garbage"),
    (-1, "another-database"), (0, "truncated"), (0, "empty")])
def test_a_damaged_snapshot_is_refused_before_anything_is_restored(
        which: int, how: str, repo: Path, dsh_data: Path):
    """The default database's snapshot is restored first, the bank's second: a damaged
    second snapshot used to fail with a traceback after the first was restored, leaving
    every moved row in both databases and the journal saying `done`."""
    before = audit(dsh_data)
    result = run_migration(Selection(legacy_dsh=True))
    journal = journals.load(result.journal or "", dsh_data)
    moved = audit(dsh_data)
    snapshot = Path(journal.backups[which]["backup"])
    _damage(snapshot, how)
    out = runner.invoke(app, ["migrate", "revert", "--from-backup", "--yes", "--json"])
    assert out.exit_code == ExitCode.DATA, out.output
    assert "Traceback" not in out.output
    error = json.loads(out.stdout.splitlines()[0])
    assert error["kind"] == "error" and snapshot.name in error["error"]
    assert "nothing was restored" in error["error"]
    assert f"--journal {journal.id}" in error["hint"]
    assert audit(dsh_data) == moved
    assert journals.load(journal.id, dsh_data).status == "done"
    assert revert_migration(journal.id).status == "reverted"  # its journal still undoes it
    assert audit(dsh_data) == before


@pytest.mark.parametrize("written", [False, True], ids=["before-writing", "after-writing"])
def test_a_restore_that_fails_midway_puts_back_what_it_restored(
        written: bool, repo: Path, dsh_data: Path, monkeypatch: pytest.MonkeyPatch):
    before = audit(dsh_data)
    result = run_migration(Selection(legacy_dsh=True))
    moved = audit(dsh_data)
    real = backups.restore
    calls: list[Path] = []

    def restore(snapshot: Path, database: Path) -> None:
        calls.append(database)
        if len(calls) == 2:  # the bank, after the default database was restored
            if written:
                real(snapshot, database)
            raise BusyError(f"{database} stayed busy")
        real(snapshot, database)

    monkeypatch.setattr(backups, "restore", restore)
    with pytest.raises(BusyError, match="put back as they were"):
        revert_migration(from_backup=True)
    assert audit(dsh_data) == moved
    journal = journals.load(result.journal or "", dsh_data)
    assert journal.status == "done"
    assert not (paths.backups_dir(dsh_data) / journal.id / "before-restore").exists()
    monkeypatch.setattr(backups, "restore", real)
    assert revert_migration(from_backup=True).status == "restored"
    assert audit(dsh_data) == before


def test_a_restore_that_cannot_be_put_back_says_so_and_can_be_completed(
        repo: Path, dsh_data: Path, monkeypatch: pytest.MonkeyPatch):
    before = audit(dsh_data)
    result = run_migration(Selection(legacy_dsh=True))
    real = backups.restore
    calls: list[Path] = []

    def restore(snapshot: Path, database: Path) -> None:
        calls.append(database)
        if len(calls) >= 2:  # the bank, and every database put back after it
            raise BusyError(f"{database} stayed busy")
        real(snapshot, database)

    monkeypatch.setattr(backups, "restore", restore)
    with pytest.raises(DataError) as caught:
        revert_migration(from_backup=True)
    assert "--from-backup" in (caught.value.hint or "")
    journal = journals.load(result.journal or "", dsh_data)
    assert journal.status == "restoring"  # the truth: half restored
    assert (paths.backups_dir(dsh_data) / journal.id / "before-restore").is_dir()
    [listed] = [s for s in retention.inventory(dsh_data) if s.journal == journal.id]
    assert listed.state == "protected"  # never pruned while it is needed
    assert listed.revert_command == f"mnemo migrate revert --journal {journal.id} --from-backup"
    with pytest.raises(RefusedError, match="restor"):
        revert_migration(journal.id)  # rows from the journal onto half a restore: no
    with pytest.raises(RefusedError, match="restor"):
        run_migration(Selection(default_to_global=True))
    monkeypatch.setattr(backups, "restore", real)
    assert revert_migration(from_backup=True).status == "restored"
    assert audit(dsh_data) == before
    assert not (paths.backups_dir(dsh_data) / journal.id / "before-restore").exists()
