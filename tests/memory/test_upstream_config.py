"""Upstream's settings singleton built from a kept parse of its config.yaml
(`upstream_config`): the same object upstream builds itself, without PyYAML."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_mnemo import paths
from dsh_mnemo.memory import upstream_config
from tests.conftest import REPO_ROOT

# One process: open a bank, recall from it; report what upstream's settings
# object holds and whether PyYAML was imported.
CHILD = textwrap.dedent("""
    import json, sys
    from dsh_mnemo.memory import driver, upstream_config
    parses = []
    upstream_config.before_parse = lambda: parses.append(1)
    if sys.argv[1] == "failing-switch":
        upstream_config.before_parse = lambda: parses.append(1) or 1 / 0
    from dsh_mnemo.memory.targets import Target
    t = Target(bank="ws-" + "0" * 47 + "1", namespace="ns-1", level="workspace")
    if sys.argv[1] == "write":
        driver.remember(t, "We deploy with make release from the main branch.",
                        source="user", importance=0.5)
    hits = driver.recall(t, "deploy release", top_k=3)
    config = sys.modules["mnemosyne.core.config"]
    inst = config.MnemosyneConfig._instance
    print(json.dumps({"yaml": "yaml" in sys.modules, "hits": len(hits),
                      "attrs": sorted(vars(inst)), "path": str(inst._config_path),
                      "mtime": inst._yaml_mtime, "flat": inst._yaml_cache,
                      "sleep": config.get_config().get_bool("auto_sleep_enabled", None),
                      "before_parse": len(parses)}))
""")


def child(mode: str = "read") -> dict:
    import os

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def cache() -> Path:
    return paths.data_dir() / "cache" / upstream_config.CACHE_NAME


def upstream_yaml() -> Path:
    return paths.data_dir() / "config.yaml"


def test_the_next_process_gets_upstreams_own_settings_without_yaml(isolated_env: Path) -> None:
    first = child("write")  # upstream seeds config.yaml; its parse is kept
    assert upstream_yaml().is_file() and cache().is_file()
    assert first["yaml"] is True and first["hits"] == 1
    kept = cache().read_bytes()
    cache().unlink()
    parsed = child()  # upstream parses its file again, as it always did
    assert parsed["yaml"] is True
    assert cache().read_bytes() == kept
    primed = child()
    assert primed["yaml"] is False and primed["hits"] == 1
    for key in ("attrs", "path", "mtime", "flat", "sleep"):
        assert primed[key] == parsed[key], key
    assert tuple(primed["attrs"]) == upstream_config.ATTRIBUTES
    # the hook's libyaml switch runs only before a parse upstream does itself
    assert (first["before_parse"], parsed["before_parse"], primed["before_parse"]) == (1, 1, 0)


def test_an_edited_upstream_file_is_parsed_by_upstream(isolated_env: Path) -> None:
    child("write")
    child()
    assert cache().is_file()
    text = upstream_yaml().read_text()
    assert "auto_sleep_enabled: true" in text
    upstream_yaml().write_text(text.replace("auto_sleep_enabled: true",
                                            "auto_sleep_enabled: false"))
    edited = child()
    assert edited["yaml"] is True and edited["sleep"] is False
    again = child()
    assert again["yaml"] is False and again["sleep"] is False


def test_a_credential_in_upstreams_file_is_never_copied(isolated_env: Path) -> None:
    child("write")
    text = upstream_yaml().read_text()
    assert "llm_api_key: ''" in text
    upstream_yaml().write_text(text.replace("llm_api_key: ''", "llm_api_key: sk-test-123456"))
    cache().unlink(missing_ok=True)
    child()
    child()
    assert not cache().exists()
    assert child()["yaml"] is True  # parsed by upstream in every process instead


@pytest.mark.parametrize("damage", ["garbage", "other-key", "other-path"])
def test_a_damaged_or_foreign_cache_means_upstreams_parse(isolated_env: Path,
                                                          damage: str) -> None:
    child("write")
    child()
    kept = json.loads(cache().read_text())
    if damage == "garbage":
        cache().write_bytes(b"{\x00")
    elif damage == "other-key":
        cache().write_text(json.dumps({**kept, "key": "3.15.1:" + "0" * 16,
                                       "flat": {"auto_sleep_enabled": False}}))
    else:
        cache().write_text(json.dumps({**kept, "path": "/elsewhere/config.yaml"}))
    got = child()
    assert got["yaml"] is True and got["sleep"] is True
    assert json.loads(cache().read_text()) == kept  # rewritten from upstream's parse


def test_keep_refuses_a_settings_object_of_another_shape(isolated_env: Path) -> None:
    class Config:  # stands in for the module: an upstream whose object has more state
        class MnemosyneConfig:
            _instance = None

    class Settings:
        def __init__(self) -> None:
            self._config_path = upstream_yaml()
            self._yaml_cache = {"a": 1}
            self._yaml_lock = None
            self._yaml_mtime = 0.0
            self._env_overrides = {}

    upstream_yaml().parent.mkdir(parents=True, exist_ok=True)
    upstream_yaml().write_text("a: 1\n")
    inst = Settings()
    inst._yaml_mtime = upstream_yaml().stat().st_mtime
    Config.MnemosyneConfig._instance = inst
    assert upstream_config.keep(Config) is False
    del inst._env_overrides
    assert upstream_config.keep(Config) is True


def test_a_failing_yaml_switch_does_not_fail_the_open(isolated_env: Path) -> None:
    child("write")
    cache().unlink()
    got = child("failing-switch")  # upstream parses; the switch before it raises
    assert got["before_parse"] == 1 and got["hits"] == 1 and got["sleep"] is True
