"""resolve_memory_context: the one place that decides where memory goes."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_mnemo.config import Settings, validate
from dsh_mnemo.errors import RefusedError
from dsh_mnemo.workspace import binding as workspace
from dsh_mnemo.workspace.context import resolve_memory_context
from dsh_mnemo.workspace.index import Index
from tests.workspace.conftest import (
    commit_all,
    expected_bank,
    expected_namespace,
    git,
    index_entries,
    marker_uuid,
    write_marker_file,
)

WORKSPACE = Settings()
SESSION = Settings(values=validate({"recall_mode": "session", "auto_write_scope": "session"}))
NARROW = Settings(values=validate({"recall_mode": "session"}))  # recall session, write workspace


@pytest.fixture
def bound_repo(make_repo) -> Path:
    repo = make_repo("bound")
    (repo / "src" / "deep").mkdir(parents=True)
    workspace.bind(repo)
    return repo


@pytest.fixture
def unbound_repo(make_repo) -> Path:
    repo = make_repo("loose")
    (repo / "src").mkdir()
    return repo


def test_bound_workspace_context(bound_repo: Path, data_dir: Path) -> None:
    workspace_uuid = marker_uuid(bound_repo)
    ctx = resolve_memory_context(bound_repo / "src" / "deep", None, WORKSPACE)
    assert ctx.mode == "workspace"
    assert ctx.bound is True
    assert ctx.reason == "marker"
    assert ctx.namespace == expected_namespace(workspace_uuid)
    assert ctx.identity_key == "id:" + workspace_uuid
    assert ctx.root == str(bound_repo)
    assert ctx.display_name == "bound"
    assert ctx.bank == expected_bank(workspace_uuid)
    assert ctx.db_path(data_dir) == data_dir / "banks" / ctx.bank / "mnemosyne.db"
    assert ctx.problems == []


def test_string_cwd_is_accepted(bound_repo: Path) -> None:
    ctx = resolve_memory_context(str(bound_repo / "src"), None, WORKSPACE)
    assert ctx.namespace == expected_namespace(marker_uuid(bound_repo))


def test_unbound_directory_has_no_namespace(unbound_repo: Path) -> None:
    ctx = resolve_memory_context(unbound_repo / "src", "sess-1", WORKSPACE)
    assert ctx.bound is False
    assert ctx.reason == "unbound"
    assert ctx.namespace is None
    assert ctx.identity_key is None
    assert ctx.root is None
    assert ctx.bank is None
    assert ctx.db_path() is None
    assert ctx.hint_root == str(unbound_repo)
    assert not list(unbound_repo.rglob(".mnemosyne-id"))  # only `mnemo bind` writes one


def test_unbound_never_falls_back_to_the_process_cwd(bound_repo: Path, unbound_repo: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(bound_repo / "src")
    ctx = resolve_memory_context(unbound_repo, "sess-1", WORKSPACE)
    assert (ctx.bound, ctx.reason, ctx.namespace, ctx.bank) == (False, "unbound", None, None)


def test_unbound_linked_worktree_hints_at_its_main_tree(make_repo, projects: Path) -> None:
    main = make_repo("main")
    commit_all(main)
    linked = projects / "main-wt"
    git(main, "worktree", "add", "-q", "-b", "wt", str(linked))
    ctx = resolve_memory_context(linked, None, WORKSPACE)
    assert (ctx.bound, ctx.reason) == (False, "unbound")
    assert ctx.hint_root == str(main)


def test_unbound_directory_outside_any_repository(projects: Path) -> None:
    plain = projects / "scratch"
    plain.mkdir()
    ctx = resolve_memory_context(plain, None, WORKSPACE)
    assert (ctx.bound, ctx.reason, ctx.namespace) == (False, "unbound", None)
    assert ctx.hint_root == str(plain)


def test_home_itself_is_unbound_even_with_a_marker(isolated_env: Path) -> None:
    home = isolated_env / "home"
    write_marker_file(home)
    ctx = resolve_memory_context(home, None, WORKSPACE)
    assert (ctx.bound, ctx.namespace) == (False, None)


def test_session_mode_with_a_session_id_in_a_bound_workspace(bound_repo: Path) -> None:
    workspace_uuid = marker_uuid(bound_repo)
    ctx = resolve_memory_context(bound_repo, "abc-123", SESSION)
    assert ctx.mode == "session"
    assert ctx.bound is True
    assert ctx.reason == "session"
    assert ctx.namespace == "dsh_v2_session_abc-123"
    assert ctx.session_id == "abc-123"
    # Session rows of a bound workspace live in that workspace's bank.
    assert ctx.bank == expected_bank(workspace_uuid)
    assert ctx.identity_key == "id:" + workspace_uuid
    assert ctx.root == str(bound_repo)


def test_session_mode_without_a_session_id(bound_repo: Path) -> None:
    for missing in (None, "", "   ", "bad\nid", "x" * 300):
        ctx = resolve_memory_context(bound_repo, missing, SESSION)
        assert ctx.bound is False, missing
        assert ctx.reason == "no-session"
        assert ctx.namespace is None
        assert ctx.bank is None


def test_session_mode_in_an_unbound_directory_uses_the_default_bank(unbound_repo: Path,
                                                                    data_dir: Path) -> None:
    ctx = resolve_memory_context(unbound_repo, "s1", SESSION)
    assert ctx.bound is True
    assert ctx.reason == "session"
    assert ctx.namespace == "dsh_v2_session_s1"
    assert ctx.bank == "default"
    assert ctx.identity_key is None
    assert ctx.db_path(data_dir) == data_dir / "mnemosyne.db"


def test_explicit_mode_overrides_the_recall_mode(bound_repo: Path) -> None:
    """Writers pass auto_write_scope: narrow read, workspace writes."""
    read = resolve_memory_context(bound_repo, "s1", NARROW)
    write = resolve_memory_context(bound_repo, "s1", NARROW, mode=NARROW.auto_write_scope)
    assert read.namespace == "dsh_v2_session_s1"
    assert write.mode == "workspace"
    assert write.namespace == expected_namespace(marker_uuid(bound_repo))
    assert read.bank == write.bank


def test_an_unknown_mode_is_a_programming_error(bound_repo: Path) -> None:
    with pytest.raises(ValueError):
        resolve_memory_context(bound_repo, "s1", WORKSPACE, mode="global")


def test_register_false_writes_nothing(make_repo, data_dir: Path) -> None:
    repo = make_repo("copied")
    workspace_uuid = write_marker_file(repo)  # a marker the index has never seen
    ctx = resolve_memory_context(repo, None, WORKSPACE, register=False)
    assert ctx.namespace == expected_namespace(workspace_uuid)
    assert ctx.bank == expected_bank(workspace_uuid)
    assert not (data_dir / "identity.json").exists()


def test_register_false_leaves_an_existing_index_untouched(bound_repo: Path, make_repo,
                                                           projects: Path,
                                                           data_dir: Path) -> None:
    other = make_repo("other")
    write_marker_file(other)
    moved = projects / "bound-moved"
    bound_repo.rename(moved)
    path = data_dir / "identity.json"
    before = (path.stat().st_ino, path.stat().st_mtime_ns, path.read_bytes())
    resolve_memory_context(other, None, WORKSPACE, register=False)
    ctx = resolve_memory_context(moved, None, WORKSPACE, register=False)
    assert ctx.root == str(moved)
    assert (path.stat().st_ino, path.stat().st_mtime_ns, path.read_bytes()) == before


def test_register_true_records_a_hand_copied_marker(make_repo, data_dir: Path) -> None:
    """Copying a marker to another checkout means "same project"."""
    first, second = make_repo("checkout-a"), make_repo("checkout-b")
    workspace_uuid = write_marker_file(first)
    write_marker_file(second, workspace_uuid)
    a = resolve_memory_context(first, None, WORKSPACE)
    b = resolve_memory_context(second, None, WORKSPACE)
    assert a.namespace == b.namespace == expected_namespace(workspace_uuid)
    entries = index_entries(data_dir)
    assert list(entries) == ["id:" + workspace_uuid]
    assert entries["id:" + workspace_uuid]["lastSeenPath"] == str(second)


def test_problems_are_passed_through(bound_repo: Path) -> None:
    (bound_repo / "src" / ".mnemosyne-id").write_text("mnemosyne-workspace-v2: nope\n")
    ctx = resolve_memory_context(bound_repo / "src", None, WORKSPACE)
    assert ctx.bound
    assert [p.path for p in ctx.problems] == [str(bound_repo / "src" / ".mnemosyne-id")]


def test_missing_directory_is_refused(projects: Path) -> None:
    with pytest.raises(RefusedError):
        resolve_memory_context(projects / "gone", None, WORKSPACE)


def test_explicit_index_argument_is_used(bound_repo: Path, isolated_env: Path) -> None:
    other = Index(isolated_env / "other-data")
    ctx = resolve_memory_context(bound_repo, None, WORKSPACE, index=other)
    assert ctx.namespace == expected_namespace(marker_uuid(bound_repo))
    assert (isolated_env / "other-data" / "identity.json").exists()
