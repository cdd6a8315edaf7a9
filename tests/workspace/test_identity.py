"""Workspace identity: the marker, the names minted from it, the upward search."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

import pytest

from dsh_mnemo.errors import ExitCode, RefusedError
from dsh_mnemo.workspace import identity
from dsh_mnemo.workspace.identity import (
    MarkerError,
    check_bindable,
    find_workspace,
    parse_marker,
    read_marker,
    write_marker,
)
from tests.conftest import git_init
from tests.workspace.conftest import (
    MARKER,
    add_submodule,
    commit_all,
    expected_bank,
    expected_namespace,
    git,
    marker_uuid,
    run_python,
    write_marker_file,
)

UUID = "9f2c6a8e-1b3d-4c5e-8f70-a1b2c3d4e5f6"
LINE = f"mnemosyne-workspace-v1: {UUID}"


# --- parsing ----------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    LINE,
    LINE + "\n",
    f"# written by mnemo bind\n\n{LINE}\n\n# trailing comment\n",
    f"  {LINE}  \r\n",
    f"mnemosyne-workspace-v1:{UUID}\n",
])
def test_valid_markers_parse(text: str) -> None:
    assert parse_marker(text) == UUID


@pytest.mark.parametrize("text, reason", [
    (LINE.upper().replace("MNEMOSYNE-WORKSPACE-V1:", "mnemosyne-workspace-v1:"),
     "lower-case"),
    (f"mnemosyne-workspace-v1: {{{UUID}}}", "canonical"),
    (f"mnemosyne-workspace-v1: {UUID.replace('-', '')}", "canonical"),
    (f"mnemosyne-workspace-v1: urn:uuid:{UUID}", "canonical"),
    ("mnemosyne-workspace-v1: not-a-uuid", "not a UUID"),
    ("mnemosyne-workspace-v1: ", "not a UUID"),
    (f"mnemosyne-workspace-v2: {UUID}", "expected a line"),
    (f"mnemosyne-workspace-v10: {UUID}", "expected a line"),
    (f"dsh-workspace-v1: {UUID}", "expected a line"),
    (UUID, "expected a line"),
    (f"{LINE}\n{LINE}\n", "more than one"),
    (f"{LINE}\nsomething else\n", "more than one"),
    ("", "no identity line"),
    ("# only a comment\n\n", "no identity line"),
])
def test_invalid_markers_are_refused_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(MarkerError) as caught:
        parse_marker(text, Path("/x/.mnemosyne-id"))
    assert reason in caught.value.reason
    assert "/x/.mnemosyne-id" in caught.value.message
    assert caught.value.exit_code == ExitCode.DATA


@pytest.mark.parametrize("content, reason", [
    (LINE.encode() + b"\x00\n", "NUL"),
    (b"\x00" + LINE.encode(), "NUL"),
    (b"mnemosyne-workspace-v1: \xff\xfe\n", "UTF-8"),
    (b"", "no identity line"),
    (b"#" * (70 * 1024), "too large"),
])
def test_read_marker_refuses_bad_bytes(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / MARKER
    path.write_bytes(content)
    with pytest.raises(MarkerError) as caught:
        read_marker(path)
    assert reason in caught.value.reason


def test_read_marker_refuses_a_directory(tmp_path: Path) -> None:
    (tmp_path / MARKER).mkdir()
    with pytest.raises(MarkerError, match="not a regular file"):
        read_marker(tmp_path / MARKER)


def test_read_marker_refuses_an_endless_device(tmp_path: Path) -> None:
    (tmp_path / MARKER).symlink_to("/dev/zero")
    with pytest.raises(MarkerError, match="not a regular file"):
        read_marker(tmp_path / MARKER)


def test_a_fifo_marker_does_not_hang_the_search(make_repo) -> None:
    repo = make_repo("app")
    os.mkfifo(repo / MARKER)
    # In a child with a timeout: a regression would block on the FIFO forever.
    done = run_python("from pathlib import Path\n"
                      "from dsh_mnemo.workspace.identity import find_workspace\n"
                      "loc = find_workspace(Path.cwd())\n"
                      "print(loc.found, [p.reason for p in loc.problems])",
                      cwd=repo, timeout=20)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False ['not a regular file']"


def test_a_dangling_symlink_marker_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / MARKER).symlink_to(tmp_path / "nowhere")
    with pytest.raises(MarkerError, match="unreadable"):
        read_marker(tmp_path / MARKER)


# --- names --------------------------------------------------------------------------------

def test_namespace_and_bank_follow_the_spec_formula() -> None:
    for workspace_uuid in (UUID, str(uuid.uuid4()), str(uuid.uuid4())):
        key = identity.identity_key_for(workspace_uuid)
        assert key == "id:" + workspace_uuid
        digest = hashlib.sha256(("id:" + workspace_uuid).encode("utf-8")).hexdigest()
        namespace = identity.namespace_for(key)
        assert namespace == "dsh_v2_workspace_" + digest
        assert len(namespace) == len("dsh_v2_workspace_") + 64
        assert namespace == expected_namespace(workspace_uuid)
        bank = identity.bank_for(namespace)
        assert bank == "ws-" + digest[:48] == expected_bank(workspace_uuid)
        assert identity.is_workspace_namespace(namespace)


def test_same_identity_key_always_mints_the_same_namespace() -> None:
    key = identity.identity_key_for(UUID)
    assert identity.namespace_for(key) == identity.namespace_for("id:" + UUID)
    assert identity.namespace_for(key) != identity.namespace_for(
        identity.identity_key_for(str(uuid.uuid4())))


@pytest.mark.parametrize("value", [
    "dsh_v2_workspace_" + "A" * 64, "dsh_v2_workspace_" + "a" * 63, "dsh_v2_session_x",
    "default", "dsh_" + "a" * 64, "dsh_v2_workspace_" + "g" * 64,
])
def test_bank_for_refuses_what_is_not_a_workspace_namespace(value: str) -> None:
    assert not identity.is_workspace_namespace(value)
    with pytest.raises(ValueError):
        identity.bank_for(value)


def test_session_namespace() -> None:
    assert identity.session_namespace("abc") == "dsh_v2_session_abc"


def test_new_uuids_are_canonical_and_distinct() -> None:
    first, second = identity.new_workspace_uuid(), identity.new_workspace_uuid()
    assert first != second
    assert parse_marker(identity.marker_text(first)) == first


# --- writing ------------------------------------------------------------------------------

def test_write_marker_writes_one_parseable_line(tmp_path: Path) -> None:
    tmp_path = tmp_path / "w"
    tmp_path.mkdir()
    target = write_marker(tmp_path, UUID)
    assert target == tmp_path / MARKER
    assert target.read_text() == f"mnemosyne-workspace-v1: {UUID}\n"
    assert marker_uuid(tmp_path) == UUID
    assert read_marker(target) == UUID
    assert [p.name for p in tmp_path.iterdir()] == [MARKER]  # no temp file left


def test_write_marker_never_overwrites(tmp_path: Path) -> None:
    tmp_path = tmp_path / "w"
    tmp_path.mkdir()
    (tmp_path / MARKER).write_text("precious\n")
    with pytest.raises(identity.MarkerExistsError) as caught:
        write_marker(tmp_path, UUID)
    assert caught.value.exit_code == ExitCode.REFUSED
    assert (tmp_path / MARKER).read_text() == "precious\n"
    assert [p.name for p in tmp_path.iterdir()] == [MARKER]


def test_write_marker_is_not_blocked_by_a_stale_temp_file(tmp_path: Path) -> None:
    # What a bind killed between writing its temp file and linking it leaves.
    stale = tmp_path / f".{MARKER}.{os.getpid()}.tmp"
    stale.write_text("half")
    write_marker(tmp_path, UUID)
    assert read_marker(tmp_path / MARKER) == UUID


def test_write_marker_into_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RefusedError):
        write_marker(tmp_path / "gone", UUID)


# --- the upward search --------------------------------------------------------------------

def test_marker_found_from_a_deep_subdirectory(make_repo) -> None:
    repo = make_repo("app")
    deep = repo / "src" / "pkg" / "mod"
    deep.mkdir(parents=True)
    write_marker_file(repo, UUID)
    location = find_workspace(deep)
    assert location.found
    assert location.workspace_uuid == UUID
    assert location.root == repo
    assert location.marker_path == repo / MARKER
    assert location.git_top == repo
    assert location.stopped_at == "marker"


def test_find_workspace_from_a_file_uses_its_directory(make_repo) -> None:
    repo = make_repo("app")
    write_marker_file(repo, UUID)
    (repo / "README").write_text("x")
    assert find_workspace(repo / "README").root == repo


def test_nearest_marker_wins(make_repo) -> None:
    repo = make_repo("mono")
    sub = repo / "packages" / "api"
    sub.mkdir(parents=True)
    outer, inner = write_marker_file(repo), write_marker_file(sub)
    assert find_workspace(sub / ".").workspace_uuid == inner
    (sub / "lib").mkdir()
    assert find_workspace(sub / "lib").workspace_uuid == inner
    assert find_workspace(repo / "packages").workspace_uuid == outer
    assert find_workspace(repo).workspace_uuid == outer


def test_nested_repository_does_not_inherit_its_parents_marker(make_repo) -> None:
    outer = make_repo("outer")
    write_marker_file(outer)
    nested = git_init(outer / "vendor" / "lib")
    (nested / "src").mkdir()
    location = find_workspace(nested / "src")
    assert not location.found
    assert location.git_top == nested
    assert location.stopped_at == "git-top"
    assert location.root is None


def test_walk_stops_at_home_and_ignores_a_marker_there(isolated_env: Path) -> None:
    home = isolated_env / "home"
    write_marker_file(home)
    notes = home / "notes" / "today"
    notes.mkdir(parents=True)
    location = find_workspace(notes)
    assert not location.found
    assert location.stopped_at == "home"
    assert not find_workspace(home).found


def test_marker_in_a_plain_directory_under_home_is_found(isolated_env: Path) -> None:
    project = isolated_env / "home" / "notes"
    (project / "a" / "b").mkdir(parents=True)
    write_marker_file(project, UUID)
    assert find_workspace(project / "a" / "b").root == project


def test_walk_outside_home_goes_up_to_the_root(isolated_env: Path) -> None:
    # tmp_path is outside the fake HOME: the only stops left are git and /.
    project = isolated_env / "outside"
    (project / "a" / "b").mkdir(parents=True)
    write_marker_file(project, UUID)
    assert find_workspace(project / "a" / "b").root == project


def test_the_filesystem_root_is_never_a_workspace() -> None:
    location = find_workspace(Path("/"))
    assert not location.found
    assert location.stopped_at == "root"


def test_missing_start_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RefusedError, match="does not exist"):
        find_workspace(tmp_path / "nope")


def test_symlinked_path_resolves_to_the_same_workspace(make_repo, isolated_env: Path) -> None:
    repo = make_repo("real")
    (repo / "src").mkdir()
    write_marker_file(repo, UUID)
    link = isolated_env / "home" / "link"
    link.symlink_to(repo)
    via_link = find_workspace(link / "src")
    assert via_link.root == repo
    assert via_link.workspace_uuid == UUID
    assert find_workspace(link).root == find_workspace(repo).root


def test_symlinked_marker_file_is_followed(make_repo, isolated_env: Path) -> None:
    repo = make_repo("real")
    shared = isolated_env / "shared-marker"
    shared.write_text(f"mnemosyne-workspace-v1: {UUID}\n")
    (repo / MARKER).symlink_to(shared)
    assert find_workspace(repo).workspace_uuid == UUID


def test_dangling_marker_symlink_is_a_reported_problem(make_repo, isolated_env: Path) -> None:
    repo = make_repo("real")
    (repo / MARKER).symlink_to(isolated_env / "nowhere")
    location = find_workspace(repo)
    assert not location.found
    assert [p.path for p in location.problems] == [str(repo / MARKER)]


def test_bad_marker_is_reported_and_the_walk_goes_on(make_repo) -> None:
    repo = make_repo("app")
    sub = repo / "sub"
    sub.mkdir()
    write_marker_file(repo, UUID)
    (sub / MARKER).write_text("mnemosyne-workspace-v1: NOT-A-UUID\n")
    location = find_workspace(sub)
    assert location.found
    assert location.root == repo
    assert len(location.problems) == 1
    assert location.problems[0].path == str(sub / MARKER)
    assert "UUID" in location.problems[0].reason


def _worktree_setup(make_repo, projects: Path, marker: bool = True) -> tuple[Path, Path]:
    main = make_repo("main")
    (main / "file.txt").write_text("x")
    commit_all(main)
    if marker:
        write_marker_file(main, UUID)
    linked = projects / "main-feature"
    git(main, "worktree", "add", "-q", "-b", "feature", str(linked))
    return main, linked


def test_linked_worktree_resolves_through_the_main_trees_marker(make_repo,
                                                                projects: Path) -> None:
    main, linked = _worktree_setup(make_repo, projects)
    assert (linked / ".git").is_file()
    assert not (linked / MARKER).exists()
    (linked / "src").mkdir()
    location = find_workspace(linked / "src")
    assert location.found
    assert location.workspace_uuid == UUID
    assert location.root == main
    assert location.via_worktree == main
    assert location.git_top == linked


def test_linked_worktree_with_its_own_marker_uses_it(make_repo, projects: Path) -> None:
    main, linked = _worktree_setup(make_repo, projects)
    own = write_marker_file(linked)
    location = find_workspace(linked)
    assert location.workspace_uuid == own
    assert location.root == linked
    assert location.via_worktree is None


def test_linked_worktree_of_an_unbound_repository_is_unbound(make_repo,
                                                             projects: Path) -> None:
    main, linked = _worktree_setup(make_repo, projects, marker=False)
    location = find_workspace(linked)
    assert not location.found
    assert location.git_top == linked
    assert location.main_worktree == main  # where a bind should go


def test_linked_worktree_reports_a_broken_main_marker(make_repo, projects: Path) -> None:
    main, linked = _worktree_setup(make_repo, projects, marker=False)
    (main / MARKER).write_text("garbage\n")
    location = find_workspace(linked)
    assert not location.found
    assert [p.path for p in location.problems] == [str(main / MARKER)]


def _bare_layout(make_repo, projects: Path, inside_bare: bool) -> tuple[Path, Path, Path]:
    """A bare clone with two worktrees inside its directory: `proj/.bare` with a
    `proj/.git` file (or, `inside_bare`, `proj.git/main`); (container, main, feature)."""
    seed = make_repo("seed")
    (seed / "f.txt").write_text("x")
    commit_all(seed)
    if inside_bare:
        container = projects / "proj.git"
        git(projects, "clone", "-q", "--bare", str(seed), str(container))
        git_dir = container
    else:
        container = projects / "proj"
        git_dir = container / ".bare"
        git(projects, "clone", "-q", "--bare", str(seed), str(git_dir))
        (container / ".git").write_text("gitdir: ./.bare\n")
    main, feature = container / "main", container / "feature"
    git(git_dir, "worktree", "add", "-q", str(main))
    git(git_dir, "worktree", "add", "-q", "-b", "feature", str(feature))
    return container, main, feature


@pytest.mark.parametrize("inside_bare", [False, True])
def test_worktrees_of_a_bare_repository_share_its_directorys_memory(
        make_repo, projects: Path, inside_bare: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_mnemo.workspace import binding

    container, main, feature = _bare_layout(make_repo, projects, inside_bare)
    location = find_workspace(feature)
    assert not location.found
    assert location.main_worktree == container  # where the hint and a bind point
    monkeypatch.chdir(main)
    result = binding.bind()
    assert result.root == str(container)
    for tree in (main, feature):
        location = find_workspace(tree)
        assert location.root == container and location.via_worktree == container


def test_a_worktree_of_a_bare_repository_elsewhere_stands_alone(make_repo,
                                                                projects: Path) -> None:
    seed = make_repo("seed")
    (seed / "f.txt").write_text("x")
    commit_all(seed)
    bare = projects / "proj.git"
    git(projects, "clone", "-q", "--bare", str(seed), str(bare))
    write_marker_file(projects)  # a marker above both must not be reached through git
    tree = projects / "proj-main"
    git(bare, "worktree", "add", "-q", str(tree))
    location = find_workspace(tree)
    assert location.main_worktree is None and location.git_top == tree
    assert location.root is None


def test_an_unbound_submodule_resolves_through_its_superproject(make_repo) -> None:
    app, sub = add_submodule(make_repo)
    write_marker_file(app, UUID)
    (sub / "src").mkdir()
    location = find_workspace(sub / "src")
    assert location.found
    assert location.workspace_uuid == UUID
    assert location.root == app
    assert location.submodule_top == sub
    assert location.git_top == app


def test_a_submodule_in_a_linked_worktree_resolves_through_the_main_tree(
        make_repo, projects: Path) -> None:
    app, _ = add_submodule(make_repo)
    commit_all(app)  # the submodule is part of the history; the marker is not
    write_marker_file(app, UUID)
    linked = projects / "app-feature"
    git(app, "worktree", "add", "-q", "-b", "feature", str(linked))
    git(linked, "-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init")
    sub = linked / "vendor" / "lib"
    assert "worktrees" in (sub / ".git").read_text()
    location = find_workspace(sub)
    assert location.workspace_uuid == UUID
    assert location.root == app and location.via_worktree == app
    assert location.submodule_top == sub


def test_a_submodule_copied_out_of_its_superproject_stands_alone(make_repo,
                                                                 projects: Path) -> None:
    import shutil

    app, sub = add_submodule(make_repo)
    write_marker_file(app, UUID)
    elsewhere = git_init(projects / "other")
    write_marker_file(elsewhere)
    copy = elsewhere / "lib-copy"
    shutil.copytree(sub, copy)  # its .git file still points into app's .git/modules
    location = find_workspace(copy)
    assert not location.found and location.git_top == copy


def test_an_unbound_submodule_of_an_unbound_superproject_hints_at_the_superproject(
        make_repo) -> None:
    from dsh_mnemo.workspace.context import hint_root_for

    app, sub = add_submodule(make_repo)
    location = find_workspace(sub)
    assert not location.found
    assert location.git_top == app
    assert hint_root_for(location) == app


def test_a_bound_submodule_keeps_its_own_memory(make_repo) -> None:
    app, sub = add_submodule(make_repo)
    write_marker_file(app, UUID)
    own = write_marker_file(sub)
    location = find_workspace(sub)
    assert location.workspace_uuid == own
    assert location.root == sub
    assert location.submodule_top is None


def test_binding_a_submodule_by_name_gives_it_its_own_memory(make_repo) -> None:
    from dsh_mnemo.workspace import binding

    app, sub = add_submodule(make_repo)
    write_marker_file(app, UUID)
    (app / "vendor" / MARKER).write_text("not a marker\n")  # the superproject's problem
    result = binding.bind(sub)
    assert result.status == "bound"
    assert result.root == str(sub)
    assert marker_uuid(sub) != UUID
    assert find_workspace(sub).root == sub


def test_a_nested_repository_that_is_not_a_submodule_is_its_own_project(make_repo) -> None:
    parent = make_repo("parent")
    write_marker_file(parent, UUID)
    inner = git_init(parent / "third_party" / "clone")
    location = find_workspace(inner)
    assert not location.found
    assert location.git_top == inner


@pytest.mark.parametrize("content", ["", "not a gitdir line\n", "gitdir: /does/not/exist\n"])
def test_odd_git_files_stop_the_walk_without_a_crash(make_repo, content: str) -> None:
    parent = make_repo("parent")
    write_marker_file(parent)
    sub = parent / "odd"
    sub.mkdir()
    (sub / ".git").write_text(content)
    location = find_workspace(sub)
    assert not location.found
    assert location.git_top == sub


# --- what may be bound --------------------------------------------------------------------

def test_check_bindable_accepts_a_project_and_resolves_it(projects: Path,
                                                          isolated_env: Path) -> None:
    project = projects / "p"
    project.mkdir()
    link = isolated_env / "plink"
    link.symlink_to(project)
    assert check_bindable(link) == project


def test_check_bindable_refuses_home(isolated_env: Path) -> None:
    with pytest.raises(RefusedError, match="home directory") as caught:
        check_bindable(isolated_env / "home")
    assert caught.value.exit_code == ExitCode.REFUSED
    assert caught.value.hint


def test_check_bindable_refuses_the_temporary_directory_not_what_is_in_it(
        isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scratch folder under /tmp would share the memory of a bound /tmp."""
    temp = isolated_env / "tmp"
    (temp / "scratch").mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(temp))
    for path in (temp, Path("/tmp")):
        with pytest.raises(RefusedError, match="temporary directory"):
            check_bindable(path)
    assert check_bindable(temp / "scratch") == (temp / "scratch").resolve()


def test_check_bindable_refuses_home_through_a_symlink(isolated_env: Path) -> None:
    link = isolated_env / "home-link"
    link.symlink_to(isolated_env / "home")
    with pytest.raises(RefusedError, match="home directory"):
        check_bindable(link)
    (isolated_env / "home" / "sub").mkdir()
    with pytest.raises(RefusedError, match="home directory"):
        check_bindable(isolated_env / "home" / "sub" / "..")


def test_check_bindable_refuses_the_root() -> None:
    with pytest.raises(RefusedError, match="root"):
        check_bindable(Path("/"))


def test_check_bindable_refuses_missing_paths_and_files(tmp_path: Path) -> None:
    with pytest.raises(RefusedError, match="does not exist"):
        check_bindable(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(RefusedError, match="not a directory"):
        check_bindable(tmp_path / "file")
