"""Orphans and suggestions in `mnemo workspaces`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_mnemo import paths
from dsh_mnemo.cli import app
from dsh_mnemo.config import load_settings
from dsh_mnemo.memory import driver
from dsh_mnemo.memory import store as storage
from dsh_mnemo.workspace import identity
from dsh_mnemo.workspace.context import resolve_memory_context
from dsh_mnemo.workspace.index import Index
from tests.conftest import bind_repo
from tests.migrate.conftest import ORPHAN_UUID, OWNED_UUID, uuid_namespace

runner = CliRunner()
OWNED = uuid_namespace(OWNED_UUID)
ORPHAN = uuid_namespace(ORPHAN_UUID)


def workspaces_json() -> dict:
    result = runner.invoke(app, ["workspaces", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stdout
    return json.loads(result.stdout)


def remember_in(repo: Path, text: str) -> None:
    driver.reset_cache()
    ctx = resolve_memory_context(repo, None, load_settings())
    assert storage.remember(ctx, text).id


def test_dsh_era_namespaces_without_an_entry_are_orphans(dsh_data: Path, projects: Path):
    bind_repo(projects / "owned", OWNED_UUID)
    report = workspaces_json()
    orphans = {o["namespace"]: o for o in report["orphans"]}
    assert set(orphans) == {ORPHAN}  # owned has an entry; sessions are not workspaces
    orphan = orphans[ORPHAN]
    assert orphan["where"] == "default" and orphan["rows"] == 2
    assert orphan["first"] <= orphan["last"]
    assert orphan["command"] == f"mnemo adopt {ORPHAN} PATH"
    assert [p["namespace"] for p in report["pending"]] == [OWNED]
    human = runner.invoke(app, ["workspaces"], catch_exceptions=False).stdout
    assert ORPHAN in human and "mnemo migrate run" in human


def test_a_bank_on_disk_unknown_to_the_index_is_an_orphan(projects: Path, data_dir: Path):
    repo = bind_repo(projects / "lost", "11111111-2222-4333-8444-555555555555").path
    remember_in(repo, "The staging database runs on port 5433.")
    remember_in(repo, "Deployments happen on Tuesdays.")
    namespace = uuid_namespace("11111111-2222-4333-8444-555555555555")
    paths.index_path(data_dir).unlink()
    (repo / identity.MARKER_NAME).unlink()
    report = workspaces_json()
    (orphan,) = report["orphans"]
    assert orphan["namespace"] == namespace
    assert orphan["where"] == f"bank:{identity.bank_for(namespace)}"
    assert orphan["rows"] == 2


def dsh_index(namespace: str, workspace_uuid: str, last_seen: str) -> str:
    return json.dumps({"version": 1, "workspaces": [
        {"identityKey": f"id:{workspace_uuid}", "namespace": namespace,
         "displayName": Path(last_seen).name, "canonicalPath": last_seen,
         "lastSeenPath": last_seen, "dshWorkspaceId": None, "boundAt": 1,
         "proposedAt": None, "declinedAt": None, "supersededBy": None}]})


def test_a_set_aside_index_names_where_an_orphan_lived_and_suggests_it(
        dsh_data: Path, projects: Path, monkeypatch: pytest.MonkeyPatch):
    old_home = str(projects / "old-place" / "webapp")
    aside = paths.index_path(dsh_data).with_name("identity.json.corrupt-20260101T000000-000")
    aside.write_text(dsh_index(ORPHAN, ORPHAN_UUID, old_home))
    here = projects / "new-place" / "webapp"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    report = workspaces_json()
    index_before = Index().load().to_json()
    orphan = next(o for o in report["orphans"] if o["namespace"] == ORPHAN)
    assert orphan["last_seen_path"] == old_home
    (suggestion,) = report["suggestions"]
    assert suggestion["kind"] == "orphan" and suggestion["rows"] == 2
    assert suggestion["command"] == f"mnemo adopt {ORPHAN} {here}"
    # Never merged automatically: nothing bound, nothing written.
    assert not (here / identity.MARKER_NAME).exists()
    assert Index().load().to_json() == index_before
    human = runner.invoke(app, ["workspaces"], catch_exceptions=False).stdout
    assert "Candidate" in human and "never merged" in human


def test_the_dsh_plugins_own_index_makes_its_namespaces_pending_not_orphans(
        dsh_data: Path, projects: Path):
    old_home = str(projects / "webapp")
    paths.index_path(dsh_data).write_text(dsh_index(ORPHAN, ORPHAN_UUID, old_home))
    report = workspaces_json()
    assert ORPHAN not in {o["namespace"] for o in report["orphans"]}
    assert ORPHAN in {p["namespace"] for p in report["pending"]}
    plan = json.loads(runner.invoke(app, ["migrate", "plan", "--json"]).stdout)
    assert [ns["source"] for g in plan["groups"] for ns in g["namespaces"]] == [ORPHAN]


def test_an_entry_last_seen_under_the_same_name_is_a_candidate(
        projects: Path, monkeypatch: pytest.MonkeyPatch):
    repo = bind_repo(projects / "first" / "service", "22222222-2222-4333-8444-555555555555").path
    remember_in(repo, "The service exposes metrics on /metrics.")
    checkout = projects / "second" / "service"
    checkout.mkdir(parents=True)
    monkeypatch.chdir(checkout)
    (suggestion,) = workspaces_json()["suggestions"]
    assert suggestion["kind"] == "workspace" and suggestion["rows"] == 1
    assert suggestion["last_seen_path"] == str(repo)
    assert suggestion["command"].startswith(f"mnemo rebind {checkout} --from ")
    # A directory with memories of its own gets no candidates.
    other = bind_repo(checkout, "33333333-2222-4333-8444-555555555555").path
    remember_in(other, "This checkout has its own notes.")
    assert workspaces_json()["suggestions"] == []


def test_an_empty_bank_is_not_an_orphan(projects: Path, data_dir: Path):
    repo = bind_repo(projects / "empty", "44444444-2222-4333-8444-555555555555").path
    driver.init_bank(paths.bank_db_path(
        identity.bank_for(uuid_namespace("44444444-2222-4333-8444-555555555555")), data_dir))
    shutil.rmtree(repo)
    paths.index_path(data_dir).unlink()
    assert workspaces_json()["orphans"] == []
