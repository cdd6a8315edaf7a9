"""The workspace index, identity.json: atomic, locked, recoverable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_mnemo.config import Settings
from dsh_mnemo.errors import BusyError, ExitCode
from dsh_mnemo.fsutil import release_lock, try_lock
from dsh_mnemo.workspace import binding as workspace
from dsh_mnemo.workspace.context import resolve_memory_context
from dsh_mnemo.workspace.index import Index, IndexData, WorkspaceEntry
from tests.workspace.conftest import (
    expected_bank,
    expected_namespace,
    index_entries,
    marker_uuid,
    python_env,
    read_index,
)


def _entry(key: str, superseded_by: str | None = None) -> WorkspaceEntry:
    return WorkspaceEntry(identityKey=key, namespace=f"ns-{key}", bank=f"bank-{key}",
                          supersededBy=superseded_by)


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --- reading and writing ------------------------------------------------------------------

def test_missing_index_loads_empty_and_writes_nothing(data_dir: Path) -> None:
    index = Index()
    assert index.path == data_dir / "identity.json"
    data = index.load()
    assert data.workspaces == [] and data.declined == []
    assert not data_dir.exists() or not (data_dir / "identity.json").exists()
    assert index.recovery is None


def test_transaction_writes_the_documented_shape(data_dir: Path) -> None:
    with Index().transaction() as data:
        data.workspaces.append(WorkspaceEntry(
            identityKey="id:a", namespace="dsh_v2_workspace_" + "a" * 64, bank="ws-" + "a" * 48,
            displayName="a", canonicalPath="/p/a", lastSeenPath="/p/a", boundAt=1756000000000))
    raw = read_index(data_dir)
    assert raw["version"] == 1
    (entry,) = raw["workspaces"]
    assert entry == {
        "identityKey": "id:a", "namespace": "dsh_v2_workspace_" + "a" * 64,
        "bank": "ws-" + "a" * 48, "displayName": "a", "canonicalPath": "/p/a",
        "lastSeenPath": "/p/a", "boundAt": 1756000000000, "proposedAt": None,
        "declinedAt": None, "supersededBy": None}
    assert Index().load().workspaces[0] == Index().load().workspaces[0]
    assert Index().load().by_identity("id:a").displayName == "a"


def test_the_directories_a_marker_was_seen_at_before_are_kept(data_dir: Path) -> None:
    with Index().transaction() as data:
        data.register("id:a", Path("/p/a"))
    assert "previousPaths" not in read_index(data_dir)["workspaces"][0]  # none yet
    def seen_at(*places: str) -> WorkspaceEntry:
        for place in places:
            with Index().transaction() as data:
                data.register("id:a", Path(place))
        return Index().load().by_identity("id:a")

    # each once (the directory seen now is not among them), oldest first
    entry = seen_at("/p/copy", "/p/a", "/p/copy")
    assert (entry.lastSeenPath, entry.previousPaths) == ("/p/copy", ["/p/a"])
    entry = seen_at("/p/a", "/p/b")
    assert (entry.lastSeenPath, entry.previousPaths) == ("/p/b", ["/p/copy", "/p/a"])
    # the newest 8 only
    entry = seen_at(*(f"/p/m{i}" for i in range(10)))
    assert entry.lastSeenPath == "/p/m9" and entry.canonicalPath == "/p/a"
    assert entry.previousPaths == [f"/p/m{i}" for i in range(1, 9)]
    assert read_index(data_dir)["workspaces"][0]["previousPaths"] == entry.previousPaths
    raw = read_index(data_dir)
    raw["workspaces"][0]["previousPaths"] = "/p/a"
    with pytest.raises(ValueError, match="previousPaths"):
        WorkspaceEntry.from_json(raw["workspaces"][0])


def test_transaction_leaves_no_temp_files(data_dir: Path) -> None:
    for key in ("id:a", "id:b", "id:c"):
        with Index().transaction() as data:
            data.workspaces.append(_entry(key))
    assert _files(data_dir) == ["identity.json", "identity.json.last-good", "identity.json.lock"]
    assert [e.identityKey for e in Index().load().workspaces] == ["id:a", "id:b", "id:c"]


def test_a_transaction_sweeps_what_a_killed_writer_left(data_dir: Path) -> None:
    """atomic_write_text leaves its temporary file behind when the process is killed;
    under the index lock no other writer is mid-write, so any such file is stale."""
    data_dir.mkdir()
    left = [data_dir / ".identity.json.k1ll3d.tmp", data_dir / ".identity.json.last-good.x.tmp",
            data_dir / ".notices.json.y.tmp"]
    for path in left:
        path.write_text("half")
    other = data_dir / ".something-else.tmp"
    other.write_text("not ours")
    with Index().transaction() as data:
        data.workspaces.append(_entry("id:a"))
    assert not any(p.exists() for p in left) and other.exists()


def test_a_load_sweeps_them_too_unless_a_writer_holds_the_lock(data_dir: Path) -> None:
    """A command killed mid-write and run again may find its work done and only
    load the index: the temporary file its first run left must still go."""
    with Index().transaction() as data:
        data.workspaces.append(_entry("id:a"))
    left = data_dir / ".identity.json.last-good.k1ll3d.tmp"
    left.write_text("half")
    index = Index()
    held = try_lock(index.lock_path)
    assert held is not None
    try:
        assert [e.identityKey for e in index.load().workspaces] == ["id:a"]
        assert left.exists()  # a writer may be mid-write: not ours to remove
    finally:
        os.close(held)
    assert [e.identityKey for e in index.load().workspaces] == ["id:a"]
    assert not left.exists()


def test_failed_transaction_changes_nothing(data_dir: Path) -> None:
    with Index().transaction() as data:
        data.workspaces.append(_entry("id:a"))
    before = (data_dir / "identity.json").read_bytes()
    with pytest.raises(RuntimeError), Index().transaction() as data:
        data.workspaces.clear()
        raise RuntimeError("boom")
    assert (data_dir / "identity.json").read_bytes() == before


def test_a_crash_during_the_write_keeps_the_old_file(data_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with Index().transaction() as data:
        data.workspaces.append(_entry("id:a"))
    before = (data_dir / "identity.json").read_bytes()

    def crash(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    import dsh_mnemo.fsutil as fsutil

    monkeypatch.setattr(fsutil.os, "replace", crash)
    with pytest.raises(OSError), Index().transaction() as data:
        data.workspaces.append(_entry("id:b"))
    assert (data_dir / "identity.json").read_bytes() == before
    assert _files(data_dir) == ["identity.json", "identity.json.last-good", "identity.json.lock"]


def test_a_held_lock_is_reported_as_busy(data_dir: Path) -> None:
    index = Index(lock_timeout=0.2)
    fd = try_lock(index.lock_path)
    assert fd is not None
    try:
        with pytest.raises(BusyError) as caught, index.transaction():
            pass
        assert caught.value.exit_code == ExitCode.BUSY
    finally:
        release_lock(fd)
    with index.transaction() as data:  # free again once released
        data.workspaces.append(_entry("id:a"))


# --- corruption ---------------------------------------------------------------------------

CORRUPT = {
    "garbage": b"this is not json {",
    "empty": b"",
    "wrong-version": b'{"version": 2, "workspaces": []}',
    "boolean-version": b'{"version": true, "workspaces": []}',
    "no-version": b'{"workspaces": []}',
    "non-utf8": b'{"version": 1, "workspaces": [{"identityKey": "id:\xff\xfe"}]}',
    "top-level-list": b"[1, 2, 3]",
    "workspaces-not-list": b'{"version": 1, "workspaces": {}}',
    "entry-not-object": b'{"version": 1, "workspaces": ["id:a"]}',
    "entry-without-namespace": b'{"version": 1, "workspaces": [{"identityKey": "id:a"}]}',
    "null-path": (b'{"version": 1, "workspaces": [{"identityKey": "id:a", "namespace": "n",'
                  b' "bank": "b", "lastSeenPath": 5}]}'),
    "text-timestamp": (b'{"version": 1, "workspaces": [{"identityKey": "id:a",'
                       b' "namespace": "n", "bank": "b", "boundAt": "yesterday"}]}'),
    "deep-nesting": b"[" * 100_000,
    "nul-bytes": b'{"version": 1,\x00 "workspaces": []}',
}


@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_corrupt_index_is_moved_aside_kept_and_reported(data_dir: Path, name: str) -> None:
    data_dir.mkdir()
    content = CORRUPT[name]
    (data_dir / "identity.json").write_bytes(content)
    index = Index()
    data = index.load()
    assert data.workspaces == []
    assert index.recovery is not None
    assert index.recovery.reason
    moved = Path(index.recovery.moved_to)
    assert moved.parent == data_dir
    assert moved.name.startswith("identity.json.corrupt-")
    assert moved.read_bytes() == content  # kept byte for byte
    assert read_index(data_dir) == {"version": 1, "workspaces": [], "declined": []}


def test_two_recoveries_never_overwrite_an_earlier_corrupt_copy(data_dir: Path) -> None:
    data_dir.mkdir()
    kept = []
    for content in (b"first garbage", b"second garbage", b"third garbage"):
        (data_dir / "identity.json").write_bytes(content)
        index = Index()
        index.load()
        assert index.recovery is not None
        kept.append(Path(index.recovery.moved_to))
    assert len(set(kept)) == 3
    assert [p.read_bytes() for p in kept] == [b"first garbage", b"second garbage",
                                               b"third garbage"]


def test_an_index_that_is_a_directory_is_a_clear_error(data_dir: Path) -> None:
    (data_dir / "identity.json").mkdir(parents=True)
    from dsh_mnemo.errors import DataError

    with pytest.raises(DataError, match="cannot read"):
        Index().load()


def test_corrupt_index_is_rebuilt_from_markers_as_they_are_seen(make_repo,
                                                                 data_dir: Path) -> None:
    repos = [make_repo(name) for name in ("one", "two")]
    bound = [workspace.bind(repo) for repo in repos]
    (data_dir / "identity.json").write_text("{corrupt")
    (data_dir / "identity.json.last-good").unlink()  # as an older mnemo left it
    ctx = resolve_memory_context(repos[0] / ".", None, Settings())
    assert ctx.bound
    assert ctx.namespace == bound[0].namespace == expected_namespace(marker_uuid(repos[0]))
    assert ctx.bank == expected_bank(marker_uuid(repos[0]))
    entries = index_entries(data_dir)
    assert list(entries) == [bound[0].identity_key]
    assert entries[bound[0].identity_key]["lastSeenPath"] == str(repos[0])
    # The second repository comes back the next time it is seen.
    again = workspace.bind(repos[1])
    assert again.status == "already-bound"
    assert again.namespace == bound[1].namespace
    assert set(index_entries(data_dir)) == {b.identity_key for b in bound}
    corrupt_copies = [p for p in data_dir.iterdir() if ".corrupt-" in p.name]
    assert len(corrupt_copies) == 1
    assert corrupt_copies[0].read_text() == "{corrupt"


# --- moving ---------------------------------------------------------------------------

def test_last_seen_path_follows_a_moved_repository(make_repo, projects: Path,
                                                   data_dir: Path) -> None:
    repo = make_repo("app")
    result = workspace.bind(repo)
    first = index_entries(data_dir)[result.identity_key]
    moved = projects / "renamed" / "app2"
    moved.parent.mkdir()
    shutil.move(str(repo), str(moved))
    ctx = resolve_memory_context(moved, None, Settings())
    assert ctx.namespace == result.namespace
    assert ctx.root == str(moved)
    after = index_entries(data_dir)[result.identity_key]
    assert after["lastSeenPath"] == str(moved)
    assert after["canonicalPath"] == first["canonicalPath"] == str(repo)
    assert after["boundAt"] == first["boundAt"]
    assert after["namespace"] == first["namespace"]
    assert len(index_entries(data_dir)) == 1


def test_seeing_a_workspace_where_it_was_does_not_rewrite_the_index(make_repo,
                                                                    data_dir: Path) -> None:
    repo = make_repo("app")
    workspace.bind(repo)
    path = data_dir / "identity.json"
    before = (path.stat().st_ino, path.read_bytes())
    resolve_memory_context(repo, None, Settings())
    assert (path.stat().st_ino, path.read_bytes()) == before


# --- supersededBy -----------------------------------------------------------------------

def test_active_for_follows_the_superseded_chain() -> None:
    data = IndexData(workspaces=[_entry("id:a", "id:b"), _entry("id:b", "id:c"),
                                 _entry("id:c")])
    assert data.active_for("id:a").identityKey == "id:c"
    assert data.active_for("id:b").identityKey == "id:c"
    assert data.active_for("id:c").identityKey == "id:c"
    assert data.active_for("id:zzz") is None


def test_active_for_stops_at_a_missing_successor_and_at_cycles() -> None:
    dangling = IndexData(workspaces=[_entry("id:a", "id:gone")])
    assert dangling.active_for("id:a").identityKey == "id:a"
    cycle = IndexData(workspaces=[_entry("id:a", "id:b"), _entry("id:b", "id:a")])
    assert cycle.active_for("id:a").identityKey in ("id:a", "id:b")


def test_superseded_entry_resolves_to_its_successors_namespace(make_repo,
                                                               data_dir: Path) -> None:
    repo = make_repo("app")
    old = workspace.bind(repo)
    with Index().transaction() as data:
        data.workspaces.append(_entry("id:successor"))
        data.by_identity(old.identity_key).supersededBy = "id:successor"
    ctx = resolve_memory_context(repo, None, Settings())
    assert ctx.namespace == "ns-id:successor"
    assert ctx.bank == "bank-id:successor"
    raw = index_entries(data_dir)
    assert raw[old.identity_key]["supersededBy"] == "id:successor"
    assert raw["id:successor"]["lastSeenPath"] == str(repo)


# --- an index written by the DSH plugin ------------------------------------------------

def test_a_dsh_plugin_index_loads_and_keeps_its_fields(data_dir: Path) -> None:
    namespace = "dsh_v2_workspace_" + "b" * 64
    data_dir.mkdir()
    (data_dir / "identity.json").write_text(json.dumps({
        "version": 1, "writer": "dsh-plugin",
        "workspaces": [{
            "identityKey": "id:0b9c", "namespace": namespace, "displayName": "old",
            "canonicalPath": "/home/u/old", "lastSeenPath": "/home/u/old",
            "dshWorkspaceId": None, "boundAt": 1756000000000, "proposedAt": None,
            "declinedAt": None, "supersededBy": None}]}))
    index = Index()
    (entry,) = index.load().workspaces
    assert index.recovery is None
    assert entry.bank == "ws-" + "b" * 48  # minted as a bind would have
    with index.transaction() as data:
        data.workspaces.append(_entry("id:new"))
    raw = read_index(data_dir)
    assert raw["writer"] == "dsh-plugin"
    assert raw["workspaces"][0]["dshWorkspaceId"] is None
    assert "dshWorkspaceId" in raw["workspaces"][0]
    assert raw["workspaces"][0]["bank"] == "ws-" + "b" * 48
    assert [e["identityKey"] for e in raw["workspaces"]] == ["id:0b9c", "id:new"]


# --- concurrent writers ------------------------------------------------------------------

WRITER = """
import sys, time
from pathlib import Path
from dsh_mnemo.workspace import binding as workspace
from dsh_mnemo.workspace.index import Index, WorkspaceEntry

go, repo, rounds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
while not go.exists():
    time.sleep(0.002)
result = workspace.bind(repo)
index = Index()
for i in range(rounds):
    with index.transaction() as data:
        data.workspaces.append(WorkspaceEntry(
            identityKey=f"id:extra-{repo.name}-{i}", namespace="n", bank="b"))
print(result.namespace)
"""


def test_concurrent_writers_lose_nothing(make_repo, isolated_env: Path,
                                         data_dir: Path) -> None:
    writers, rounds = 8, 15
    repos = [make_repo(f"r{i}") for i in range(writers)]
    go = isolated_env / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(go), str(repo), str(rounds)],
                              env=python_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for repo in repos]
    time.sleep(0.3)  # let every interpreter start and wait at the barrier
    go.touch()
    outputs = [proc.communicate(timeout=60) for proc in procs]
    for proc, (_, stderr) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, stderr
    raw = read_index(data_dir)  # valid JSON, or this raises
    keys = [e["identityKey"] for e in raw["workspaces"]]
    assert len(keys) == len(set(keys)) == writers * (rounds + 1)
    for repo, (stdout, _) in zip(repos, outputs, strict=True):
        workspace_uuid = marker_uuid(repo)
        assert stdout.strip() == expected_namespace(workspace_uuid)
        entry = index_entries(data_dir)["id:" + workspace_uuid]
        assert entry["namespace"] == expected_namespace(workspace_uuid)
        assert entry["lastSeenPath"] == str(repo)
        for i in range(rounds):
            assert f"id:extra-{repo.name}-{i}" in keys
    assert not [p for p in data_dir.iterdir() if p.name.endswith(".tmp")]


def test_read_only_callers_leave_a_corrupt_index_where_it_is(repo: Path, data_dir: Path) -> None:
    from typer.testing import CliRunner

    from dsh_mnemo.cli import app

    index = data_dir / "identity.json"
    index.write_text('{"version": 1, "workspaces": [{"broken": ', encoding="utf-8")
    before = index.read_bytes()
    # peek() shows what a recovery would restore (here: the last good copy) ...
    (entry,) = Index(data_dir).peek().workspaces
    assert entry.lastSeenPath == str(repo)
    # resolving without registering (doctor, plans) reads through peek()
    ctx = resolve_memory_context(repo, None, Settings(), register=False)
    assert ctx.bound and ctx.workspace is not None and ctx.namespace == entry.namespace
    runner = CliRunner()
    for argv in (["doctor", str(repo), "--json"], ["migrate", "plan", "--to", str(repo),
                                                    "--json"]):
        result = runner.invoke(app, argv)
        assert result.exit_code in (0, 8), result.output
    # ... and moves nothing.
    assert index.read_bytes() == before
    assert not list(data_dir.glob("identity.json.corrupt-*"))
