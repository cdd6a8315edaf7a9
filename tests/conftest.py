"""Test isolation, and what every area of the suite shares.

No test may touch a real user store: HOME, the mnemo data and config paths,
and Mnemosyne's own data dir are all redirected into `tmp_path` for every
test, the process environment is restored after it, and cached upstream
instances are dropped between tests.

Shared here: the one bind helper (`bind_repo`) and bind fixture (`repo`), the
one config helper (`configure`), and the paths of the repository.  Each area
(`tests/<area>/conftest.py`) adds its own fixtures and inspection helpers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("MNEMOSYNE_NO_EMBEDDINGS", "1")
os.environ["MNEMOSYNE_LLM_ENABLED"] = "false"

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    saved = dict(os.environ)
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
    # Installed wrappers run `mnemo hook` in a process of their own unless a test
    # asks for the resident server (tests/server, the real harnesses): a server
    # per test would outlive it.
    monkeypatch.setenv("MNEMO_NO_SERVER", "1")
    for var in ("CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR", "QWEN_PROJECT_DIR",
                "GEMINI_SESSION_ID", "GEMINI_CWD", "MNEMO_SESSION_ID", "MNEMO_TEST_FAULT",
                "MNEMO_HOOK_TEST_DELAY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    from dsh_mnemo.memory import driver, semantic

    driver.reset_cache()  # upstream instances of the previous test's data dir
    semantic.reset()
    yield tmp_path
    stop_server(data)
    driver.reset_cache()
    # Commands export Mnemosyne's environment into os.environ themselves.
    os.environ.clear()
    os.environ.update(saved)


def stop_server(data: Path) -> None:
    """Stop a resident server a test left running in `data` (killed if it will not stop)."""
    import json
    import signal

    from dsh_mnemo.server import client

    run = Path(client.run_dir(str(data)))
    if not client.server_running(str(run)):
        return
    from dsh_mnemo.server import state

    state.stop(data, timeout=5.0)
    if client.server_running(str(run)):
        try:
            pid = json.loads((run / client.STATE_NAME).read_text(encoding="utf-8"))["pid"]
            os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            pass


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


@dataclass(frozen=True)
class Repo:
    path: Path
    namespace: str
    bank: str

    def db(self, data_dir: Path) -> Path:
        from dsh_mnemo import paths

        return paths.bank_db_path(self.bank, data_dir)


def bind_repo(path: Path, workspace_uuid: str | None = None) -> Repo:
    """Bind `path` through the real `bind` (with a given marker UUID, as an
    earlier install would have written it) and return its identity."""
    from dsh_mnemo.workspace import binding, identity

    path.mkdir(parents=True, exist_ok=True)
    if workspace_uuid is not None:
        (path / identity.MARKER_NAME).write_text(identity.marker_text(workspace_uuid))
    result = binding.bind(path)
    assert result.namespace and result.bank
    return Repo(path=path, namespace=result.namespace, bank=result.bank)


@pytest.fixture
def repo(make_repo) -> Path:
    """A bound git repository, `app`."""
    path = make_repo("app")
    bind_repo(path)
    return path


def configure(**values: object) -> object:
    """Write the config file (`a__b=1` is the key `a.b`), then load it as a command does.

    Hooks get a roomy deadline unless a test sets one: a loaded CI machine
    must not turn a slow hook into a missing row.  Recall is lexical unless
    the test sets `embeddings__backend`: running the embedding model in every
    hook process of the suite would double its time (the semantic recall
    tests, the relevance benchmark and the real harnesses use it).
    """
    from dsh_mnemo.cli.common import settings

    path = Path(os.environ["MNEMO_CONFIG"])
    path.parent.mkdir(parents=True, exist_ok=True)
    values = {"hooks__deadline_seconds": 10.0, "embeddings__backend": "none", **values}
    tree: dict[str, object] = {}
    for dotted, value in values.items():
        node = tree
        *parents, leaf = dotted.replace("__", ".").split(".")
        for part in parents:
            node = node.setdefault(part, {})  # type: ignore[assignment]
        node[leaf] = value
    path.write_text(yaml.safe_dump(tree), encoding="utf-8")
    return settings()


def mnemo_executable() -> str:
    """The installed `mnemo` console script next to this interpreter."""
    candidate = Path(sys.executable).with_name("mnemo")
    if candidate.exists():
        return str(candidate)
    found = shutil.which("mnemo")
    if not found:
        pytest.fail("the mnemo console script is not installed; run scripts/bootstrap.sh")
    return found
