"""End to end: the installed `mnemo` script in temporary git repositories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import git_init, mnemo_executable
from tests.workspace.conftest import (
    MARKER,
    commit_all,
    expected_bank,
    expected_namespace,
    git,
    index_entries,
    marker_uuid,
)

pytestmark = pytest.mark.e2e


def mnemo(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([mnemo_executable(), *args], cwd=cwd, env=dict(os.environ),
                          capture_output=True, text=True, timeout=60)


def mnemo_json(*args: str, cwd: Path) -> dict[str, Any]:
    done = mnemo(*args, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_bind_status_move_and_nested_repository(make_repo, projects: Path,
                                                data_dir: Path) -> None:
    repo = make_repo("shop")
    (repo / "src" / "app").mkdir(parents=True)

    bound = mnemo("bind", cwd=repo / "src")
    assert bound.returncode == 0, bound.stderr
    assert (repo / MARKER).exists()  # the repository, not the subdirectory
    workspace_uuid = marker_uuid(repo)
    namespace = expected_namespace(workspace_uuid)
    assert namespace in bound.stdout

    status = mnemo_json("status", cwd=repo / "src" / "app")
    assert (status["bound"], status["reason"], status["mode"]) == (True, "marker", "workspace")
    assert status["namespace"] == namespace
    assert status["bank"] == expected_bank(workspace_uuid)
    assert status["root"] == str(repo)
    assert status["data_dir"] == str(data_dir)

    moved = projects / "elsewhere" / "shop-renamed"
    moved.parent.mkdir()
    repo.rename(moved)
    after = mnemo_json("status", cwd=moved / "src" / "app")
    assert after["namespace"] == namespace
    assert after["bank"] == status["bank"]
    assert after["root"] == str(moved)
    entry = index_entries(data_dir)["id:" + workspace_uuid]
    assert entry["lastSeenPath"] == str(moved)
    assert entry["canonicalPath"] == str(repo)

    nested = git_init(moved / "vendor" / "lib")
    inner = mnemo_json("status", str(nested), cwd=moved)
    assert (inner["bound"], inner["reason"], inner["namespace"]) == (False, "unbound", None)


def test_bind_home_is_refused(isolated_env: Path) -> None:
    home = isolated_env / "home"
    for cwd, args in ((isolated_env, ("bind", str(home))), (home, ("bind",)),
                      (isolated_env, ("bind", "/"))):
        done = mnemo(*args, cwd=cwd)
        assert done.returncode == 5, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stdout + done.stderr
        assert "refusing" in done.stderr
    assert not (home / MARKER).exists()


def test_symlinked_path_and_linked_worktree_share_the_namespace(make_repo,
                                                                projects: Path,
                                                                isolated_env: Path) -> None:
    repo = make_repo("lib")
    (repo / "README").write_text("x")
    commit_all(repo)
    bound = mnemo_json("bind", cwd=repo)
    link = isolated_env / "home" / "lib-link"
    link.symlink_to(repo)
    assert mnemo_json("status", cwd=link)["namespace"] == bound["namespace"]
    worktree = projects / "lib-feature"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(worktree))
    assert mnemo_json("status", cwd=worktree)["namespace"] == bound["namespace"]
    assert not (worktree / MARKER).exists()


def test_corrupt_index_is_reported_and_rebuilt(make_repo, data_dir: Path) -> None:
    repo = make_repo("app")
    bound = mnemo_json("bind", cwd=repo)
    (data_dir / "identity.json").write_text("{{{{ not json")
    done = mnemo("status", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "corrupt" in done.stderr
    assert bound["namespace"] in done.stdout
    assert index_entries(data_dir)[bound["identity_key"]]["namespace"] == bound["namespace"]
    kept = [p for p in data_dir.iterdir() if ".corrupt-" in p.name]
    assert [p.read_text() for p in kept] == ["{{{{ not json"]
    listed = mnemo_json("workspaces", cwd=repo)
    assert [w["namespace"] for w in listed["workspaces"]] == [bound["namespace"]]


def _start_together(args_and_cwds: list[tuple[list[str], Path]]) -> list[tuple[int, str, str]]:
    procs = [subprocess.Popen([mnemo_executable(), *args], cwd=cwd, env=dict(os.environ),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for args, cwd in args_and_cwds]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        results.append((proc.returncode, out, err))
    return results


def test_two_binds_of_different_repositories_at_once(make_repo, data_dir: Path) -> None:
    for round_ in range(2):
        repos = [make_repo(f"pair{round_}-{side}") for side in ("a", "b")]
        results = _start_together([(["bind", "--json"], repo) for repo in repos])
        for code, _, err in results:
            assert code == 0, err
        for repo, (_, out, _) in zip(repos, results, strict=True):
            assert json.loads(out)["namespace"] == expected_namespace(marker_uuid(repo))
    entries = index_entries(data_dir)
    assert len(entries) == 4
    assert json.loads((data_dir / "identity.json").read_text())["version"] == 1


def test_two_binds_of_the_same_repository_at_once_agree(make_repo, data_dir: Path) -> None:
    for round_ in range(2):
        repo = make_repo(f"same{round_}")
        results = _start_together([(["bind", "--json"], repo)] * 2)
        for code, _, err in results:
            assert code == 0, err
        documents = [json.loads(out) for _, out, _ in results]
        assert sorted(d["status"] for d in documents) == ["already-bound", "bound"]
        assert {d["namespace"] for d in documents} == {expected_namespace(marker_uuid(repo))}
        assert [p.name for p in repo.iterdir() if p.name.startswith(".mnemosyne")] == [MARKER]
    assert len(index_entries(data_dir)) == 2


def test_a_directory_name_that_is_not_utf8(projects: Path) -> None:
    raw = os.fsencode(projects) + b"/caf\xe9-\xff"
    os.mkdir(raw)
    subprocess.run(["git", "init", "-q", raw], check=True)
    repo = Path(os.fsdecode(raw))
    # A strict stdout, as under en_US.UTF-8; C.UTF-8 would hide the problem.
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    outputs = {}
    for args in (["bind"], ["status", "--json"], ["workspaces"]):
        done = subprocess.run([mnemo_executable(), *args], cwd=raw, env=env,
                              capture_output=True, timeout=60)
        assert done.returncode == 0, (args, done.stderr)
        assert b"Traceback" not in done.stdout + done.stderr
        assert b"caf\xe9-\xff" in done.stdout  # the name comes back byte for byte
        outputs[args[0]] = done.stdout
    status = json.loads(outputs["status"].decode("utf-8", "surrogateescape"))
    assert status["root"] == str(repo)
    assert status["namespace"] == expected_namespace(marker_uuid(repo))


def test_python_dash_m_runs_the_same_cli(make_repo) -> None:
    repo = make_repo("app")
    done = subprocess.run([sys.executable, "-m", "dsh_mnemo", "status", "--json"], cwd=repo,
                          env=dict(os.environ), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["reason"] == "unbound"
