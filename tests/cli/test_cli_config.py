"""`mnemo config show|get|set|unset|path`: validated reads and writes of the settings file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dsh_mnemo.cli import app
from dsh_mnemo.config import SCHEMA, load_settings
from dsh_mnemo.errors import ExitCode

runner = CliRunner()


def config_file() -> Path:
    return Path(os.environ["MNEMO_CONFIG"])


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_show_lists_every_key_with_default_and_source() -> None:
    result = invoke("config", "show", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["exists"] is False
    assert document["path"] == str(config_file())
    rows = {row["key"]: row for row in document["settings"]}
    assert list(rows) == [k.name for k in SCHEMA]
    for key in SCHEMA:
        assert rows[key.name]["value"] == key.default
        assert rows[key.name]["default"] == key.default
        assert rows[key.name]["source"] == "default"
        assert rows[key.name]["doc"] == key.doc


def test_show_marks_values_that_come_from_the_file() -> None:
    assert invoke("config", "set", "prefetch.top_k", "3").exit_code == 0
    document = json.loads(invoke("config", "show", "--json").stdout)
    rows = {row["key"]: row for row in document["settings"]}
    assert rows["prefetch.top_k"] == {**rows["prefetch.top_k"], "value": 3, "default": 5,
                                      "source": "file"}
    assert rows["prefetch.enabled"]["source"] == "default"
    people = invoke("config", "show")
    assert people.exit_code == 0
    assert "prefetch.top_k" in people.stdout and "file" in people.stdout


def test_set_converts_text_to_the_key_type_and_writes_nested_yaml() -> None:
    for key, text in (("prefetch.top_k", "7"), ("prefetch.enabled", "no"),
                      ("hooks.deadline_seconds", "1.5"),
                      ("capture.roles", "user,assistant"), ("scrub.policy", "warn")):
        result = invoke("config", "set", key, text)
        assert result.exit_code == 0, result.output
    written = yaml.safe_load(config_file().read_text(encoding="utf-8"))
    assert written == {"prefetch": {"top_k": 7, "enabled": False},
                       "hooks": {"deadline_seconds": 1.5},
                       "capture": {"roles": ["user", "assistant"]},
                       "scrub": {"policy": "warn"}}
    settings = load_settings()
    assert settings["capture.roles"] == ["user", "assistant"]


def test_get_prints_the_value_in_the_form_set_accepts() -> None:
    invoke("config", "set", "capture.roles", "user,assistant")
    assert invoke("config", "get", "capture.roles").stdout.strip() == "user,assistant"
    assert invoke("config", "get", "prefetch.enabled").stdout.strip() == "true"
    document = json.loads(invoke("config", "get", "capture.roles", "--json").stdout)
    assert document["value"] == ["user", "assistant"]
    assert document["source"] == "file"
    assert document["choices"] == ["user", "assistant"]


@pytest.mark.parametrize("key, text, message", [
    ("prefetch.top_k", "many", "must be a number"),
    ("prefetch.top_k", "0", "at least 1"),
    ("prefetch.top_k", "2.5", "must be a whole number"),
    ("prefetch.enabled", "maybe", "true or false"),
    ("recall_mode", "everything", "must be one of"),
    ("capture.roles", "user,robot", "unknown item"),
    ("no.such.key", "1", "unknown key"),
    # bytes that are not UTF-8 (argv decodes them to lone surrogates): the file
    # once got `"\uDCFF"`, which no command could load again
    ("embeddings.model", b"\xff\xfe".decode("utf-8", "surrogateescape"), "must be UTF-8"),
    ("prefetch.top_k", "1" + "0" * 400, "at most 50, not a number of 401 digits"),
    ("hooks.deadline_seconds", "1" + "0" * 400, "must be a finite number"),
])
def test_set_rejects_invalid_values_and_leaves_the_file_alone(key: str, text: str,
                                                              message: str) -> None:
    invoke("config", "set", "prefetch.top_k", "4")
    before = config_file().read_bytes()
    result = invoke("config", "set", key, text)
    assert result.exit_code == ExitCode.CONFIG
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert config_file().read_bytes() == before
    assert invoke("config", "show").exit_code == 0


def test_the_recall_write_rule_is_enforced_with_a_way_out() -> None:
    result = invoke("config", "set", "auto_write_scope", "session")
    assert result.exit_code == ExitCode.CONFIG
    assert "requires `auto_write_scope: workspace`" in result.stderr
    assert "recall_mode to session" in result.stderr
    assert not config_file().exists()
    # The legal order: narrow the read first, then the write.
    assert invoke("config", "set", "recall_mode", "session").exit_code == 0
    assert invoke("config", "set", "auto_write_scope", "session").exit_code == 0
    settings = load_settings()
    assert (settings.recall_mode, settings.auto_write_scope) == ("session", "session")
    # Going back to workspace recall while writes stay in the session is refused.
    result = invoke("config", "set", "recall_mode", "workspace")
    assert result.exit_code == ExitCode.CONFIG
    assert load_settings().recall_mode == "session"


def test_unset_restores_the_default() -> None:
    invoke("config", "set", "prefetch.top_k", "9")
    result = invoke("config", "unset", "prefetch.top_k", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["value"] == 5
    assert load_settings()["prefetch.top_k"] == 5
    assert invoke("config", "unset", "bogus").exit_code == ExitCode.CONFIG


COMMENTED = """\
# my mnemo settings
prefetch:
  top_k: 3   # fewer lines, please

# the hint annoys me in scratch repos
hint:
    decline_days: 7
"""


@pytest.mark.parametrize("args, expected", [
    (("set", "prefetch.top_k", "4"), COMMENTED.replace("top_k: 3", "top_k: 4")),
    (("set", "hint.enabled", "false"),
     COMMENTED.replace("decline_days: 7\n", "decline_days: 7\n    enabled: false\n")),
    (("set", "scrub.policy", "warn"), COMMENTED + "scrub:\n  policy: warn\n"),
    (("unset", "prefetch.top_k"),
     COMMENTED.replace("prefetch:\n  top_k: 3   # fewer lines, please\n", "")),
])
def test_set_and_unset_keep_the_files_comments_and_order(args: tuple[str, ...],
                                                         expected: str) -> None:
    config_file().parent.mkdir(parents=True, exist_ok=True)
    config_file().write_text(COMMENTED)
    result = invoke("config", *args)
    assert result.exit_code == 0, result.output
    assert config_file().read_text() == expected


@pytest.mark.parametrize("line, value, expected", [
    ('model: "e5 #large"   # the model we serve', "small", "model: small   # the model we serve"),
    ("model: 'it''s # b'  # c", "small", "model: small  # c"),
    ('model: "a\\" #b"', "small", "model: small"),
    ("model: it's # b'", "small", "model: small # b'"),
    ("model: [a, '# b']  # c", "small", "model: small  # c"),
    ('model: "#"', "x", "model: x"),
])
def test_set_keeps_the_comment_and_drops_all_of_the_old_value(line: str, value: str,
                                                             expected: str) -> None:
    # A `#` inside the old quoted value was taken for the comment's start: the
    # rest of the old value stayed in the file, growing with every set.
    config_file().parent.mkdir(parents=True, exist_ok=True)
    config_file().write_text(f"embeddings:\n  {line}\n")
    assert invoke("config", "set", "embeddings.model", value).exit_code == 0
    assert config_file().read_text() == f"embeddings:\n  {expected}\n"


def test_a_layout_the_edit_cannot_follow_is_written_anew_not_broken() -> None:
    """A flow mapping (or a list item, a repeated key…): the values are written again,
    sorted, so the file is right even though its comments cannot be kept."""
    config_file().parent.mkdir(parents=True, exist_ok=True)
    config_file().write_text("# flow\nprefetch: {top_k: 3}\n")
    assert invoke("config", "set", "prefetch.top_k", "4").exit_code == 0
    assert yaml.safe_load(config_file().read_text()) == {"prefetch": {"top_k": 4}}
    assert load_settings()["prefetch.top_k"] == 4


def test_path_follows_mnemo_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "elsewhere" / "mnemo.yaml"
    monkeypatch.setenv("MNEMO_CONFIG", str(target))
    result = invoke("config", "path")
    assert result.stdout.strip() == str(target)
    document = json.loads(invoke("config", "path", "--json").stdout)
    assert document == {**document, "path": str(target), "exists": False}
    invoke("config", "set", "hint.enabled", "false")
    assert target.exists()
    assert json.loads(invoke("config", "path", "--json").stdout)["exists"] is True


def test_a_broken_file_is_reported_not_a_traceback() -> None:
    config_file().parent.mkdir(parents=True, exist_ok=True)
    config_file().write_text("prefetch: [unclosed\n", encoding="utf-8")
    result = invoke("config", "show")
    assert result.exit_code == ExitCode.CONFIG
    assert "not valid YAML" in result.stderr
    assert "Traceback" not in result.output
    # `path` still works, so the user can find the file to fix.
    assert invoke("config", "path").exit_code == 0
    config_file().write_text("prefetch:\n  topk: 3\n", encoding="utf-8")
    result = invoke("config", "get", "prefetch.top_k", "--json")
    assert result.exit_code == ExitCode.CONFIG
    assert "unknown key `prefetch.topk`" in json.loads(result.stdout)["error"]
