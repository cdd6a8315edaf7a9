"""`mnemo reindex` when the `openai-url` backend fails after it loaded, or is misconfigured.

A server that fails partway (an HTTP error, vectors of varying size, vectors
with no direction) is a clear error: what was stored stays, nothing of a
failed batch is stored, and the next run embeds only the rest.  Settings
that cannot work are configuration errors (exit 3), refused by `config set`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_mnemo import paths
from dsh_mnemo.cli import app
from dsh_mnemo.errors import ExitCode
from dsh_mnemo.memory import semantic
from tests.conftest import bind_repo, configure

from .conftest import EmbedServer, fake_vector

runner = CliRunner()
SUBJECTS = ("billing", "search", "auth", "payments", "mailer", "scheduler", "gateway",
            "reports", "uploads", "metrics")


@pytest.fixture
def repo(projects: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = bind_repo(projects / "service").path
    monkeypatch.chdir(path)
    return path


def memo(i: int) -> str:
    return (f"memo {i}: the {SUBJECTS[i % 10]} service of team {i // 10} deploys on "
            f"{['mondays', 'fridays', 'tuesdays', 'weekends'][i % 4]} at {i % 24}:00.")


def remember_lexically(repo: Path, count: int) -> None:
    from dsh_mnemo.commands.memory import remember

    settings = configure()
    for i in range(count):
        assert remember(settings, memo(i), cwd=repo).data.id, memo(i)


def use_server(server: EmbedServer) -> None:
    configure(embeddings__backend="openai-url", embeddings__url=server.url,
              embeddings__model="test-embed", embeddings__timeout_seconds=5.0)
    semantic.reset()


def vectors() -> tuple[int, int]:
    """(memories of the workspace with a vector, memories), every model counted."""
    import sqlite3

    banks = sorted(paths.data_dir().glob("banks/ws-*/mnemosyne.db"))
    conn = sqlite3.connect(f"file:{banks[0]}?mode=ro", uri=True)
    try:
        total = conn.execute("SELECT COUNT(*) FROM working_memory").fetchone()[0]
        has = conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = ?",
                           (semantic.TABLE,)).fetchone()[0]
        have = conn.execute(f"SELECT COUNT(*) FROM {semantic.TABLE}").fetchone()[0] \
            if has else 0
    finally:
        conn.close()
    return have, total


def reindex() -> tuple[int, dict]:
    semantic.reset()
    result = runner.invoke(app, ["reindex", "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    return result.exit_code, json.loads(result.stdout)


def fail_memories_after(server: EmbedServer, batches: int, how: str) -> None:
    """Answer normally, except from the `batches`+1-th request of memory texts on."""
    seen = [0]

    def model(texts: list[str]) -> list[list[float]]:
        if any(t.startswith("memo ") for t in texts):
            seen[0] += 1
            if seen[0] > batches:
                if how == "http-500":
                    server.status = 500
                elif how == "varying-size":
                    return [fake_vector(t, 8 if i % 2 else 6) for i, t in enumerate(texts)]
                elif how == "zero":
                    return [[0.0] * 8 for _ in texts]
        return [fake_vector(t, 8) for t in texts]

    server.model = model


@pytest.mark.parametrize("how", ["http-500", "varying-size", "zero"])
def test_a_server_failing_partway_is_a_clear_error_and_the_next_run_resumes(
        how: str, repo: Path, embed_server: EmbedServer) -> None:
    remember_lexically(repo, 40)
    use_server(embed_server)
    fail_memories_after(embed_server, 1, how)  # the first batch of 16 goes through
    code, error = reindex()
    assert code == ExitCode.ERROR and error["kind"] == "error", error
    assert {"http-500": "HTTP 500", "varying-size": "different sizes",
            "zero": "all-zero"}[how] in error["error"]
    assert "16 memories" in error["hint"] and "mnemo reindex" in error["hint"]
    assert vectors() == (16, 40)  # the batch that failed stored nothing
    embed_server.status, embed_server.model = 200, None
    code, done = reindex()
    assert code == 0 and done["embedded"] == 24, done
    assert vectors() == (40, 40)
    code, again = reindex()
    assert code == 0 and again["embedded"] == 0


@pytest.mark.parametrize(("settings", "words"), [
    ({"embeddings__url": ""}, "url is required"),
    ({"embeddings__model": ""}, "model is required"),
    ({"embeddings__url": "ftp://127.0.0.1/v1"}, "http(s) URL"),
    ({"embeddings__url": "http://[::1/v1"}, "not a URL"),
    ({"embeddings__api_key_env": "A=B"}, "api_key_env"),
])
def test_invalid_embedding_settings_exit_with_the_config_code(
        settings: dict[str, str], words: str, repo: Path, embed_server: EmbedServer) -> None:
    remember_lexically(repo, 2)
    configure(**{"embeddings__backend": "openai-url", "embeddings__url": embed_server.url,
                 "embeddings__model": "test-embed", **settings})
    code, error = reindex()
    assert code == ExitCode.CONFIG, error
    assert words in error["error"] and "embeddings" in error["hint"]
    assert embed_server.requests == []


@pytest.mark.parametrize("url", ["not a url", "ftp://x/", "http://[::1", "http://",
                                 "http://user:pw@127.0.0.1/v1", "http://127.0.0.1:99999/v1"])
def test_config_set_refuses_an_embeddings_url_that_cannot_work(url: str, isolated_env: Path
                                                                ) -> None:
    config = Path(paths.config_path())
    result = runner.invoke(app, ["config", "set", "embeddings.url", url])
    assert result.exit_code == ExitCode.CONFIG, result.output
    assert "embeddings.url" in result.stderr and "Traceback" not in result.output
    assert not config.exists()


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/v1", "https://api.example.test/v1/",
                                 "http://[::1]:8000/v1/embeddings", ""])
def test_config_set_takes_a_usable_embeddings_url(url: str, isolated_env: Path) -> None:
    result = runner.invoke(app, ["config", "set", "embeddings.url", url])
    assert result.exit_code == 0, result.output
    assert runner.invoke(app, ["config", "get", "embeddings.url"]).stdout.strip() == url


def test_a_memory_forgotten_while_reindex_embeds_it_keeps_no_vector(
        embed_server: EmbedServer, repo: Path) -> None:
    """`mnemo reindex` reads the memories without a vector, embeds them (seconds a
    batch), then writes the vectors.  A memory forgotten in between (another
    terminal, the MCP server) got its vector back afterwards: a copy of the
    forgotten memory that no later forget could reach, since the memory is gone.
    A vector is now only written while its memory is still there."""
    import sqlite3

    from dsh_mnemo.commands.memory import forget, remember

    settings = configure()
    ids = [remember(settings, memo(i), cwd=repo).data.id for i in range(3)]
    use_server(embed_server)
    forgotten: list[str] = []

    def model(texts: list[str]) -> list[list[float]]:
        if not forgotten and any(t.startswith("memo ") for t in texts):
            # The batch is on its way to the model: forget one of its memories now.
            forget(configure(embeddings__backend="none"), ids[1], cwd=repo)
            forgotten.append(ids[1])
        return [fake_vector(t, 8) for t in texts]

    embed_server.model = model
    code, _ = reindex()
    assert code == 0 and forgotten == [ids[1]]
    bank = sorted(paths.data_dir().glob("banks/ws-*/mnemosyne.db"))[0]
    conn = sqlite3.connect(f"file:{bank}?mode=ro", uri=True)
    try:
        kept = {r[0] for r in conn.execute(f"SELECT memory_id FROM {semantic.TABLE}")}
    finally:
        conn.close()
    assert kept == {ids[0], ids[2]}
