"""A corrupt index is rebuilt from its last good copy and what still parses, and said so.

Markers give back a bound workspace's namespace (it is minted from the
marker's identity), but not the namespace of a *rebound* or *adopted*
directory: only the index maps those identities to another workspace's
memory.  Losing the index used to move such a directory silently to a new,
empty namespace.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_mnemo.cli import app
from dsh_mnemo.config import load_settings
from dsh_mnemo.faults import EXIT_CODE
from dsh_mnemo.memory import driver
from dsh_mnemo.memory import store as storage
from dsh_mnemo.workspace import identity
from dsh_mnemo.workspace.context import resolve_memory_context
from dsh_mnemo.workspace.index import (
    Index,
    WorkspaceEntry,
    pending_notices,
    read_notices,
    salvage,
)
from tests.conftest import bind_repo, mnemo_executable

runner = CliRunner()


def remember(path: Path, text: str) -> None:
    driver.reset_cache()
    assert storage.remember(resolve_memory_context(path, None, load_settings()), text).id


def recall(path: Path, query: str) -> list[str]:
    driver.reset_cache()
    ctx = resolve_memory_context(path, None, load_settings())
    return [m.content for m in storage.recall(ctx, query, top_k=10)]


def cli_json(*args: str, code: int = 0) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def namespace_of(path: Path) -> str | None:
    return resolve_memory_context(path, None, load_settings(), register=False).namespace


class World:
    """A bound workspace A with a memory, B rebound to A's memory, C adopting an orphan."""

    def __init__(self, projects: Path, data_dir: Path) -> None:
        self.data = data_dir
        self.a = bind_repo(projects / "alpha").path
        remember(self.a, "Alpha releases are cut from the main branch every Friday.")
        self.a_namespace = Index().load().workspaces[0].namespace
        self.b = projects / "laptop" / "alpha"
        self.b.mkdir(parents=True)
        assert cli_json("rebind", str(self.b), "--from", self.a_namespace)["status"] \
            == "rebound"
        # An orphan bank: its workspace's entry and marker are gone.
        gone = bind_repo(projects / "gone", "55555555-2222-4333-8444-555555555555").path
        remember(gone, "The cache is warmed by a nightly job.")
        self.orphan = identity.namespace_for(
            identity.identity_key_for("55555555-2222-4333-8444-555555555555"))
        with Index().transaction() as data:
            data.workspaces = [e for e in data.workspaces if e.namespace != self.orphan]
        (gone / identity.MARKER_NAME).unlink()
        self.c = projects / "restored"
        self.c.mkdir()
        assert cli_json("adopt", self.orphan, str(self.c))["status"] == "adopted"
        self.good = (data_dir / "identity.json").read_bytes()
        self.expected = {self.a: self.a_namespace, self.b: self.a_namespace,
                         self.c: self.orphan}

    def check(self) -> None:
        """Every directory still resolves to, and recalls, its original memory."""
        for path, namespace in self.expected.items():
            assert namespace_of(path) == namespace, path
        assert any("Friday" in c for c in recall(self.b, "when are alpha releases cut"))
        assert any("nightly" in c for c in recall(self.c, "cache warmed nightly job"))


@pytest.fixture
def world(projects: Path, data_dir: Path) -> World:
    return World(projects, data_dir)


def truncated(good: bytes) -> bytes:
    return good[: len(good) * 2 // 3]


CORRUPTIONS = {
    "truncated": truncated,
    "garbage": lambda good: b"\x00\xffthis is not json {" * 50,
    "deep-nesting": lambda good: b'{"workspaces": ' + b"[" * 100_000,
    "empty": lambda good: b"",
}


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_rebound_and_adopted_workspaces_keep_their_memory_after_corruption(
        world: World, data_dir: Path, how: str) -> None:
    (data_dir / "identity.json").write_bytes(CORRUPTIONS[how](world.good))
    os.chmod(data_dir / "identity.json", 0o644)
    status = runner.invoke(app, ["status", str(world.b), "--json"])
    assert status.exit_code == 0, status.output
    document = json.loads(status.stdout)
    assert document["namespace"] == world.a_namespace
    assert document["index_recovered_from"]
    (notice,) = document["notices"]
    assert notice["kind"] == "index-recovered"
    assert notice["details"]["workspaces"] == 3  # A (superseded), B rebound to it, C
    assert str(data_dir / "identity.json.last-good") in notice["details"]["restored_from"]
    assert "last good copy" in " ".join(status.stderr.split())
    world.check()
    # The rebind source is still known by its namespace and its path.
    d = world.b.parent.parent / "desktop" / "alpha"
    d.mkdir(parents=True)
    assert cli_json("rebind", str(d), "--from", world.a_namespace)["namespace"] \
        == world.a_namespace
    kept = Path(document["index_recovered_from"])
    assert kept.read_bytes() == CORRUPTIONS[how](world.good)
    assert kept.stat().st_mode & 0o077 == 0  # private, though the damaged file was 0644


def test_without_a_last_good_copy_the_entries_that_still_parse_are_salvaged(
        world: World, data_dir: Path) -> None:
    """An index written by an older mnemo (no last good copy), truncated at its end."""
    (data_dir / "identity.json.last-good").unlink()
    raw = json.loads(world.good)
    order = [e["namespace"] for e in raw["workspaces"]]
    # Everything up to the middle of the last entry survives the cut.
    (data_dir / "identity.json").write_bytes(world.good[:world.good.rindex(b'"boundAt"')])
    index = Index()
    data = index.load()
    assert index.recovery is not None
    assert index.recovery.from_corrupt == len(order) - 1 == len(data.workspaces)
    assert index.recovery.restored_from == [index.recovery.moved_to]
    assert "salvaged from the corrupt file" in index.recovery.describe()
    # The adopted workspace (last) lost its entry; the rebound one kept it.
    assert namespace_of(world.b) == world.a_namespace


def test_an_entry_that_still_parses_in_the_corrupt_file_wins_over_the_last_good_copy(
        world: World, data_dir: Path) -> None:
    """The last good copy can lag (an index written by something else since)."""
    raw = json.loads(world.good)
    raw["workspaces"][0]["displayName"] = "renamed-after-the-last-good-copy"
    text = json.dumps(raw, indent=2).encode()
    (data_dir / "identity.json").write_bytes(text[: text.rindex(b"]")])  # unterminated
    data = Index().load()
    assert data.workspaces[0].displayName == "renamed-after-the-last-good-copy"
    world.check()


def test_a_recovery_by_a_hook_or_recall_is_shown_by_status_once_and_by_doctor_always(
        world: World, data_dir: Path) -> None:
    (data_dir / "identity.json").write_bytes(b"garbage")
    # A process that is not `status` recovers the index: here a recall.
    assert any("Friday" in c for c in recall(world.b, "when are alpha releases cut"))
    assert len(pending_notices(data_dir)) == 1
    for _ in range(2):  # doctor reports, and never clears
        result = runner.invoke(app, ["doctor", "--json"])
        check = {c["name"]: c for c in json.loads(result.stdout)["checks"]}["notices"]
        assert check["status"] == "warn" and "mnemo status" in check["fix"]
        assert len(check["details"]["pending"]) == 1
    shown = runner.invoke(app, ["status", str(world.a)])
    assert shown.exit_code == 0
    assert "was corrupt" in " ".join(shown.stderr.split())
    assert pending_notices(data_dir) == []
    assert len(read_notices(data_dir)) == 1  # kept, marked seen
    again = cli_json("status", str(world.a))
    assert again["notices"] == [] and again["index_recovered_from"] is None
    result = runner.invoke(app, ["doctor", "--json"])
    check = {c["name"]: c for c in json.loads(result.stdout)["checks"]}["notices"]
    assert check["status"] == "ok"


def test_a_hook_that_recovers_the_index_leaves_a_notice(world: World, data_dir: Path) -> None:
    (data_dir / "identity.json").write_bytes(b"{")
    payload = json.dumps({"cwd": str(world.b), "session_id": "s1",
                          "prompt": "when are alpha releases cut?"})
    done = subprocess.run([mnemo_executable(), "hook", "prompt", "--harness", "generic"],
                          input=payload, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ))
    assert done.returncode == 0
    (notice,) = pending_notices(data_dir)
    assert notice.kind == "index-recovered" and notice.details["from_last_good"] == 3
    assert cli_json("status", str(world.b))["notices"][0]["id"] == notice.id
    world.check()


@pytest.mark.e2e
@pytest.mark.parametrize("point", ("index-after-set-aside", "index-after-write"))
def test_a_recovery_killed_half_way_is_finished_by_the_next_command(
        world: World, data_dir: Path, point: str) -> None:
    (data_dir / "identity.json").write_bytes(b"garbage")
    env = dict(os.environ, MNEMO_TEST_FAULT=point)
    killed = subprocess.run([mnemo_executable(), "status", str(world.b)], env=env,
                            capture_output=True, text=True, timeout=60)
    assert killed.returncode == EXIT_CODE, killed.stderr
    status = cli_json("status", str(world.b))
    assert status["namespace"] == world.a_namespace
    assert status["notices"] and all(n["kind"] == "index-recovered"
                                     for n in status["notices"])
    assert [p.read_bytes() for p in data_dir.glob("identity.json.corrupt-*")][:1] \
        == [b"garbage"]
    world.check()


@pytest.mark.parametrize("content", (b"garbage", b"[" * 100_000, b'{"notices": 5}',
                                     b'{"notices": [{"id": 1}]}'))
def test_a_damaged_notices_file_never_breaks_status_or_doctor(
        repo: Path, data_dir: Path, content: bytes) -> None:
    (data_dir / "notices.json").write_bytes(content)
    assert cli_json("status", str(repo))["notices"] == []
    result = runner.invoke(app, ["doctor", "--json"])
    assert "Traceback" not in result.output
    (data_dir / "identity.json").write_bytes(b"garbage")
    (notice,) = cli_json("status", str(repo))["notices"]
    assert notice["details"]["from_last_good"] == 1


# --- salvage ------------------------------------------------------------------------


def _entry(key: str) -> dict:
    return WorkspaceEntry(identityKey=key, namespace=f"ns-{key}", bank=f"bank-{key}",
                          lastSeenPath=f"/p/{key}").to_json()


@pytest.mark.parametrize("text", (
    "", "garbage", "[" * 100_000, '{"a":' * 100_000, "{" * 1_000_000, '{"' * 500_000,
    '{"version": 1, "workspaces": [' + '{"identityKey": ' * 50_000))
def test_salvage_of_hostile_input_is_empty_and_quick(text: str) -> None:
    import time

    started = time.monotonic()
    assert salvage(text).workspaces == []
    assert time.monotonic() - started < 5


def test_salvage_finds_whole_entries_between_damage() -> None:
    good = [_entry("id:a"), _entry("id:b"), _entry("id:c")]
    text = ('{"version": 1, "workspaces": [' + json.dumps(good[0]) + ", \x00\x00 garbage "
            + json.dumps(good[1]) + ', {"identityKey": "id:broken", "names'
            + json.dumps(good[2]) + '], "declined": [{"path": "/p/x", "declinedAt": 5}, {"pa')
    found = salvage(text)
    assert [e.identityKey for e in found.workspaces] == ["id:a", "id:b", "id:c"]
    assert [(d.path, d.declinedAt) for d in found.declined] == [("/p/x", 5)]


def test_salvage_skips_wrongly_typed_entries_and_keeps_the_first_of_duplicates() -> None:
    bad = {**_entry("id:a"), "boundAt": "yesterday"}
    first, second = _entry("id:b"), {**_entry("id:b"), "displayName": "second"}
    found = salvage(json.dumps([bad, first, second]))
    assert [(e.identityKey, e.displayName) for e in found.workspaces] == [("id:b", "")]
