"""No secret of the corpus reaches disk through any write path, WAL files included.

Each secret of `tests/corpus/secrets.py`, in its realistic sentence, goes in
through `mnemo remember`, through a harness's prompt and turn-end hooks,
through `mnemo import` of a Claude Code transcript, and through the MCP
server's `remember` tool.  Then every byte of every file under the data
dir (banks, `-wal` files, the spool, journals, logs) is searched for the
part of each secret that must never survive.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.conftest import bind_repo, configure
from tests.corpus.secrets import SECRETS
from tests.hook.conftest import payload, run_inprocess
from tests.importers.conftest import place
from tests.memory.conftest import mnemo

pytestmark = pytest.mark.e2e


def disk_bytes(data_dir: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file())


def test_the_secret_corpus_through_every_write_path(make_repo, data_dir: Path,
                                                    isolated_env: Path) -> None:
    assert len(SECRETS) >= 60
    configure(write_filter="strict", capture__user_limit=0)  # whole texts, nothing cut off
    paths = {name: bind_repo(make_repo(name)).path
             for name in ("remembered", "hooked", "imported", "mcp")}

    # MCP first: the SDK's client hands the server this process's stderr.
    from tests.mcp.conftest import run_client

    async def remember_all(client) -> list[bool]:
        return [(await client.call("remember", text=s.text)).is_error for s in SECRETS]

    errors = run_client(remember_all, cwd=paths["mcp"])
    assert not any(errors)

    for secret in SECRETS:
        result = mnemo("remember", "-", cwd=paths["remembered"], input=secret.text)
        assert result.exit_code == 0, (secret.name, result.output)

    for i, secret in enumerate(SECRETS):
        session = f"s{i}"
        run_inprocess("prompt", "claude-code", payload(
            "claude-code", "prompt", cwd=paths["hooked"], session=session, prompt=secret.text))
        run_inprocess("turn-end", "claude-code", payload(
            "claude-code", "turn-end", cwd=paths["hooked"], session=session, reply="Done."))

    home = isolated_env / "home"
    for secret in SECRETS:
        place("claude-code", home, paths["imported"], prompt=secret.text,
              session_id=str(uuid.uuid5(uuid.NAMESPACE_URL, secret.name)))
    imported = mnemo("import", "--write", "--json", cwd=paths["imported"])
    assert imported.exit_code == 0, imported.output

    blob = disk_bytes(data_dir)
    leaked = [(s.name, s.family) for s in SECRETS if s.needle.encode() in blob]
    assert not leaked, f"{len(leaked)} of {len(SECRETS)} secrets reached disk: {leaked}"
    # and what was around them was stored, through each path
    for name, path in paths.items():
        listed = mnemo("stats", "--json", cwd=path)
        assert '"working": 0' not in listed.stdout.split('"totals"')[1], name


def test_a_secret_in_the_source_label_is_scrubbed_too(repo: Path, data_dir: Path) -> None:
    """`--source` is a free label stored beside the text (and in upstream's annotations)."""
    token = "ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL7zX9cV2b"
    result = mnemo("remember", "--source", f"ci-{token}", "the release job runs nightly",
                   cwd=repo)
    assert result.exit_code == 0, result.output
    assert token.encode() not in disk_bytes(data_dir)
    listed = mnemo("recall", "release job", "--json", cwd=repo)
    assert "release job" in listed.stdout and "redacted" in listed.stdout
