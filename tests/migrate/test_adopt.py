"""`mnemo adopt` and `mnemo rebind`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_mnemo import paths
from dsh_mnemo.cli import app, common
from dsh_mnemo.config import load_settings
from dsh_mnemo.errors import ExitCode
from dsh_mnemo.faults import EXIT_CODE
from dsh_mnemo.memory import driver
from dsh_mnemo.memory import store as storage
from dsh_mnemo.migrate import journal as journals
from dsh_mnemo.workspace import identity, listing
from dsh_mnemo.workspace.context import resolve_memory_context
from dsh_mnemo.workspace.index import Index
from tests.conftest import bind_repo, mnemo_executable
from tests.migrate.conftest import ORPHAN_UUID, OWNED_UUID, audit, rows_by_key, uuid_namespace

runner = CliRunner()
OWNED = uuid_namespace(OWNED_UUID)
ORPHAN = uuid_namespace(ORPHAN_UUID)


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout


def cli_json(*args: str) -> dict:
    code, output = cli(*args, "--json")
    assert code == 0, output
    return json.loads(output)


def recall(path: Path, query: str) -> list[str]:
    driver.reset_cache()
    ctx = resolve_memory_context(path, None, load_settings())
    return [m.content for m in storage.recall(ctx, query, top_k=10)]


def remember(path: Path, text: str) -> None:
    driver.reset_cache()
    ctx = resolve_memory_context(path, None, load_settings())
    assert storage.remember(ctx, text).id


def fault_run(args: list[str], cwd: Path, point: str) -> int:
    env = dict(os.environ, MNEMO_TEST_FAULT=point)
    return subprocess.run([mnemo_executable(), *args], cwd=cwd, env=env,
                          capture_output=True, timeout=120).returncode


# --- adopt -----------------------------------------------------------------


def test_adopting_an_orphan_pins_it_and_moves_its_rows_home(dsh_data: Path, projects: Path):
    target = projects / "webapp"
    target.mkdir()
    before = audit(dsh_data)
    orphan_ids = {k for k, v in rows_by_key(paths.default_db_path(dsh_data),
                                            "working_memory").items() if v[0] == ORPHAN}
    result = cli_json("adopt", ORPHAN, str(target))
    assert result["status"] == "adopted" and result["namespace"] == ORPHAN
    assert result["moved_rows"] == 2 and result["journal"]
    assert journals.load(result["journal"], dsh_data).kind == "adopt"
    marker = identity.read_marker(target / identity.MARKER_NAME)
    entry = Index().load().active_for(identity.identity_key_for(marker))
    assert entry is not None and entry.namespace == ORPHAN
    assert entry.bank == identity.bank_for(ORPHAN)
    bank = rows_by_key(paths.bank_db_path(entry.bank, dsh_data), "working_memory")
    assert set(bank) == orphan_ids
    assert audit(dsh_data) == before
    assert any("orphan workspace" in c for c in recall(target, "deploy make release orphan"))
    again = cli_json("adopt", ORPHAN, str(target))
    assert again["status"] == "already-adopted" and again["journal"] is None


def test_adopt_without_moving_says_which_migrate_command_moves_the_rows(
        dsh_data: Path, projects: Path):
    target = projects / "webapp"
    target.mkdir()
    result = cli_json("adopt", ORPHAN, str(target), "--no-move")
    assert result["migrate_command"] == f"mnemo migrate run --session {ORPHAN}"
    assert result["default_rows"] == 2 and result["journal"] is None
    code, _ = cli("migrate", "run", "--session", ORPHAN, "--yes")
    assert code == 0
    assert not any(v[0] == ORPHAN for v in rows_by_key(paths.default_db_path(dsh_data),
                                                       "working_memory").values())


def test_adopt_refuses_a_directory_that_belongs_to_another_workspace(
        dsh_data: Path, projects: Path):
    other = bind_repo(projects / "owned", OWNED_UUID).path
    code, _ = cli("adopt", ORPHAN, str(other))
    assert code == ExitCode.REFUSED
    inner = other / "sub"
    inner.mkdir()
    code, _ = cli("adopt", ORPHAN, str(inner))
    assert code == ExitCode.REFUSED
    assert not (inner / identity.MARKER_NAME).exists()


def test_adopt_refuses_a_namespace_that_already_has_a_workspace(
        dsh_data: Path, projects: Path):
    bind_repo(projects / "owned", OWNED_UUID)
    elsewhere = projects / "elsewhere"
    elsewhere.mkdir()
    result = runner.invoke(app, ["adopt", OWNED, str(elsewhere)])
    assert result.exit_code == ExitCode.REFUSED
    assert "rebind" in result.stderr


def test_adopt_refuses_bad_names_and_namespaces_without_rows(dsh_data: Path, projects: Path):
    target = projects / "x"
    target.mkdir()
    assert cli("adopt", "dsh_s1", str(target))[0] == ExitCode.USAGE
    assert cli("adopt", uuid_namespace("99999999-2222-4333-8444-555555555555"),
               str(target))[0] == ExitCode.REFUSED
    assert cli("adopt", ORPHAN, str(paths.home_dir()))[0] == ExitCode.REFUSED
    assert not (target / identity.MARKER_NAME).exists()


def test_adopting_an_orphan_bank_moves_nothing(projects: Path, data_dir: Path):
    workspace_uuid = "55555555-2222-4333-8444-555555555555"
    namespace = uuid_namespace(workspace_uuid)
    old = bind_repo(projects / "gone", workspace_uuid).path
    remember(old, "The cache is warmed by a nightly job.")
    paths.index_path(data_dir).unlink()
    (old / identity.MARKER_NAME).unlink()
    target = projects / "restored"
    target.mkdir()
    result = cli_json("adopt", namespace, str(target))
    assert result["bank_rows"] == 1 and result["journal"] is None
    assert any("nightly job" in c for c in recall(target, "cache warmed nightly"))


@pytest.mark.e2e
def test_an_adopt_killed_between_index_and_marker_completes_when_run_again(
        dsh_data: Path, projects: Path):
    target = projects / "webapp"
    target.mkdir()
    assert fault_run(["adopt", ORPHAN, str(target)], projects,
                     "adopt-after-index") == EXIT_CODE
    assert not (target / identity.MARKER_NAME).exists()
    result = cli_json("adopt", ORPHAN, str(target))
    assert result["status"] == "adopted" and result["moved_rows"] == 2
    entries = Index().load().by_namespace(ORPHAN)
    assert len(entries) == 1
    assert identity.identity_key_for(
        identity.read_marker(target / identity.MARKER_NAME)) == entries[0].identityKey


@pytest.mark.e2e
def test_an_adopt_killed_after_its_rows_moved_closes_its_journal_when_run_again(
        dsh_data: Path, projects: Path):
    """Killed after the source delete committed, before the journal said "done": the
    rows are home, so the re-run has nothing to move; it used to leave the journal
    `running` for ever (and `migrate plan --check` exiting 8)."""
    target = projects / "webapp"
    target.mkdir()
    before = audit(dsh_data)
    assert fault_run(["adopt", ORPHAN, str(target)], projects,
                     "after-delete-commit") == EXIT_CODE
    (stuck,) = journals.unfinished(dsh_data)
    result = runner.invoke(app, ["adopt", ORPHAN, str(target), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["status"] == "already-adopted"
    assert document["journal"] == stuck.id and document["moved_rows"] == 2
    assert f"Completed the interrupted migration {stuck.id}" in result.stderr
    assert journals.load(stuck.id, dsh_data).status == "done"
    assert not journals.unfinished(dsh_data)
    assert audit(dsh_data) == before


# --- rebind ----------------------------------------------------------------


@pytest.fixture
def remembered(projects: Path) -> Path:
    repo = bind_repo(projects / "first" / "service", "66666666-2222-4333-8444-555555555555").path
    remember(repo, "The service exposes Prometheus metrics on port 9102.")
    return repo


def bank_state(data_dir: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in paths.banks_dir(data_dir).rglob("mnemosyne.db")}


def test_rebind_after_a_lost_marker_is_a_pointer_switch(remembered: Path, data_dir: Path):
    old_key = Index().load().workspaces[0].identityKey
    namespace = Index().load().workspaces[0].namespace
    (remembered / identity.MARKER_NAME).unlink()
    banks = bank_state(data_dir)
    result = cli_json("rebind", str(remembered), "--from", str(remembered))
    assert result["status"] == "rebound" and result["marker_written"]
    assert result["namespace"] == namespace and result["superseded"] == old_key
    assert result["rows"] == 1
    assert bank_state(data_dir) == banks  # zero data movement
    data = Index().load()
    assert data.by_identity(old_key).supersededBy == result["identity_key"]
    assert any("9102" in c for c in recall(remembered, "Prometheus metrics port"))


def test_rebind_a_checkout_on_another_machine_and_old_markers_still_resolve(
        remembered: Path, projects: Path):
    namespace = Index().load().workspaces[0].namespace
    old_marker = (remembered / identity.MARKER_NAME).read_text()
    checkout = projects / "laptop" / "service"
    checkout.mkdir(parents=True)
    result = cli_json("rebind", str(checkout), "--from", namespace)
    assert result["namespace"] == namespace
    assert any("9102" in c for c in recall(checkout, "Prometheus metrics port"))
    # A copy of the superseded marker follows `supersededBy` to the same memory.
    copy = projects / "copy"
    copy.mkdir()
    (copy / identity.MARKER_NAME).write_text(old_marker)
    assert resolve_memory_context(copy, None, load_settings()).namespace == namespace
    assert cli_json("rebind", str(checkout), "--from", namespace)["status"] == "already-bound"


def test_rebind_takes_over_for_a_replaced_but_empty_marker_only(
        remembered: Path, projects: Path):
    namespace = Index().load().workspaces[0].namespace
    (remembered / identity.MARKER_NAME).unlink()
    # a fresh, empty workspace replaced the lost marker
    assert cli("bind", "--new", str(remembered))[0] == 0
    fresh = identity.read_marker(remembered / identity.MARKER_NAME)
    result = cli_json("rebind", str(remembered), "--from", namespace)
    assert result["namespace"] == namespace and not result["marker_written"]
    assert result["identity_key"] == identity.identity_key_for(fresh)
    # With memories of its own, the directory is not switched over them.
    other = bind_repo(projects / "other" / "service", "77777777-2222-4333-8444-555555555555").path
    remember(other, "Other service notes.")
    code, _ = cli("rebind", str(other), "--from", namespace)
    assert code == ExitCode.REFUSED


def test_bind_after_a_lost_marker_refuses_and_names_the_rebind(remembered: Path):
    namespace = Index().load().workspaces[0].namespace
    before = Index().load().to_json()
    (remembered / identity.MARKER_NAME).unlink()  # deleted by accident (`git clean -x`)
    result = runner.invoke(app, ["bind", str(remembered)])
    assert result.exit_code == ExitCode.REFUSED, result.output
    said = " ".join(result.stderr.split())
    assert f"mnemo rebind {remembered} --from {namespace}" in said
    assert f"mnemo bind --new {remembered}" in said
    assert "Traceback" not in result.output
    # Nothing changed: no new marker hides the memory, no new entry.
    assert not (remembered / identity.MARKER_NAME).exists()
    assert Index().load().to_json() == before
    assert cli_json("rebind", str(remembered), "--from", namespace)["status"] == "rebound"
    assert any("9102" in c for c in recall(remembered, "Prometheus metrics port"))


def test_bind_after_a_lost_marker_knows_the_directory_by_another_path(remembered: Path,
                                                                    projects: Path):
    """The index saw the workspace through a second path to the same directory (a
    bind mount; here a symlink the index kept unresolved): bind still refuses."""
    namespace = Index().load().workspaces[0].namespace
    other = projects / "mounted"
    other.symlink_to(remembered)
    with Index().transaction() as data:
        data.workspaces[0].lastSeenPath = str(other)
    (remembered / identity.MARKER_NAME).unlink()
    result = runner.invoke(app, ["bind", str(remembered)])
    assert result.exit_code == ExitCode.REFUSED, result.output
    assert f"mnemo rebind {remembered} --from {namespace}" in " ".join(result.stderr.split())
    assert not (remembered / identity.MARKER_NAME).exists()


def test_status_after_a_lost_marker_names_the_rebind(remembered: Path):
    namespace = Index().load().workspaces[0].namespace
    (remembered / identity.MARKER_NAME).unlink()
    result = runner.invoke(app, ["status", str(remembered), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["bound"] is False
    said = " ".join(result.stderr.split())
    assert "marker .mnemosyne-id is missing" in said
    assert f"mnemo rebind {remembered} --from {namespace}" in said


def test_bind_where_a_project_was_before_it_moved_is_not_refused(remembered: Path,
                                                                projects: Path):
    """The project moved away (and was seen there): a new one at its old place binds,
    even once the moved project is gone too."""
    moved = projects / "moved"
    remembered.rename(moved)
    assert cli_json("status", str(moved))["bound"]
    shutil.rmtree(moved)
    remembered.mkdir()
    assert cli_json("bind", str(remembered))["status"] == "bound"


def test_bind_new_after_a_lost_marker_starts_an_empty_memory(remembered: Path):
    namespace = Index().load().workspaces[0].namespace
    (remembered / identity.MARKER_NAME).unlink()
    fresh = cli_json("bind", "--new", str(remembered))
    assert fresh["status"] == "bound" and fresh["namespace"] != namespace
    assert recall(remembered, "Prometheus metrics port") == []
    # The old memory is still listed, and still what a rebind brings back.
    listed = cli_json("workspaces")["workspaces"]
    assert [w["state"] for w in listed if w["namespace"] == namespace] == ["marker-mismatch"]


def test_rebind_keeps_the_old_directory_with_the_memory(remembered: Path, projects: Path,
                                                       monkeypatch: pytest.MonkeyPatch):
    namespace = Index().load().workspaces[0].namespace
    checkout = projects / "laptop" / "service"
    checkout.mkdir(parents=True)
    result = cli_json("rebind", str(checkout), "--from", namespace)
    entry = Index().load().by_identity(result["identity_key"])
    assert entry.previousPaths == [str(remembered)]
    # `mnemo workspaces`: the new entry names where the memory was, and the
    # superseded entry follows it.
    listed = cli_json("workspaces")["workspaces"]
    assert [(w["last_seen_path"], w["state"]) for w in listed] == [
        (str(checkout), "bound"), (str(remembered), "superseded")]
    assert listed[0]["previous_paths"] == [str(remembered)]
    # Whole paths, one per line. The console read COLUMNS when it was made (a test
    # process started under an 80-column terminal keeps 80), so widen it directly.
    monkeypatch.setattr(common.out, "_width", 400)
    human = runner.invoke(app, ["workspaces"], catch_exceptions=False).stdout
    assert f"was {remembered}" in human
    # The old checkout still holds the old marker: doctor sees the two share one memory.
    (shared,) = listing.shared_markers(Index().load())
    assert shared.directories == [str(remembered), str(checkout)]


def test_rebind_from_a_path_the_project_had_before(remembered: Path, projects: Path):
    """Moved twice, then the marker lost: the middle place names the workspace too."""
    namespace = Index().load().workspaces[0].namespace
    middle, last = projects / "middle", projects / "last"
    for place in (middle, last):
        (remembered if place is middle else middle).rename(place)
        assert cli_json("status", str(place))["namespace"] == namespace  # seen there
    (last / identity.MARKER_NAME).unlink()
    checkout = projects / "laptop" / "service"
    checkout.mkdir(parents=True)
    result = cli_json("rebind", str(checkout), "--from", str(middle))
    assert result["namespace"] == namespace and result["rows"] == 1


def test_rebind_of_an_entry_without_recorded_paths_still_groups_them(remembered: Path,
                                                                     projects: Path):
    """An index written before rebind recorded paths: the predecessor's own paths
    still count for the doctor's check."""
    namespace = Index().load().workspaces[0].namespace
    checkout = projects / "laptop" / "service"
    checkout.mkdir(parents=True)
    key = cli_json("rebind", str(checkout), "--from", namespace)["identity_key"]
    with Index().transaction() as data:
        data.by_identity(key).previousPaths = []
    (shared,) = listing.shared_markers(Index().load())
    assert shared.directories == [str(remembered), str(checkout)]


def test_adopt_records_where_the_orphan_lived(projects: Path, data_dir: Path):
    workspace_uuid = "55555555-2222-4333-8444-555555555555"
    namespace = uuid_namespace(workspace_uuid)
    old = bind_repo(projects / "gone", workspace_uuid).path
    remember(old, "The cache is warmed by a nightly job.")
    paths.index_path(data_dir).unlink()  # identity.json.last-good still names `old`
    (old / identity.MARKER_NAME).unlink()
    target = projects / "restored"
    target.mkdir()
    result = cli_json("adopt", namespace, str(target))
    assert Index().load().by_identity(result["identity_key"]).previousPaths == [str(old)]
    listed = cli_json("workspaces")["workspaces"]
    assert [w["previous_paths"] for w in listed] == [[str(old)]]


def test_rebind_without_from_lists_candidates_and_changes_nothing(
        remembered: Path, projects: Path):
    checkout = projects / "laptop" / "service"
    checkout.mkdir(parents=True)
    before = Index().load().to_json()
    result = runner.invoke(app, ["rebind", str(checkout)])
    assert result.exit_code == ExitCode.USAGE
    assert f"mnemo rebind {checkout} --from" in " ".join(result.stderr.split())
    assert Index().load().to_json() == before
    assert cli("rebind", str(checkout), "--from", "id:nope")[0] == ExitCode.REFUSED


@pytest.mark.e2e
def test_a_rebind_killed_between_index_and_marker_completes_when_run_again(
        remembered: Path, projects: Path):
    namespace = Index().load().workspaces[0].namespace
    checkout = projects / "laptop" / "service"
    checkout.mkdir(parents=True)
    assert fault_run(["rebind", str(checkout), "--from", namespace], projects,
                     "rebind-after-index") == EXIT_CODE
    assert not (checkout / identity.MARKER_NAME).exists()
    result = cli_json("rebind", str(checkout), "--from", namespace)
    assert result["status"] == "rebound" and result["marker_written"]
    assert len(Index().load().workspaces) == 2
    assert resolve_memory_context(checkout, None, load_settings()).namespace == namespace


def test_adopt_refuses_a_directory_the_index_gives_to_another_workspace(
        dsh_data: Path, projects: Path):
    lost = bind_repo(projects / "owned", OWNED_UUID).path
    (lost / identity.MARKER_NAME).unlink()
    result = runner.invoke(app, ["adopt", ORPHAN, str(lost)])
    assert result.exit_code == ExitCode.REFUSED
    assert "mnemo rebind" in result.stderr
    assert not (lost / identity.MARKER_NAME).exists()
