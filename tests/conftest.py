"""Test isolation: every user directory points into `tmp_path`.

No test may touch a real user store: HOME, the mnemo data and config paths,
and Mnemosyne's own data dir are all redirected for every test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("MNEMOSYNE_NO_EMBEDDINGS", "1")
os.environ["MNEMOSYNE_LLM_ENABLED"] = "false"


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    data = tmp_path / "data"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MNEMO_DATA_DIR", str(data))
    monkeypatch.setenv("MNEMO_CONFIG", str(tmp_path / "config" / "config.yaml"))
    monkeypatch.setenv("MNEMOSYNE_DATA_DIR", str(data))
    monkeypatch.setenv("MNEMOSYNE_NO_EMBEDDINGS", "1")
    monkeypatch.setenv("MNEMOSYNE_LLM_ENABLED", "false")
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hermes-home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    for var in ("CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR", "QWEN_PROJECT_DIR",
                "GEMINI_SESSION_ID", "GEMINI_CWD"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def data_dir(isolated_env: Path) -> Path:
    return isolated_env / "data"


@pytest.fixture
def projects(isolated_env: Path) -> Path:
    """A directory for test repositories, inside the fake HOME."""
    root = isolated_env / "home" / "src"
    root.mkdir()
    return root


def git_init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@pytest.fixture
def make_repo(projects: Path):
    def make(name: str = "repo") -> Path:
        return git_init(projects / name)

    return make


def mnemo_executable() -> str:
    """The installed `mnemo` console script next to this interpreter."""
    candidate = Path(sys.executable).with_name("mnemo")
    if candidate.exists():
        return str(candidate)
    found = shutil.which("mnemo")
    if not found:
        pytest.fail("the mnemo console script is not installed; run scripts/bootstrap.sh")
    return found
