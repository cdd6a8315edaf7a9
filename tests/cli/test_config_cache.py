"""The parsed settings file kept in DATA/cache/config.json: a process whose file
did not change reads JSON instead of importing PyYAML, and gets the same values."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from dsh_mnemo import config
from dsh_mnemo.config import load_settings, may_hold_secret, set_value
from tests.workspace.conftest import run_python


@pytest.fixture
def cfg(isolated_env: Path) -> Path:
    path = Path(os.environ["MNEMO_CONFIG"])
    path.parent.mkdir(parents=True, exist_ok=True)
    Path(os.environ["MNEMO_DATA_DIR"]).mkdir(parents=True, exist_ok=True)
    return path


def cache_file() -> Path:
    return Path(os.environ["MNEMO_DATA_DIR"]) / "cache" / config.CACHE_NAME


LOAD = ("import sys, json\nfrom dsh_mnemo.config import load_settings\n"
        "s = load_settings()\n"
        "print(json.dumps([s['prefetch.top_k'], s['hooks.deadline_seconds'], "
        "'yaml' in sys.modules]))")


def test_a_second_process_reads_the_kept_parse_without_yaml(cfg: Path) -> None:
    cfg.write_text("prefetch:\n  top_k: 4\nhooks:\n  deadline_seconds: 3.5\n")
    first = run_python(LOAD)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == [4, 3.5, True]  # parsed: PyYAML imported
    assert stat.S_IMODE(cache_file().stat().st_mode) == 0o600
    second = run_python(LOAD)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == [4, 3.5, False]  # the same values, no PyYAML


def test_an_edited_file_is_parsed_again(cfg: Path) -> None:
    cfg.write_text("prefetch:\n  top_k: 4\n")
    assert load_settings()["prefetch.top_k"] == 4
    cfg.write_text("prefetch:\n  top_k: 2\n")
    assert load_settings()["prefetch.top_k"] == 2
    set_value("prefetch.top_k", "7")
    assert load_settings()["prefetch.top_k"] == 7
    kept = json.loads(cache_file().read_text())
    assert kept["raw"] == {"prefetch": {"top_k": 7}}


@pytest.mark.parametrize("damage", ["garbage", "other-key", "not-a-mapping"])
def test_a_damaged_or_foreign_cache_is_ignored_and_replaced(cfg: Path, damage: str) -> None:
    cfg.write_text("prefetch:\n  top_k: 4\n")
    load_settings()
    good = json.loads(cache_file().read_text())
    if damage == "garbage":
        cache_file().write_bytes(b"\x00{not json")
    elif damage == "other-key":
        cache_file().write_text(json.dumps({**good, "raw": {"prefetch": {"top_k": 9}},
                                            "key": "0" * 16}))
    else:
        cache_file().write_text("[1, 2]")
    assert load_settings()["prefetch.top_k"] == 4
    assert json.loads(cache_file().read_text()) == good


def test_a_kept_parse_is_still_validated(cfg: Path) -> None:
    cfg.write_text("prefetch:\n  top_k: 4\n")
    load_settings()
    kept = json.loads(cache_file().read_text())
    # someone writes an invalid value under the current file's key: still refused
    kept["raw"] = {"prefetch": {"top_k": "many"}}
    cache_file().write_text(json.dumps(kept))
    with pytest.raises(config.ConfigError):
        load_settings()


def test_invalid_yaml_is_still_an_error_and_keeps_nothing(cfg: Path) -> None:
    cfg.write_text("prefetch: [unclosed\n")
    with pytest.raises(config.ConfigError, match="not valid YAML"):
        load_settings()
    assert not cache_file().exists()


def test_no_cache_without_a_data_dir(isolated_env: Path) -> None:
    path = Path(os.environ["MNEMO_CONFIG"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("prefetch:\n  top_k: 4\n")
    assert not Path(os.environ["MNEMO_DATA_DIR"]).exists()
    assert load_settings()["prefetch.top_k"] == 4
    assert not Path(os.environ["MNEMO_DATA_DIR"]).exists()  # not created for a cache


def test_a_setting_that_looks_like_a_credential_is_never_copied(cfg: Path) -> None:
    cfg.write_text("embeddings:\n  backend: openai-url\n"
                   "  url: https://user:hunter2@embed.example/v1\n"
                   "  model: m\n  api_key_env: MY_KEY\n")
    assert load_settings()["embeddings.url"].startswith("https://user:")
    assert not cache_file().exists()


TOKEN = "ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL7zX9cV2b"


def test_a_token_in_a_url_path_set_through_the_cli_is_never_cached(cfg: Path) -> None:
    import subprocess

    from tests.conftest import mnemo_executable

    for args in (["config", "set", "embeddings.backend", "openai-url"],
                 ["config", "set", "embeddings.url",
                  f"https://emb.example.com/v1/{TOKEN}/embeddings"],
                 ["status"]):
        done = subprocess.run([mnemo_executable(), *args], capture_output=True, text=True,
                              timeout=120, env=dict(os.environ), cwd=cfg.parent)
        assert done.returncode == 0, done.stderr
    assert TOKEN in cfg.read_text()  # the settings file itself holds what the user set
    # an earlier parse (before the URL was set) may be kept, never this one
    assert not cache_file().exists() or TOKEN not in cache_file().read_text()


@pytest.mark.parametrize("text", [
    # an unknown key: the parse is kept before validation refuses it
    f'headers:\n  Authorization: "Bearer {TOKEN}"\n',
    f'capture:\n  roles: [user, "token {TOKEN}"]\n',
    "embeddings:\n  api_key_env: sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z\n",
    f"embeddings:\n  api_key_env: {TOKEN}\n",
    "extra:\n  - {note: DB_PASSWORD=Xy9Kp2Lm7Qr}\n",
])
def test_a_credential_anywhere_in_the_file_is_never_copied(cfg: Path, text: str) -> None:
    cfg.write_text(text)
    try:
        load_settings()
    except config.ConfigError:
        pass  # refused by validation; what matters is what was written before
    assert not cache_file().exists()


def test_an_ordinary_file_is_kept_and_read_back_without_the_scrubber(cfg: Path) -> None:
    cfg.write_text("embeddings:\n  backend: openai-url\n  url: http://127.0.0.1:8080/v1\n"
                   "  model: text-embedding-3-small\n  api_key_env: OPENAI_API_KEY\n"
                   "capture:\n  roles: [user, assistant]\n")
    code = ("import sys, json\nfrom dsh_mnemo.config import load_settings\n"
            "s = load_settings()\n"
            "print(json.dumps([s['embeddings.url'], 'yaml' in sys.modules, "
            "'dsh_mnemo.memory.scrub' in sys.modules]))")
    first = run_python(code)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == ["http://127.0.0.1:8080/v1", True, True]
    assert cache_file().exists()
    second = run_python(code)  # a cache hit: neither parsed nor scrubbed again
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == ["http://127.0.0.1:8080/v1", False, False]
    cfg.write_text(cfg.read_text() + f"  # {TOKEN}\nextra: {{url: https://h/{TOKEN}/x}}\n")
    with pytest.raises(config.ConfigError, match="unknown key"):
        load_settings()
    assert TOKEN not in cache_file().read_text()  # the old parse stays, not the new one


def test_what_counts_as_a_credential() -> None:
    assert may_hold_secret({"llm_api_key": "sk-live"})
    assert may_hold_secret({"auth.token": "abc"})
    assert may_hold_secret({"url": "https://u:p@host/"})
    assert may_hold_secret({"embedding_api_url": "https://host/v1?api_key=abc"})
    assert may_hold_secret({"url": "https://host/v1?x=1&sig=abc"})
    assert not may_hold_secret({"url": "https://host/v1?model=small"})
    assert not may_hold_secret({"llm_api_key": "", "url": "https://host/v1"})
    assert not may_hold_secret({"embeddings.api_key_env": "OPENAI_API_KEY"})  # a name
    assert not may_hold_secret({"top_k": 5, "enabled": True})
    assert may_hold_secret({"embeddings": {"url": f"https://h/v1/{TOKEN}/embeddings"}})
    assert may_hold_secret({"headers": {"Authorization": f"Bearer {TOKEN}"}})
    assert may_hold_secret({"capture": {"roles": ["user", f"token {TOKEN}"]}})
    assert may_hold_secret({"embeddings": {"api_key_env": "sk-proj-Ab3dEf6hIj9kLm2nOp5q"}})
    assert may_hold_secret({f"note {TOKEN}": 1})  # a name is scrubbed too
    assert not may_hold_secret({"capture": {"roles": ["user", "assistant"]},
                                "embeddings": {"url": "http://127.0.0.1:8080/v1"}})


def test_a_parse_json_cannot_give_back_is_not_kept(cfg: Path) -> None:
    # a YAML date is not JSON: kept as text it would come back as a string
    config._keep_parse(cache_file(), "0" * 16, {"when": __import__("datetime").date(2026, 1, 2)})
    assert not cache_file().exists()
    config._keep_parse(cache_file(), "0" * 16, {1: "a number as a key"})
    assert not cache_file().exists()
    config._keep_parse(cache_file(), "0" * 16, {"prefetch": {"top_k": 3}})
    assert cache_file().exists()


def test_a_cache_file_is_replaced_whole_and_private(tmp_path: Path) -> None:
    from dsh_mnemo.fsutil import write_cache_file

    target = tmp_path / "cache" / "x.json"
    write_cache_file(target, b"one")
    write_cache_file(target, b"two")
    assert target.read_bytes() == b"two"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in target.parent.iterdir()) == ["x.json"]  # no temp left
    (tmp_path / "blocked").write_text("a file where the folder should be")
    with pytest.raises(OSError):
        write_cache_file(tmp_path / "blocked" / "x.json", b"three")
