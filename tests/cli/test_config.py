"""Settings: defaults, YAML, strict validation, atomic writes, Mnemosyne's environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from dsh_mnemo import config, paths
from dsh_mnemo.config import (
    ConfigError,
    apply_environment,
    load_settings,
    set_value,
    unset_value,
)
from dsh_mnemo.errors import ExitCode
from tests.workspace.conftest import python_env, run_python


@pytest.fixture
def cfg(isolated_env: Path) -> Path:
    """The config file path MNEMO_CONFIG points at (not created)."""
    path = Path(os.environ["MNEMO_CONFIG"])
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


# --- defaults and loading -------------------------------------------------------------

def test_config_path_and_data_dir_follow_the_environment(isolated_env: Path) -> None:
    assert paths.config_path() == isolated_env / "config" / "config.yaml"
    assert paths.data_dir() == isolated_env / "data"


def test_relative_overrides_become_absolute(isolated_env: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEMO_DATA_DIR", "rel-data")
    monkeypatch.setenv("MNEMO_CONFIG", "rel/config.yaml")
    assert paths.data_dir() == isolated_env / "rel-data"
    assert paths.config_path() == isolated_env / "rel" / "config.yaml"


def test_platformdirs_defaults_when_no_override(monkeypatch: pytest.MonkeyPatch,
                                                isolated_env: Path) -> None:
    monkeypatch.delenv("MNEMO_CONFIG")
    monkeypatch.delenv("MNEMO_DATA_DIR")
    # XDG_* point inside the fake HOME (conftest), so platformdirs lands there.
    home = isolated_env / "home"
    assert paths.config_path() == home / ".config" / "mnemo" / "config.yaml"
    assert paths.data_dir() == home / ".local" / "share" / "mnemo"


def test_missing_file_gives_documented_defaults(cfg: Path) -> None:
    settings = load_settings()
    assert settings.source is None
    assert settings.recall_mode == "workspace"
    assert settings.auto_write_scope == "workspace"
    expected = {
        "prefetch.enabled": True, "prefetch.top_k": 5, "capture.user_limit": 500,
        "capture.assistant_limit": 800, "capture.roles": ["user"],
        "capture.consolidate_every": 10, "scrub.policy": "redact", "sleep.llm": False,
        "hint.decline_days": 30, "hooks.deadline_seconds": 2.0, "write_filter": "strict",
    }
    for name, value in expected.items():
        assert settings[name] == value, name
    assert set(settings.values) == set(config.KEYS)


def test_empty_file_is_all_defaults(cfg: Path) -> None:
    cfg.write_text("# nothing set yet\n")
    settings = load_settings()
    assert settings.source == cfg
    assert settings.values == config.Settings().values


def test_yaml_nested_and_dotted_keys_load(cfg: Path) -> None:
    cfg.write_text(
        "recall_mode: session\n"
        "auto_write_scope: session\n"
        "prefetch:\n  top_k: 9\n  enabled: false\n"
        "capture.roles: [user, assistant]\n"
        "hooks:\n  deadline_seconds: 3\n")
    settings = load_settings()
    assert settings.recall_mode == "session"
    assert settings.auto_write_scope == "session"
    assert settings["prefetch.top_k"] == 9
    assert settings["prefetch.enabled"] is False
    assert settings["capture.roles"] == ["user", "assistant"]
    assert settings["hooks.deadline_seconds"] == 3.0
    assert isinstance(settings["hooks.deadline_seconds"], float)
    assert settings["scrub.policy"] == "redact"  # untouched keys keep their default


@pytest.mark.parametrize("text, fragment", [
    ("colour: blue\n", "colour"),
    ("prefetch:\n  topk: 3\n", "prefetch.topk"),
    ("prefetch: 5\n", "prefetch"),
])
def test_unknown_key_is_an_error_naming_it(cfg: Path, text: str, fragment: str) -> None:
    cfg.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert f"`{fragment}`" in caught.value.message
    assert "unknown key" in caught.value.message
    assert caught.value.exit_code == ExitCode.CONFIG
    assert "recall_mode" in (caught.value.hint or "")  # the hint lists the known keys


@pytest.mark.parametrize("text, fragment", [
    ("prefetch:\n  top_k: five\n", "prefetch.top_k"),
    ("prefetch:\n  top_k: true\n", "prefetch.top_k"),
    ("prefetch:\n  top_k: 2.5\n", "prefetch.top_k"),
    ("prefetch:\n  top_k: 0\n", "prefetch.top_k"),
    ("prefetch:\n  top_k: 51\n", "prefetch.top_k"),
    ("prefetch:\n  top_k: .inf\n", "prefetch.top_k"),
    ("prefetch:\n  enabled: 'yes'\n", "prefetch.enabled"),
    ("prefetch:\n  enabled: 1\n", "prefetch.enabled"),
    ("capture:\n  roles: user\n", "capture.roles"),
    ("capture:\n  roles: [user, robot]\n", "capture.roles"),
    ("capture:\n  user_limit: -1\n", "capture.user_limit"),
    ("recall_mode: global\n", "recall_mode"),
    ("recall_mode: yes\n", "recall_mode"),
    ("scrub:\n  policy: 3\n", "scrub.policy"),
    ("hooks:\n  deadline_seconds: .nan\n", "hooks.deadline_seconds"),
    ("hooks:\n  deadline_seconds: .inf\n", "hooks.deadline_seconds"),
    ("hooks:\n  deadline_seconds: '2'\n", "hooks.deadline_seconds"),
    # no float has 400 digits: OverflowError before the range was checked
    ("prefetch:\n  top_k: 1" + "0" * 400 + "\n", "prefetch.top_k"),
    ("hooks:\n  deadline_seconds: 1" + "0" * 400 + "\n", "hooks.deadline_seconds"),
    # an alias inside its own anchor: a mapping that holds itself (RecursionError)
    ("prefetch: &a\n  b: *a\n", "prefetch.b"),
])
def test_wrong_types_and_ranges_are_errors(cfg: Path, text: str, fragment: str) -> None:
    cfg.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert f"`{fragment}`" in caught.value.message


@pytest.mark.parametrize("content", [
    b"- a list\n- not a mapping\n",
    b"just a string\n",
    b"recall_mode: [unclosed\n",
    b"recall_mode: \xff\xfe workspace\n",
    b"a: &a\n  b: *a\n",
    b"a: 1" + b"0" * 5000 + b"\n",  # past Python's 4300 digits: ValueError
    b"a: " + b"[" * 5000 + b"\n",  # RecursionError (or libyaml's own error)
])
def test_malformed_files_are_clear_config_errors(cfg: Path, content: bytes) -> None:
    cfg.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(cfg) in caught.value.message


def test_a_directory_in_place_of_the_file_is_a_config_error(cfg: Path) -> None:
    cfg.mkdir()
    with pytest.raises(ConfigError):
        load_settings()


def test_recall_workspace_with_session_writes_is_refused_naming_both_keys(cfg: Path) -> None:
    cfg.write_text("recall_mode: workspace\nauto_write_scope: session\n")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "recall_mode" in caught.value.message
    assert "auto_write_scope" in caught.value.message
    assert caught.value.exit_code == ExitCode.CONFIG


def test_default_recall_with_session_writes_is_refused_too(cfg: Path) -> None:
    # recall_mode defaults to workspace, so this alone is the illegal combination.
    cfg.write_text("auto_write_scope: session\n")
    with pytest.raises(ConfigError, match="auto_write_scope"):
        load_settings()


@pytest.mark.parametrize("recall, write", [("session", "workspace"), ("session", "session"),
                                           ("workspace", "workspace")])
def test_legal_combinations_load(cfg: Path, recall: str, write: str) -> None:
    cfg.write_text(f"recall_mode: {recall}\nauto_write_scope: {write}\n")
    settings = load_settings()
    assert (settings.recall_mode, settings.auto_write_scope) == (recall, write)


# --- set / unset -------------------------------------------------------------------------

def test_set_value_converts_text_and_writes_yaml(cfg: Path) -> None:
    set_value("prefetch.top_k", "7")
    set_value("prefetch.enabled", "off")
    set_value("capture.roles", "user, assistant")
    set_value("hooks.deadline_seconds", "1.5")
    on_disk = yaml.safe_load(cfg.read_text())
    assert on_disk == {"prefetch": {"top_k": 7, "enabled": False},
                       "capture": {"roles": ["user", "assistant"]},
                       "hooks": {"deadline_seconds": 1.5}}
    settings = load_settings()
    assert settings["prefetch.top_k"] == 7
    assert settings["prefetch.enabled"] is False
    assert settings["capture.roles"] == ["user", "assistant"]


def test_set_value_creates_the_config_directory(isolated_env: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    target = isolated_env / "deep" / "er" / "config.yaml"
    monkeypatch.setenv("MNEMO_CONFIG", str(target))
    set_value("scrub.policy", "warn")
    assert load_settings()["scrub.policy"] == "warn"


@pytest.mark.parametrize("name, text", [
    ("prefetch.top_k", "many"), ("prefetch.top_k", "0"), ("prefetch.top_k", "nan"),
    ("prefetch.enabled", "perhaps"), ("capture.roles", "user,robot"),
    ("recall_mode", "global"), ("hooks.deadline_seconds", "nan"),
    ("hooks.deadline_seconds", "inf"), ("no.such.key", "1"),
    ("auto_write_scope", "session"),  # illegal with the default recall_mode
])
def test_set_value_refuses_bad_input_and_leaves_the_file_alone(cfg: Path, name: str,
                                                               text: str) -> None:
    original = "prefetch:\n  top_k: 3\n"
    cfg.write_text(original)
    with pytest.raises(ConfigError):
        set_value(name, text)
    assert cfg.read_text() == original
    assert sorted(p.name for p in cfg.parent.iterdir()) == ["config.yaml"]


def test_set_value_can_repair_an_illegal_combination(cfg: Path) -> None:
    cfg.write_text("recall_mode: workspace\nauto_write_scope: session\n")
    with pytest.raises(ConfigError):
        load_settings()
    settings = set_value("recall_mode", "session")
    assert (settings.recall_mode, settings.auto_write_scope) == ("session", "session")
    assert load_settings().recall_mode == "session"


def test_set_value_can_repair_a_mistyped_value(cfg: Path) -> None:
    cfg.write_text("prefetch:\n  top_k: lots\n")
    set_value("prefetch.top_k", "4")
    assert load_settings()["prefetch.top_k"] == 4


def test_set_value_is_an_atomic_replace(cfg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg.write_text("prefetch:\n  top_k: 3\n")
    before = cfg.stat().st_ino
    set_value("prefetch.top_k", "4")
    # A new inode: the file was replaced by rename, never rewritten in place.
    assert cfg.stat().st_ino != before
    assert sorted(p.name for p in cfg.parent.iterdir()) == ["config.yaml"]

    def crash(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    import dsh_mnemo.fsutil as fsutil

    monkeypatch.setattr(fsutil.os, "replace", crash)
    with pytest.raises(OSError):
        set_value("prefetch.top_k", "9")
    assert cfg.read_text() == "prefetch:\n  top_k: 4\n"
    assert sorted(p.name for p in cfg.parent.iterdir()) == ["config.yaml"]


def test_unset_value_returns_to_the_default(cfg: Path) -> None:
    cfg.write_text("prefetch:\n  top_k: 3\nscrub:\n  policy: warn\n")
    settings = unset_value("prefetch.top_k")
    assert settings["prefetch.top_k"] == 5
    assert yaml.safe_load(cfg.read_text()) == {"scrub": {"policy": "warn"}}
    unset_value("prefetch.top_k")  # unsetting what is not set is fine
    assert load_settings()["scrub.policy"] == "warn"


def test_unset_value_of_an_unknown_key_is_an_error(cfg: Path) -> None:
    with pytest.raises(ConfigError, match="unknown key"):
        unset_value("prefetch.nope")


def test_unset_value_clears_an_unknown_key_that_the_file_holds(cfg: Path) -> None:
    cfg.write_text("colour: blue\nprefetch:\n  top_k: 3\n")
    with pytest.raises(ConfigError):
        load_settings()
    unset_value("colour")
    assert load_settings()["prefetch.top_k"] == 3


def test_unset_value_refuses_to_create_an_illegal_combination(cfg: Path) -> None:
    original = "recall_mode: session\nauto_write_scope: session\n"
    cfg.write_text(original)
    with pytest.raises(ConfigError, match="auto_write_scope"):
        unset_value("recall_mode")  # back to workspace recall with session writes
    assert cfg.read_text() == original


# --- Mnemosyne's environment ------------------------------------------------------------

def test_apply_environment_points_mnemosyne_at_the_data_dir(
        cfg: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MNEMOSYNE_DATA_DIR")
    monkeypatch.setenv("MNEMOSYNE_LLM_ENABLED", "true")
    base = isolated_env / "elsewhere"
    apply_environment(load_settings(), base)
    assert os.environ["MNEMOSYNE_DATA_DIR"] == str(base)
    assert os.environ["MNEMOSYNE_LLM_ENABLED"] == "false"
    assert os.environ["MNEMOSYNE_WRITE_CLASSIFIER"] == "strict"
    assert Path(os.environ["HERMES_HOME"]).is_relative_to(base)


def test_apply_environment_defaults_to_the_configured_data_dir(cfg: Path,
                                                               data_dir: Path) -> None:
    os.environ.pop("MNEMOSYNE_DATA_DIR")
    apply_environment(load_settings())
    assert os.environ["MNEMOSYNE_DATA_DIR"] == str(data_dir)


def test_apply_environment_leaves_the_llm_alone_when_configured(cfg: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    cfg.write_text("sleep:\n  llm: true\nwrite_filter: warn\n")
    monkeypatch.delenv("MNEMOSYNE_LLM_ENABLED")
    apply_environment(load_settings())
    assert "MNEMOSYNE_LLM_ENABLED" not in os.environ
    assert os.environ["MNEMOSYNE_WRITE_CLASSIFIER"] == "warn"


IMPORT_AFTER_SETTINGS = """
import os, sys
from dsh_mnemo.config import apply_environment, load_settings
assert "mnemosyne" not in sys.modules
apply_environment(load_settings())
from mnemosyne.core.memory import Mnemosyne
Mnemosyne(session_id="probe")
print(os.environ["MNEMOSYNE_DATA_DIR"])
print(os.environ["MNEMOSYNE_LLM_ENABLED"])
"""

IMPORT_BARE = """
from mnemosyne.core.memory import Mnemosyne
Mnemosyne(session_id="probe")
"""


def _fresh_env(isolated_env: Path) -> dict[str, str]:
    # Nothing tells Mnemosyne where to go except what mnemo sets itself.
    return python_env(MNEMOSYNE_DATA_DIR=None, HERMES_HOME=None, MNEMOSYNE_LLM_ENABLED=None)


def test_importing_mnemosyne_after_settings_creates_nothing_under_hermes(
        isolated_env: Path, data_dir: Path) -> None:
    home = isolated_env / "home"
    done = run_python(IMPORT_AFTER_SETTINGS, env=_fresh_env(isolated_env), cwd=isolated_env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(data_dir), "false"]
    assert not (home / ".hermes").exists()
    assert (data_dir / "mnemosyne.db").exists()


def test_importing_mnemosyne_bare_would_write_under_hermes(isolated_env: Path) -> None:
    """The control for the test above: without mnemo's settings, upstream writes to HOME."""
    home = isolated_env / "home"
    done = run_python(IMPORT_BARE, env=_fresh_env(isolated_env), cwd=isolated_env)
    assert done.returncode == 0, done.stderr
    assert (home / ".hermes").exists()


def test_importing_the_cli_does_not_import_mnemosyne(isolated_env: Path) -> None:
    done = run_python("import sys, dsh_mnemo.cli, dsh_mnemo.workspace.context\n"
                      "import dsh_mnemo.workspace.binding\n"
                      "print(sorted(m for m in sys.modules if m.startswith('mnemosyne')))",
                      env=_fresh_env(isolated_env), cwd=isolated_env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert not (isolated_env / "home" / ".hermes").exists()
