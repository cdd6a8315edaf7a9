"""`mnemo bind`, `status`, `workspaces` through Typer's runner (in process)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from dsh_mnemo.cli import app
from dsh_mnemo.errors import ExitCode
from tests.conftest import configure
from tests.workspace.conftest import (
    MARKER,
    commit_all,
    expected_bank,
    expected_namespace,
    git,
    index_entries,
    marker_uuid,
    read_index,
)

STATUS_FIELDS = {"mode", "bound", "reason", "namespace", "root", "display_name", "bank",
                 "db_path", "data_dir"}


def invoke(*args: str, cwd: Path | None = None) -> Result:
    if cwd is not None:
        os.chdir(cwd)
    return CliRunner().invoke(app, list(args))


def ok_json(result: Result, kind: str) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["schema_version"] == 1
    assert document["kind"] == kind
    return document


def assert_clean_failure(result: Result, code: ExitCode, *fragments: str) -> None:
    assert result.exit_code == int(code), result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


# --- bind ---------------------------------------------------------------------------------

def test_bind_prints_what_it_did(make_repo) -> None:
    repo = make_repo("app")
    result = invoke("bind", str(repo))
    assert result.exit_code == 0, result.output
    namespace = expected_namespace(marker_uuid(repo))
    assert "Bound" in result.stdout
    assert namespace in result.stdout
    assert ".gitignore" in result.stdout  # the suggestion, never an edit
    assert not (repo / ".gitignore").exists()


def test_odd_directory_names_are_printed_literally(make_repo) -> None:
    repo = make_repo("my repo [bold]ü")
    result = invoke("bind", str(repo))
    assert result.exit_code == 0, result.output
    assert "my repo [bold]ü" in result.stdout  # not swallowed as rich markup
    document = ok_json(invoke("status", str(repo), "--json"), "status")
    assert document["display_name"] == "my repo [bold]ü"
    assert "my repo [bold]ü" in invoke("workspaces").stdout


def test_bind_json_shape(make_repo, data_dir: Path) -> None:
    repo = make_repo("app")
    document = ok_json(invoke("bind", str(repo), "--json"), "bind")
    workspace_uuid = marker_uuid(repo)
    assert document["status"] == "bound"
    assert document["root"] == str(repo)
    assert document["identity_key"] == "id:" + workspace_uuid
    assert document["namespace"] == expected_namespace(workspace_uuid)
    assert document["bank"] == expected_bank(workspace_uuid)
    assert document["display_name"] == "app"
    assert document["marker_path"] == str(repo / MARKER)
    assert document["declined_at"] is None
    assert document["gitignore_hint"] is True
    assert index_entries(data_dir)["id:" + workspace_uuid]["namespace"] == document["namespace"]


def test_bind_from_inside_the_repository_without_a_path(make_repo) -> None:
    repo = make_repo("app")
    (repo / "src").mkdir()
    document = ok_json(invoke("bind", "--json", cwd=repo / "src"), "bind")
    assert document["root"] == str(repo)
    assert (repo / MARKER).exists()
    assert not (repo / "src" / MARKER).exists()


def test_bind_twice_reports_already_bound(make_repo) -> None:
    repo = make_repo("app")
    first = ok_json(invoke("bind", str(repo), "--json"), "bind")
    marker = (repo / MARKER).read_bytes()
    second = invoke("bind", str(repo))
    assert second.exit_code == 0
    assert "Already bound" in second.stdout
    again = ok_json(invoke("bind", str(repo), "--json"), "bind")
    assert again["status"] == "already-bound"
    assert again["namespace"] == first["namespace"]
    assert (repo / MARKER).read_bytes() == marker


def test_bind_in_a_copy_says_which_directory_shares_its_memory(make_repo) -> None:
    original = make_repo("app")
    ok_json(invoke("bind", str(original), "--json"), "bind")
    copy = original.parent / "app-copy"
    shutil.copytree(original, copy)
    result = invoke("bind", str(copy), "--json")
    document = ok_json(result, "bind")
    assert document["status"] == "already-bound" and document["shared_with"] == [str(original)]
    assert f"{original} also holds this marker" in result.stderr
    assert f"rm {copy / MARKER} && mnemo bind {copy}" in result.stderr
    # the original, bound again, names the copy; a directory alone names nobody
    again = invoke("bind", str(original))
    assert again.exit_code == 0 and f"{copy} also holds this marker" in again.stderr
    (copy / MARKER).unlink()
    assert ok_json(invoke("bind", str(copy), "--json"), "bind")["status"] == "bound"
    alone = invoke("bind", str(original), "--json")
    assert ok_json(alone, "bind")["shared_with"] == [] and "marker" not in alone.stderr


def test_bind_in_a_worktree_with_the_marker_committed_says_it_shares_on_purpose(
        make_repo) -> None:
    main = make_repo("app")
    ok_json(invoke("bind", str(main), "--json"), "bind")
    commit_all(main)  # the marker is committed: every checkout shares the memory
    linked = main.parent / "app-feature"
    git(main, "worktree", "add", "-q", "-b", "feature", str(linked))
    result = invoke("bind", str(linked))
    assert result.exit_code == 0
    assert f"{main} is a checkout of the same repository" in result.stdout
    # no advice to delete a committed file, and no warning
    assert "rm " not in result.output and result.stderr == ""
    status = ok_json(invoke("status", str(linked), "--json"), "status")
    assert status["namespace"] == ok_json(invoke("status", str(main), "--json"),
                                          "status")["namespace"]


def test_bind_in_a_subdirectory_of_a_bound_repository(make_repo) -> None:
    repo = make_repo("app")
    (repo / "docs").mkdir()
    first = ok_json(invoke("bind", str(repo), "--json"), "bind")
    sub = ok_json(invoke("bind", str(repo / "docs"), "--json"), "bind")
    assert sub["status"] == "already-bound"
    assert sub["root"] == str(repo)
    assert sub["namespace"] == first["namespace"]


def test_bind_refuses_a_broken_marker_and_leaves_it(make_repo, data_dir: Path) -> None:
    repo = make_repo("app")
    (repo / MARKER).write_text("mnemosyne-workspace-v1: 9F2C6A8E-1B3D-4C5E-8F70-A1B2C3D4E5F6\n")
    before = (repo / MARKER).read_bytes()
    result = invoke("bind", str(repo))
    assert_clean_failure(result, ExitCode.DATA, str(repo / MARKER), "not a valid mnemo marker")
    assert (repo / MARKER).read_bytes() == before


def test_bind_decline(make_repo, data_dir: Path) -> None:
    repo = make_repo("app")
    human = invoke("bind", str(repo), "--decline")
    assert human.exit_code == 0, human.output
    assert "Declined" in human.stdout
    document = ok_json(invoke("bind", str(repo), "--decline", "--json"), "bind")
    assert document["status"] == "declined"
    assert document["root"] == str(repo)
    assert document["namespace"] is None
    assert isinstance(document["declined_at"], int)
    assert not (repo / MARKER).exists()
    assert read_index(data_dir)["declined"] == [{"path": str(repo),
                                                 "declinedAt": document["declined_at"]}]


def test_bind_decline_says_the_configured_decline_period(make_repo) -> None:
    configure(hint__decline_days=7)
    human = invoke("bind", str(make_repo("app")), "--decline")
    assert human.exit_code == 0, human.output
    assert "for 7 days" in human.stdout and "30 days" not in human.stdout
    configure(hint__decline_days=0)
    human = invoke("bind", str(make_repo("other")), "--decline")
    assert "still shows" in human.stdout


def test_decline_in_a_bound_repository_is_refused(make_repo) -> None:
    repo = make_repo("app")
    invoke("bind", str(repo))
    assert_clean_failure(invoke("bind", str(repo), "--decline"), ExitCode.REFUSED,
                         "already bound")


@pytest.mark.parametrize("target, fragment", [
    ("HOME", "home directory"),
    ("/", "root"),
    ("MISSING", "does not exist"),
    ("FILE", "not a directory"),
])
def test_bind_refusals_are_clean(isolated_env: Path, target: str, fragment: str) -> None:
    (isolated_env / "a-file").write_text("x")
    path = {"HOME": str(isolated_env / "home"), "/": "/",
            "MISSING": str(isolated_env / "missing"),
            "FILE": str(isolated_env / "a-file")}[target]
    result = invoke("bind", path)
    assert_clean_failure(result, ExitCode.REFUSED, fragment)
    assert result.stdout == ""
    assert not (isolated_env / "home" / MARKER).exists()


def test_bind_in_home_without_a_path_is_refused(isolated_env: Path) -> None:
    assert_clean_failure(invoke("bind", cwd=isolated_env / "home"), ExitCode.REFUSED,
                         "home directory")


def test_bind_json_errors_are_json_on_stdout(isolated_env: Path) -> None:
    result = invoke("bind", str(isolated_env / "home"), "--json")
    assert_clean_failure(result, ExitCode.REFUSED, "home directory")
    document = json.loads(result.stdout)
    assert document["kind"] == "error"
    assert document["exit_code"] == int(ExitCode.REFUSED)
    assert "home directory" in document["error"]
    assert document["hint"]


def test_bind_with_an_invalid_config_fails_cleanly(make_repo, isolated_env: Path) -> None:
    config = Path(os.environ["MNEMO_CONFIG"])
    config.parent.mkdir(parents=True)
    config.write_text("recall_mode: workspace\nauto_write_scope: session\n")
    repo = make_repo("app")
    result = invoke("bind", str(repo))
    assert_clean_failure(result, ExitCode.CONFIG, "recall_mode", "auto_write_scope")
    assert not (repo / MARKER).exists()


def test_data_dir_option_overrides_the_environment(make_repo, isolated_env: Path) -> None:
    other = isolated_env / "other-data"
    repo = make_repo("app")
    ok_json(invoke("--data-dir", str(other), "bind", str(repo), "--json"), "bind")
    assert "id:" + marker_uuid(repo) in index_entries(other)
    assert not (isolated_env / "data" / "identity.json").exists()
    status = ok_json(invoke("--data-dir", str(other), "status", str(repo), "--json"), "status")
    assert status["data_dir"] == str(other)


# --- status -------------------------------------------------------------------------------

def test_status_json_for_a_bound_workspace(make_repo, data_dir: Path) -> None:
    repo = make_repo("app")
    (repo / "src").mkdir()
    invoke("bind", str(repo))
    workspace_uuid = marker_uuid(repo)
    document = ok_json(invoke("status", "--json", cwd=repo / "src"), "status")
    assert set(document) >= STATUS_FIELDS
    assert document["mode"] == "workspace"
    assert document["bound"] is True
    assert document["reason"] == "marker"
    assert document["namespace"] == expected_namespace(workspace_uuid)
    assert document["root"] == str(repo)
    assert document["display_name"] == "app"
    assert document["bank"] == expected_bank(workspace_uuid)
    assert document["db_path"] == str(data_dir / "banks" / document["bank"] / "mnemosyne.db")
    assert document["data_dir"] == str(data_dir)


def test_status_json_for_an_unbound_directory(make_repo, data_dir: Path) -> None:
    repo = make_repo("loose")
    document = ok_json(invoke("status", str(repo), "--json"), "status")
    assert set(document) >= STATUS_FIELDS
    assert document["mode"] == "workspace"
    assert document["bound"] is False
    assert document["reason"] == "unbound"
    for key in ("namespace", "root", "display_name", "bank", "db_path"):
        assert document[key] is None, key
    assert document["data_dir"] == str(data_dir)


def test_status_human_output(make_repo) -> None:
    repo = make_repo("app")
    unbound = invoke("status", str(repo))
    assert unbound.exit_code == 0
    assert "unbound" in unbound.stdout
    assert "mnemo bind" in unbound.stdout
    invoke("bind", str(repo))
    bound = invoke("status", str(repo))
    assert bound.exit_code == 0
    assert "bound" in bound.stdout
    assert expected_namespace(marker_uuid(repo)) in bound.stdout


def test_status_in_session_mode(make_repo) -> None:
    config = Path(os.environ["MNEMO_CONFIG"])
    config.parent.mkdir(parents=True)
    config.write_text("recall_mode: session\n")
    repo = make_repo("app")
    invoke("bind", str(repo))
    without = ok_json(invoke("status", str(repo), "--json"), "status")
    assert (without["mode"], without["bound"], without["reason"], without["namespace"]) == (
        "session", False, "no-session", None)
    human = invoke("status", str(repo))
    assert human.exit_code == 0
    assert "no-session" in human.stdout and "--session" in human.stdout
    with_id = ok_json(invoke("status", str(repo), "--session", "abc", "--json"), "status")
    assert (with_id["bound"], with_id["namespace"]) == (True, "dsh_v2_session_abc")
    assert with_id["bank"] == expected_bank(marker_uuid(repo))


def test_status_with_an_illegal_config_names_both_keys(make_repo) -> None:
    config = Path(os.environ["MNEMO_CONFIG"])
    config.parent.mkdir(parents=True)
    config.write_text("auto_write_scope: session\n")
    result = invoke("status", str(make_repo("app")), "--json")
    assert_clean_failure(result, ExitCode.CONFIG, "recall_mode", "auto_write_scope")


def test_status_of_a_missing_path_fails_cleanly(isolated_env: Path) -> None:
    assert_clean_failure(invoke("status", str(isolated_env / "nope")), ExitCode.REFUSED,
                         "does not exist")


def test_status_reports_a_corrupt_index_and_carries_on(make_repo, data_dir: Path) -> None:
    repo = make_repo("app")
    invoke("bind", str(repo))
    (data_dir / "identity.json").write_bytes(b"\xff\xfe garbage")
    result = invoke("status", str(repo))
    assert result.exit_code == 0, result.output
    assert "corrupt" in result.stderr
    assert expected_namespace(marker_uuid(repo)) in result.stdout
    kept = [p for p in data_dir.iterdir() if ".corrupt-" in p.name]
    assert [p.read_bytes() for p in kept] == [b"\xff\xfe garbage"]


def test_status_reports_an_ignored_marker(make_repo) -> None:
    repo = make_repo("app")
    (repo / MARKER).write_text("nonsense\n")
    result = invoke("status", str(repo))
    assert result.exit_code == 0
    assert "Ignored" in result.stderr
    assert str(repo / MARKER) in result.stderr


# --- workspaces ---------------------------------------------------------------------------

def test_workspaces_when_there_are_none() -> None:
    result = invoke("workspaces")
    assert result.exit_code == 0
    assert "No workspaces yet" in result.stdout
    document = ok_json(invoke("workspaces", "--json"), "workspaces")
    assert document["workspaces"] == []
    assert isinstance(document["orphans"], list)
    assert "suggestions" in document


def test_workspaces_json_lists_bound_workspaces(make_repo) -> None:
    repos = [make_repo(name) for name in ("alpha", "beta")]
    for repo in repos:
        invoke("bind", str(repo))
    document = ok_json(invoke("workspaces", "--json"), "workspaces")
    rows = {row["display_name"]: row for row in document["workspaces"]}
    assert set(rows) == {"alpha", "beta"}
    for repo in repos:
        row = rows[repo.name]
        workspace_uuid = marker_uuid(repo)
        assert row["identity_key"] == "id:" + workspace_uuid
        assert row["namespace"] == expected_namespace(workspace_uuid)
        assert row["bank"] == expected_bank(workspace_uuid)
        assert row["last_seen_path"] == str(repo)
        assert row["state"] == "bound"
    human = invoke("workspaces")
    assert human.exit_code == 0
    assert "alpha" in human.stdout and "beta" in human.stdout


def test_workspaces_with_a_corrupt_index(data_dir: Path) -> None:
    data_dir.mkdir()
    (data_dir / "identity.json").write_text('{"version": 1, "workspaces": [{"identityKey": 7}]}')
    result = invoke("workspaces")
    assert result.exit_code == 0, result.output
    assert "corrupt" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("content", (
    b"[" * 100_000, b'{"workspaces": ' + b"[" * 100_000, b'{"a":' * 100_000,
    b"\xff\xfe garbage", b""))
def test_workspaces_survives_any_set_aside_index_copy(data_dir: Path, content: bytes) -> None:
    """A kept-aside `identity.json.corrupt-*` is read for orphan hints on every run: deep
    nesting used to raise RecursionError there, a traceback until the file was deleted."""
    data_dir.mkdir()
    (data_dir / "identity.json.corrupt-20260101T000000-000").write_bytes(content)
    for _ in range(2):
        result = invoke("workspaces")
        assert result.exit_code == 0, result.output
        assert "Traceback" not in result.output
        assert ok_json(invoke("workspaces", "--json"), "workspaces")["orphans"] == []


def test_a_truncated_set_aside_copy_still_names_where_an_orphan_lived(make_repo,
                                                                     data_dir: Path) -> None:
    repo = make_repo("lost-project")
    bound = ok_json(invoke("bind", str(repo), "--json"), "bind")
    assert invoke("remember", "The staging database runs on port 5433.",
                  cwd=repo).exit_code == 0
    text = (data_dir / "identity.json").read_bytes()
    # The index is lost with the marker; a truncated copy of it was kept aside.
    cut = text.rindex(b"}", 0, text.index(b'"declined"')) + 1  # after the entry, no "]"
    (data_dir / "identity.json.corrupt-20260101T000000-000").write_bytes(text[:cut])
    for name in ("identity.json", "identity.json.last-good"):
        (data_dir / name).unlink()
    (repo / ".mnemosyne-id").unlink()
    (orphan,) = ok_json(invoke("workspaces", "--json"), "workspaces")["orphans"]
    assert orphan["namespace"] == bound["namespace"]
    assert orphan["last_seen_path"] == str(repo)


def test_help_lists_the_workspace_commands() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("bind", "status", "workspaces"):
        assert command in result.stdout


def test_a_package_inside_a_bound_repository_gets_its_own_memory_with_new(make_repo) -> None:
    """A monorepo: `mnemo bind PATH` on a directory inside a bound repository says it
    shares the repository's memory and how to give it one of its own; `--new` does."""
    repo = make_repo("mono")
    package = repo / "packages" / "api"
    package.mkdir(parents=True)
    outer = ok_json(invoke("bind", str(repo), "--json"), "bind")
    asked = invoke("bind", str(package))
    assert asked.exit_code == 0 and "Already bound" in asked.output
    assert f"`mnemo bind --new {package}` gives it a memory of its own" in asked.output
    assert not (package / MARKER).exists()
    own = ok_json(invoke("bind", "--new", str(package), "--json"), "bind")
    assert own["status"] == "bound" and own["root"] == str(package)
    assert own["namespace"] != outer["namespace"] and (package / MARKER).exists()
    # The package's files are its own workspace now; the repository's stay the repository's.
    (package / "src").mkdir()
    status = ok_json(invoke("status", str(package / "src"), "--json"), "status")
    assert status["namespace"] == own["namespace"]
    assert ok_json(invoke("status", str(repo), "--json"), "status")["namespace"] \
        == outer["namespace"]
    # Bound, it is no longer "inside" anything: no advice, and --new binds nothing twice.
    again = invoke("bind", "--new", str(package), "--json")
    assert ok_json(again, "bind")["status"] == "already-bound"
    assert "--new" not in again.stderr
    # The repository's own root with --new is not a sub-directory: still already bound.
    assert ok_json(invoke("bind", "--new", str(repo), "--json"), "bind")["namespace"] \
        == outer["namespace"]
