"""The upgrade path end to end, through the installed `mnemo` script.

A DSH plugin data directory (built with upstream Mnemosyne, with the plugin's
own identity.json and markers) is used with `--data-dir`, then planned, run,
checked, reverted and run again; every row is accounted for by id throughout.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from dsh_mnemo import paths
from dsh_mnemo.workspace import identity
from tests.conftest import mnemo_executable
from tests.migrate.conftest import (
    ORPHAN_UUID,
    OWNED_UUID,
    audit,
    copy_database,
    rows_by_key,
    uuid_namespace,
)

pytestmark = pytest.mark.e2e


def test_a_dsh_data_directory_upgrades_and_reverts_with_every_row_accounted_for(
        dsh_template: Path, tmp_path: Path, projects: Path):
    dsh_dir = tmp_path / "dsh-home" / "mnemosyne"
    copy_database(dsh_template, dsh_dir / "mnemosyne.db")
    repo = projects / "my-repo"
    repo.mkdir()
    (repo / identity.MARKER_NAME).write_text(identity.marker_text(OWNED_UUID))
    owned = uuid_namespace(OWNED_UUID)
    # The plugin's own index: no `bank` field, plus its extra metadata.
    (dsh_dir / "identity.json").write_text(json.dumps({"version": 1, "workspaces": [{
        "identityKey": f"id:{OWNED_UUID}", "namespace": owned, "displayName": "my-repo",
        "canonicalPath": str(repo), "lastSeenPath": str(repo), "dshWorkspaceId": None,
        "boundAt": 1756000000000, "proposedAt": None, "declinedAt": None,
        "supersededBy": None}]}))
    env = {k: v for k, v in os.environ.items() if k != "MNEMO_DATA_DIR"}

    def mnemo(*args: str, code: int = 0) -> dict:
        done = subprocess.run([mnemo_executable(), "--data-dir", str(dsh_dir), *args, "--json"],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == code, (args, done.stderr)
        return json.loads(done.stdout)

    before = audit(dsh_dir)
    ids = rows_by_key(paths.default_db_path(dsh_dir), "working_memory")
    plans = {}
    for selector in ([], ["--legacy-dsh"], ["--default-to-global"]):
        plans[tuple(selector)] = mnemo("migrate", "plan", *selector, "--check", code=8)
        assert mnemo("migrate", "run", *selector, "--yes")["status"] == "moved"
        assert mnemo("migrate", "plan", *selector, "--check")["pending"] == 0
        assert audit(dsh_dir) == before
    assert [n["source"] for g in plans[()]["groups"] for n in g["namespaces"]] == [owned]
    bank = rows_by_key(paths.bank_db_path(identity.bank_for(owned), dsh_dir), "working_memory")
    assert {k for k, v in ids.items() if v[0] in (owned, "dsh_s1", "dsh_s2")} == set(bank)
    workspaces = mnemo("workspaces")
    assert [o["namespace"] for o in workspaces["orphans"]] == [uuid_namespace(ORPHAN_UUID)]
    for _ in range(3):
        assert mnemo("migrate", "revert", "--yes")["status"] == "reverted"
    assert audit(dsh_dir) == before
    assert rows_by_key(paths.default_db_path(dsh_dir), "working_memory") == ids
    assert mnemo("migrate", "run", "--legacy-dsh", "--yes")["status"] == "moved"
    assert mnemo("migrate", "run", "--legacy-dsh", "--yes")["status"] == "nothing-to-do"
    assert audit(dsh_dir) == before
