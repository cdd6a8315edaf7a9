"""Helpers of the workspace tests (identity, index, context, bind/status).

The naming formulas are recomputed here from scratch with hashlib and a
regex, never through `dsh_mnemo.workspace.identity`, so a bug there cannot hide in the test.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from tests.conftest import REPO_ROOT

MARKER = ".mnemosyne-id"
MARKER_LINE = re.compile(
    r"^mnemosyne-workspace-v1: ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")

# A git that never asks for an identity and ignores the user's git config.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
}


def expected_namespace(workspace_uuid: str) -> str:
    """dsh_v2_workspace_ + sha256("id:" + uuid), 64 lower-case hex."""
    return "dsh_v2_workspace_" + hashlib.sha256(f"id:{workspace_uuid}".encode()).hexdigest()


def expected_bank(workspace_uuid: str) -> str:
    """ws- + the first 48 hex digits of the namespace hash."""
    return "ws-" + hashlib.sha256(f"id:{workspace_uuid}".encode()).hexdigest()[:48]


def marker_uuid(directory: Path) -> str:
    """The UUID of `directory/.mnemosyne-id`, parsed independently of mnemo."""
    lines = [line.strip() for line in (directory / MARKER).read_text().splitlines()
             if line.strip() and not line.strip().startswith("#")]
    assert len(lines) == 1, lines
    match = MARKER_LINE.match(lines[0])
    assert match, lines[0]
    return match.group(1)


def write_marker_file(directory: Path, workspace_uuid: str | None = None) -> str:
    """Hand-write a marker, as a user copying one from another checkout would."""
    workspace_uuid = workspace_uuid or str(uuid.uuid4())
    (directory / MARKER).write_text(f"mnemosyne-workspace-v1: {workspace_uuid}\n")
    return workspace_uuid


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, check=True,
                          capture_output=True, text=True)
    return done.stdout


def commit_all(repo: Path, message: str = "c") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)


def add_submodule(make_repo) -> tuple[Path, Path]:
    """`app` with the repository `lib` added as the submodule `vendor/lib` (real git)."""
    lib = make_repo("lib")
    (lib / "lib.txt").write_text("l")
    commit_all(lib)
    app = make_repo("app")
    (app / "app.txt").write_text("a")
    commit_all(app)
    git(app, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib),
        "vendor/lib")
    sub = app / "vendor" / "lib"
    assert (sub / ".git").is_file()
    return app, sub


def read_index(data_dir: Path) -> dict[str, Any]:
    return json.loads((data_dir / "identity.json").read_text(encoding="utf-8"))


def index_entries(data_dir: Path) -> dict[str, dict[str, Any]]:
    """identity.json entries by identityKey."""
    return {e["identityKey"]: e for e in read_index(data_dir)["workspaces"]}


def python_env(**extra: str | None) -> dict[str, str]:
    """The current (isolated) environment for a child Python, plus overrides."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT)
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run_python(code: str, *, env: dict[str, str] | None = None, cwd: Path | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], env=env or python_env(), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)
