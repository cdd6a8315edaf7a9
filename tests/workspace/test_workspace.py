"""bind / decline / status / list_workspaces, called as the core library."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from dsh_mnemo.config import Settings, validate
from dsh_mnemo.errors import ExitCode, RefusedError
from dsh_mnemo.workspace import binding as workspace
from dsh_mnemo.workspace import listing
from dsh_mnemo.workspace.identity import MarkerError
from dsh_mnemo.workspace.index import Index
from tests.conftest import git_init
from tests.workspace.conftest import (
    MARKER,
    commit_all,
    expected_bank,
    expected_namespace,
    git,
    index_entries,
    marker_uuid,
    read_index,
    write_marker_file,
)


def _markers_under(root: Path) -> list[Path]:
    return sorted(root.rglob(MARKER))


# --- bind ---------------------------------------------------------------------------------

def test_bind_a_new_repository(make_repo, data_dir: Path) -> None:
    repo = make_repo("app")
    before = int(time.time() * 1000)
    result = workspace.bind(repo)
    workspace_uuid = marker_uuid(repo)
    assert result.status == "bound"
    assert result.root == str(repo)
    assert result.identity_key == "id:" + workspace_uuid
    assert result.namespace == expected_namespace(workspace_uuid)
    assert result.bank == expected_bank(workspace_uuid)
    assert result.display_name == "app"
    assert result.marker_path == str(repo / MARKER)
    assert result.gitignore_hint is True
    entry = index_entries(data_dir)[result.identity_key]
    assert entry["namespace"] == result.namespace
    assert entry["bank"] == result.bank
    assert entry["canonicalPath"] == entry["lastSeenPath"] == str(repo)
    assert entry["displayName"] == "app"
    assert before <= entry["boundAt"] <= int(time.time() * 1000)
    assert entry["supersededBy"] is None


def test_bind_defaults_to_the_current_directory(projects: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    plain = projects / "notes"
    plain.mkdir()
    monkeypatch.chdir(plain)
    result = workspace.bind()
    assert result.root == str(plain)
    assert (plain / MARKER).exists()


def test_bind_without_a_path_binds_the_whole_repository(make_repo,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo("app")
    (repo / "src" / "pkg").mkdir(parents=True)
    monkeypatch.chdir(repo / "src" / "pkg")
    result = workspace.bind()
    assert result.status == "bound"
    assert result.root == str(repo)
    assert _markers_under(repo) == [repo / MARKER]


def test_bind_with_an_explicit_subdirectory_binds_it(make_repo) -> None:
    repo = make_repo("mono")
    package = repo / "packages" / "api"
    package.mkdir(parents=True)
    result = workspace.bind(package)
    assert result.root == str(package)
    assert _markers_under(repo) == [package / MARKER]


def test_rebinding_adopts_the_existing_marker(make_repo, data_dir: Path) -> None:
    repo = make_repo("app")
    first = workspace.bind(repo)
    marker_before = (repo / MARKER).read_bytes()
    second = workspace.bind(repo)
    assert second.status == "already-bound"
    assert (second.namespace, second.identity_key, second.bank) == (
        first.namespace, first.identity_key, first.bank)
    assert (repo / MARKER).read_bytes() == marker_before
    assert len(read_index(data_dir)["workspaces"]) == 1


def test_binding_a_subdirectory_of_a_bound_repository_reports_it(make_repo) -> None:
    repo = make_repo("app")
    (repo / "src").mkdir()
    first = workspace.bind(repo)
    result = workspace.bind(repo / "src")
    assert result.status == "already-bound"
    assert result.root == str(repo)
    assert result.namespace == first.namespace
    assert _markers_under(repo) == [repo / MARKER]


def test_bind_adopts_a_hand_written_marker(make_repo, data_dir: Path) -> None:
    repo = make_repo("copied")
    workspace_uuid = write_marker_file(repo)
    result = workspace.bind(repo)
    assert result.status == "already-bound"
    assert result.namespace == expected_namespace(workspace_uuid)
    assert index_entries(data_dir)["id:" + workspace_uuid]["lastSeenPath"] == str(repo)


def test_bind_in_a_linked_worktree_reports_the_main_workspace(make_repo,
                                                              projects: Path) -> None:
    main = make_repo("main")
    commit_all(main)
    bound = workspace.bind(main)
    linked = projects / "main-wt"
    git(main, "worktree", "add", "-q", "-b", "wt", str(linked))
    result = workspace.bind(linked)
    assert result.status == "already-bound"
    assert result.namespace == bound.namespace
    assert not (linked / MARKER).exists()


def _unbound_worktree(make_repo, projects: Path) -> tuple[Path, Path]:
    main = make_repo("main")
    commit_all(main)
    linked = projects / "main-wt"
    git(main, "worktree", "add", "-q", "-b", "wt", str(linked))
    (linked / "src").mkdir()
    return main, linked


def test_bind_without_a_path_in_a_linked_worktree_binds_the_main_tree(
        make_repo, projects: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    main, linked = _unbound_worktree(make_repo, projects)
    monkeypatch.chdir(linked / "src")
    result = workspace.bind()
    assert result.status == "bound"
    assert result.root == str(main)
    assert (main / MARKER).exists() and not (linked / MARKER).exists()
    for where in (main, linked / "src"):
        assert workspace.status(where, Settings()).namespace == result.namespace


def test_bind_with_a_linked_worktree_path_binds_that_worktree(make_repo,
                                                              projects: Path) -> None:
    main, linked = _unbound_worktree(make_repo, projects)
    result = workspace.bind(linked)
    assert result.root == str(linked)
    assert not (main / MARKER).exists()


def test_decline_in_a_linked_worktree_is_about_the_main_tree(make_repo, projects: Path,
                                                             data_dir: Path) -> None:
    main, linked = _unbound_worktree(make_repo, projects)
    result = workspace.decline(linked / "src")
    assert result.root == str(main)
    assert workspace.declined_recently(Index(), str(main), 30)


def test_bind_in_a_nested_repository_makes_a_separate_workspace(make_repo) -> None:
    outer = make_repo("outer")
    outer_result = workspace.bind(outer)
    nested = git_init(outer / "vendor" / "lib")
    result = workspace.bind(nested)
    assert result.status == "bound"
    assert result.namespace != outer_result.namespace
    assert result.namespace == expected_namespace(marker_uuid(nested))


@pytest.mark.parametrize("content", [
    "mnemosyne-workspace-v1: NOT-A-UUID\n",
    "mnemosyne-workspace-v2: 9f2c6a8e-1b3d-4c5e-8f70-a1b2c3d4e5f6\n",
    "",
])
def test_broken_marker_is_refused_and_left_untouched(make_repo, data_dir: Path,
                                                     content: str) -> None:
    repo = make_repo("app")
    (repo / MARKER).write_text(content)
    with pytest.raises(MarkerError) as caught:
        workspace.bind(repo)
    assert caught.value.exit_code == ExitCode.DATA
    assert str(repo / MARKER) in caught.value.message
    assert (repo / MARKER).read_text() == content
    assert not (data_dir / "identity.json").exists() or not read_index(data_dir)["workspaces"]


def test_broken_marker_at_the_top_is_not_shadowed_from_a_subdirectory(make_repo) -> None:
    repo = make_repo("app")
    (repo / "src").mkdir()
    (repo / MARKER).write_text("garbage\n")
    with pytest.raises(MarkerError):
        workspace.bind(repo / "src")
    assert _markers_under(repo) == [repo / MARKER]
    assert (repo / MARKER).read_text() == "garbage\n"


def test_broken_marker_where_bind_runs_is_refused(make_repo,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo("app")
    (repo / "src").mkdir()
    (repo / "src" / MARKER).write_text("garbage\n")
    monkeypatch.chdir(repo / "src")
    with pytest.raises(MarkerError, match="garbage|identity line|expected"):
        workspace.bind()
    assert _markers_under(repo) == [repo / "src" / MARKER]


def test_binding_home_root_missing_and_files_is_refused(isolated_env: Path) -> None:
    home = isolated_env / "home"
    (isolated_env / "file").write_text("x")
    for path in (home, Path("/"), isolated_env / "missing", isolated_env / "file"):
        with pytest.raises(RefusedError) as caught:
            workspace.bind(path)
        assert caught.value.exit_code == ExitCode.REFUSED
    assert not (home / MARKER).exists()


def test_bind_without_a_path_in_home_is_refused(isolated_env: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(isolated_env / "home")
    with pytest.raises(RefusedError, match="home"):
        workspace.bind()


def test_two_repositories_get_distinct_namespaces(make_repo) -> None:
    a, b = workspace.bind(make_repo("a")), workspace.bind(make_repo("b"))
    assert a.namespace != b.namespace
    assert a.bank != b.bank


def test_a_lost_index_entry_comes_back_unchanged(make_repo, data_dir: Path) -> None:
    repo = make_repo("app")
    first = workspace.bind(repo)
    (data_dir / "identity.json").unlink()
    again = workspace.bind(repo)
    assert again.status == "already-bound"
    assert again.namespace == first.namespace


# --- decline ------------------------------------------------------------------------------

def test_decline_records_declined_at_and_writes_no_marker(make_repo, data_dir: Path) -> None:
    repo = make_repo("app")
    (repo / "src").mkdir()
    before = int(time.time() * 1000)
    result = workspace.decline(repo / "src")
    assert result.status == "declined"
    assert result.root == str(repo)  # the repository is what the hint is about
    assert result.namespace is None
    assert before <= (result.declined_at or 0) <= int(time.time() * 1000)
    assert _markers_under(repo) == []
    assert read_index(data_dir)["declined"] == [
        {"path": str(repo), "declinedAt": result.declined_at}]
    assert read_index(data_dir)["workspaces"] == []
    index = Index()
    assert workspace.declined_recently(index, str(repo), 30)
    assert not workspace.declined_recently(index, str(repo), 0)
    assert not workspace.declined_recently(index, str(repo / "src"), 30)


def test_declining_twice_keeps_one_record(make_repo, data_dir: Path) -> None:
    repo = make_repo("app")
    workspace.decline(repo)
    workspace.decline(repo)
    assert len(read_index(data_dir)["declined"]) == 1


def test_binding_after_declining_clears_the_decline(make_repo, data_dir: Path) -> None:
    repo = make_repo("app")
    workspace.decline(repo)
    workspace.bind(repo)
    assert read_index(data_dir)["declined"] == []


def test_declining_a_bound_workspace_is_refused(make_repo) -> None:
    repo = make_repo("app")
    workspace.bind(repo)
    with pytest.raises(RefusedError, match="already bound"):
        workspace.decline(repo)


def test_declining_home_is_refused(isolated_env: Path) -> None:
    with pytest.raises(RefusedError):
        workspace.decline(isolated_env / "home")


# --- status -------------------------------------------------------------------------------

def test_status_of_a_bound_workspace(make_repo, data_dir: Path) -> None:
    repo = make_repo("app")
    (repo / "src").mkdir()
    bound = workspace.bind(repo)
    report = workspace.status(repo / "src", Settings())
    assert (report.mode, report.bound, report.reason) == ("workspace", True, "marker")
    assert report.namespace == bound.namespace
    assert report.root == str(repo)
    assert report.display_name == "app"
    assert report.bank == bound.bank
    assert report.db_path == str(data_dir / "banks" / bound.bank / "mnemosyne.db")
    assert report.data_dir == str(data_dir)
    assert report.marker_path == str(repo / MARKER)
    assert report.recall_mode == report.auto_write_scope == "workspace"
    assert report.index_recovered_from is None


def test_status_of_an_unbound_directory(make_repo, data_dir: Path) -> None:
    report = workspace.status(make_repo("loose"), Settings())
    assert (report.bound, report.reason, report.namespace, report.bank, report.db_path) == (
        False, "unbound", None, None, None)
    assert report.data_dir == str(data_dir)


def test_status_in_session_mode(make_repo) -> None:
    repo = make_repo("app")
    workspace.bind(repo)
    session = Settings(values=validate({"recall_mode": "session"}))
    with_id = workspace.status(repo, session, session_id="s-9")
    assert (with_id.mode, with_id.bound, with_id.namespace) == (
        "session", True, "dsh_v2_session_s-9")
    without = workspace.status(repo, session)
    assert (without.bound, without.reason, without.namespace) == (False, "no-session", None)


def test_status_reports_a_recovered_index(make_repo, data_dir: Path) -> None:
    repo = make_repo("app")
    workspace.bind(repo)
    (data_dir / "identity.json").write_text("nonsense")
    report = workspace.status(repo, Settings())
    assert report.bound
    assert report.index_recovered_from
    assert Path(report.index_recovered_from).read_text() == "nonsense"


def test_status_reports_marker_problems(make_repo) -> None:
    repo = make_repo("app")
    (repo / MARKER).write_text("nonsense\n")
    report = workspace.status(repo, Settings())
    assert not report.bound
    assert report.marker_problems == [{"path": str(repo / MARKER),
                                       "reason": report.marker_problems[0]["reason"]}]


# --- list_workspaces ----------------------------------------------------------------------

def test_list_workspaces_states(make_repo, projects: Path) -> None:
    names = ["fine", "gone", "swapped", "old"]
    results = {name: workspace.bind(make_repo(name)) for name in names}
    shutil.rmtree(projects / "gone")
    (projects / "swapped" / MARKER).unlink()
    write_marker_file(projects / "swapped")
    with Index().transaction() as data:
        data.by_identity(results["old"].identity_key).supersededBy = results["fine"].identity_key
    report = listing.list_workspaces()
    states = {row.display_name: row.state for row in report.workspaces}
    assert states == {"fine": "bound", "gone": "missing", "swapped": "marker-mismatch",
                      "old": "superseded"}
    row = next(r for r in report.workspaces if r.display_name == "fine")
    assert row.namespace == results["fine"].namespace
    assert row.bank == results["fine"].bank
    assert row.last_seen_path == str(projects / "fine")
    assert row.db_exists is False
    assert report.index_recovered_from is None


def test_list_workspaces_empty() -> None:
    report = listing.list_workspaces()
    assert report.workspaces == []


def test_list_workspaces_survives_an_entry_without_a_path(data_dir: Path) -> None:
    data_dir.mkdir()
    (data_dir / "identity.json").write_text(
        '{"version": 1, "workspaces": [{"identityKey": "id:a", "namespace": "n",'
        ' "bank": "b", "lastSeenPath": null}]}')
    report = listing.list_workspaces()
    assert [row.state for row in report.workspaces] == ["missing"]


def test_list_workspaces_reports_a_recovered_index(data_dir: Path) -> None:
    data_dir.mkdir()
    (data_dir / "identity.json").write_text("[")
    report = listing.list_workspaces()
    assert report.index_recovered_from
    assert Path(report.index_recovered_from).read_text() == "["
