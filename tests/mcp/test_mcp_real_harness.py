"""`mnemo mcp` inside real harness CLIs, each pointed at the fake model server.

`mnemo mcp install --client NAME` writes the client's own config; the
harness starts `mnemo mcp` itself; the fake model asks for mnemo's tools and
the test checks that each call reached mnemo (the tool result the harness
sent back to the model, and the rows on disk).

- Claude Code 2.1.332: every tool, from two bound repositories and an
  unbound directory, in one `claude -p` run per directory (a scripted model
  asks for the tools one after another).  Claude Code defers MCP tools
  behind its ToolSearch tool by default; `ENABLE_TOOL_SEARCH=false` lists
  them directly, which is what a scripted model needs.  It also connects MCP
  servers in the background by default, so on a loaded machine its first
  request went out before `mnemo mcp` was up, without mnemo's tools (3 runs
  of 3 with six busy loops on two cores); `MCP_CONNECTION_NONBLOCKING=false`
  makes it wait for the connection (3 of 3 passed under the same load).
- Gemini CLI 0.61.0: `remember` and `recall` in a bound repository
  (`mcp_mnemo_<tool>`, run with --yolo, as `-p` cannot ask for approval).
- Qwen Code 0.24.4: the same through its `tool_call` tool (it defers MCP
  tools; `tool_call` runs a deferred tool by name).
- All four list the entry `mcp install` wrote (`<cli> mcp list`).

Codex CLI 0.171 loads the server too, but only reaches MCP tools through
its hosted `tool_search` flow, which the fake model does not speak
(docs/mcp.md).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import bind_repo, mnemo_executable
from tests.memory.conftest import query
from tests.real_harness.conftest import harness_bin  # noqa: F401 - the installed CLIs
from tests.real_harness.fake_model import FakeModel, ToolCall, _make_handler
from tests.real_harness.harnesses import SETUPS

pytestmark = pytest.mark.real_harness

RUN_TIMEOUT = 120
REPLY = "Done with mnemo."


class ScriptedModel(FakeModel):
    """Anthropic Messages only: the n-th request with n tool results asks for script[n]."""

    def __init__(self, script: list[ToolCall]) -> None:
        super().__init__(reply=REPLY)
        self.script = script

    def start(self) -> ScriptedModel:
        from http.server import ThreadingHTTPServer
        from threading import Thread

        model = self
        base = _make_handler(self)

        class Handler(base):  # type: ignore[misc, valid-type]
            def _anthropic(self, item: Any, request: dict[str, Any]) -> None:
                if item.path.endswith("count_tokens"):
                    self._json(200, {"input_tokens": 100})
                    return
                tools = {t.get("name") for t in request.get("tools") or []}
                done = sum(1 for m in request.get("messages") or []
                           if isinstance(m.get("content"), list)
                           for b in m["content"] if b.get("type") == "tool_result")
                call = model.script[done] if done < len(model.script) and \
                    model.script[done].name in tools else None
                if call is not None:
                    block = {"type": "tool_use", "id": f"toolu_{done}", "name": call.name,
                             "input": {}}
                    delta = {"type": "input_json_delta",
                             "partial_json": json.dumps(call.arguments)}
                    stop = "tool_use"
                else:
                    block = {"type": "text", "text": ""}
                    delta = {"type": "text_delta", "text": model.reply}
                    stop = "end_turn"
                usage = {"input_tokens": 100, "output_tokens": 10}
                message = {"id": f"msg_{done}", "type": "message", "role": "assistant",
                           "model": request.get("model", "fake"), "content": [],
                           "stop_reason": None, "stop_sequence": None, "usage": usage}
                self._sse([
                    ("message_start", {"type": "message_start", "message": message}),
                    ("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": block}),
                    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": delta}),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    ("message_delta", {"type": "message_delta",
                                       "delta": {"stop_reason": stop, "stop_sequence": None},
                                       "usage": {"output_tokens": 10}}),
                    ("message_stop", {"type": "message_stop"}),
                ])

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = Thread(target=self._server.serve_forever,
                              kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def tool_results(self) -> list[tuple[bool, str]]:
        """(is_error, text) of every tool result in the last agent request."""
        last = [r for r in self.model_requests() if isinstance(r.json, dict)
                and r.json.get("tools")][-1].json
        found = []
        for message in last.get("messages") or []:
            for block in message.get("content") if isinstance(message.get("content"),
                                                              list) else []:
                if block.get("type") == "tool_result":
                    content = block.get("content")
                    text = content if isinstance(content, str) else "\n".join(
                        c.get("text", "") for c in content or [] if isinstance(c, dict))
                    found.append((bool(block.get("is_error")), text))
        return found


def mnemo(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([mnemo_executable(), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == 0, f"mnemo {' '.join(args)}: {done.stderr}"
    return done.stdout


def run(name: str, harness_bin: Path, model: FakeModel, cwd: Path, prompt: str,
        extra: list[str], env: dict[str, str] | None = None) -> None:
    home = Path(os.environ["HOME"])
    setup = SETUPS[name]
    done = subprocess.run(setup.command(harness_bin, prompt) + extra, cwd=cwd, text=True,
                          capture_output=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL,
                          env={**setup.env(home, harness_bin, model.url), **(env or {})})
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert model.reply in done.stdout, (done.stdout[-2000:], done.stderr[-2000:])


def workspace_rows(repo: Any, data_dir: Path) -> list[str]:
    return sorted(r[0] for r in query(repo.db(data_dir), "SELECT content FROM working_memory "
                                      "WHERE session_id = ?", repo.namespace))


def first_document(text: str) -> dict[str, Any]:
    """The JSON document a tool result starts with (notes may follow it)."""
    document, _ = json.JSONDecoder().raw_decode(text[text.find("{"):])
    return document


def kinds(results: list[tuple[bool, str]]) -> list[str]:
    return ["error" if is_error else first_document(text).get("kind", "?")
            for is_error, text in results]


def call(tool: str, **arguments: Any) -> ToolCall:
    return ToolCall(f"mcp__mnemo__{tool}", arguments)


def test_claude_code_calls_every_tool_in_two_repos_and_an_unbound_dir(
        harness_bin: Path, make_repo, data_dir: Path) -> None:  # noqa: F811
    home = Path(os.environ["HOME"])
    alpha = bind_repo(make_repo("alpha"))
    beta = bind_repo(make_repo("beta"))
    loose = make_repo("loose")
    beta_id = json.loads(mnemo("remember", "Beta ships on Mondays", "--json",
                               cwd=beta.path))["id"]
    SETUPS["claude-code"].prepare(home, "http://127.0.0.1:9")
    installed = json.loads(mnemo("mcp", "install", "--client", "claude-code", "--json",
                                 cwd=home))
    assert installed["config_path"] == str(home / ".claude.json")
    allow = ["--allowedTools", "mcp__mnemo"]
    quiet = {"ENABLE_TOOL_SEARCH": "false", "MCP_CONNECTION_NONBLOCKING": "false"}
    every = [call("remember", text="{name} deploys with make release"),
             call("recall", query="deploys ships"), call("stats"), call("sleep", dry_run=True),
             call("status"), call("workspaces"), call("bind"), call("forget", id=beta_id)]

    # alpha: every tool works on alpha's memory; beta's row cannot be forgotten from here.
    script = [ToolCall(c.name, {k: str(v).format(name="Alpha") if isinstance(v, str) else v
                                for k, v in c.arguments.items()}) for c in every]
    with ScriptedModel(script) as model:
        run("claude-code", harness_bin, model, alpha.path, "Use mnemo.", allow, quiet)
        results = model.tool_results()
    assert kinds(results) == ["remember", "recall", "stats", "sleep", "status", "workspaces",
                              "bind", "error"], results
    assert "Alpha deploys" in results[1][1] and "Beta ships" not in results[1][1]
    assert "belongs to another workspace" in results[7][1]
    assert workspace_rows(alpha, data_dir) == ["Alpha deploys with make release"]
    assert workspace_rows(beta, data_dir) == ["Beta ships on Mondays"]

    # beta: the same calls see only beta; here beta's row can be forgotten.
    script = [ToolCall(c.name, {k: str(v).format(name="Beta") if isinstance(v, str) else v
                                for k, v in c.arguments.items()}) for c in every]
    with ScriptedModel(script) as model:
        run("claude-code", harness_bin, model, beta.path, "Use mnemo.", allow, quiet)
        results = model.tool_results()
    assert kinds(results) == ["remember", "recall", "stats", "sleep", "status", "workspaces",
                              "bind", "forget"], results
    assert "Alpha" not in results[1][1]
    assert workspace_rows(beta, data_dir) == ["Beta deploys with make release"]
    assert workspace_rows(alpha, data_dir) == ["Alpha deploys with make release"]

    # An unbound directory: memory tools are errors carrying the bind hint; bind binds.
    script = [call("remember", text="Loose fact"), call("recall", query="fact"), call("stats"),
              call("sleep"), call("forget", id=beta_id), call("workspaces"), call("status"),
              call("bind"), call("remember", text="Loose is bound now")]
    with ScriptedModel(script) as model:
        run("claude-code", harness_bin, model, loose, "Use mnemo.", allow, quiet)
        results = model.tool_results()
    assert kinds(results) == ["error"] * 5 + ["workspaces", "status", "bind", "remember"], \
        results
    for _, text in results[:5]:
        assert "`bind` tool" in text and str(loose) in text
    assert first_document(results[6][1])["bound"] is False
    assert (loose / ".mnemosyne-id").exists()
    loose_ws = json.loads(mnemo("status", "--json", cwd=loose))
    assert query(Path(loose_ws["db_path"]), "SELECT content FROM working_memory") == \
        [("Loose is bound now",)]


def test_gemini_cli_calls_remember_and_recall(harness_bin: Path, make_repo,  # noqa: F811
                                              data_dir: Path) -> None:
    home = Path(os.environ["HOME"])
    alpha = bind_repo(make_repo("alpha"))
    setup = SETUPS["gemini"]
    with FakeModel(reply=REPLY, tool_call=ToolCall(
            "mcp_mnemo_remember", {"text": "Gemini saw alpha's deploy rule"})) as model:
        setup.prepare(home, model.url)
        mnemo("mcp", "install", "--client", "gemini", cwd=home)
        setup.trust(home, [alpha.path])
        run("gemini", harness_bin, model, alpha.path, "Remember the deploy rule.", ["--yolo"])
        assert model.saw('"kind": "remember"')
        assert workspace_rows(alpha, data_dir) == ["Gemini saw alpha's deploy rule"]
        model.clear()
        model.tool_call = ToolCall("mcp_mnemo_recall", {"query": "deploy rule"})
        run("gemini", harness_bin, model, alpha.path, "What is the deploy rule?", ["--yolo"])
        assert model.saw('"kind": "recall"') and model.saw("Gemini saw alpha's deploy rule")


def test_qwen_code_calls_remember_and_recall_through_its_tool_call(
        harness_bin: Path, make_repo, data_dir: Path) -> None:  # noqa: F811
    """Qwen defers MCP tools; its own `tool_call` tool runs one by name."""
    home = Path(os.environ["HOME"])
    alpha = bind_repo(make_repo("alpha"))
    setup = SETUPS["qwen"]
    with FakeModel(reply=REPLY, tool_call=ToolCall("tool_call", {
            "name": "mcp__mnemo__remember",
            "arguments": {"text": "Qwen saw alpha's lint rule"}})) as model:
        setup.prepare(home, model.url)
        mnemo("mcp", "install", "--client", "qwen", cwd=home)
        run("qwen", harness_bin, model, alpha.path, "Remember the lint rule.", ["--yolo"])
        assert model.saw('"kind": "remember"')
        assert workspace_rows(alpha, data_dir) == ["Qwen saw alpha's lint rule"]
        model.clear()
        model.tool_call = ToolCall("tool_call", {"name": "mcp__mnemo__recall",
                                                 "arguments": {"query": "lint rule"}})
        run("qwen", harness_bin, model, alpha.path, "What is the lint rule?", ["--yolo"])
        assert model.saw('"kind": "recall"') and model.saw("Qwen saw alpha's lint rule")


@pytest.mark.parametrize(("name", "expect"), [
    ("claude-code", "✔ Connected"), ("codex", "enabled"), ("qwen", "Connected"),
    ("gemini", "mnemo"),
])
def test_each_harness_loads_the_entry_mcp_install_wrote(
        name: str, expect: str, harness_bin: Path, make_repo) -> None:  # noqa: F811
    """`<cli> mcp list` shows mnemo's server from the config `mcp install` wrote
    (Codex lists without starting servers; Gemini lists an untrusted folder's
    servers as disabled)."""
    home = Path(os.environ["HOME"])
    repo = bind_repo(make_repo("alpha"))
    setup = SETUPS[name]
    setup.prepare(home, "http://127.0.0.1:9")
    mnemo("mcp", "install", "--client", name, cwd=home)
    exe = {"claude-code": "claude", "codex": "codex", "gemini": "gemini", "qwen": "qwen"}[name]
    done = subprocess.run([str(harness_bin / exe), "mcp", "list"], cwd=repo.path, text=True,
                          capture_output=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL,
                          env=setup.env(home, harness_bin, "http://127.0.0.1:9"))
    listing = done.stdout + done.stderr
    line = next((ln for ln in listing.splitlines() if "mnemo" in ln and "mcp" in ln), "")
    assert mnemo_executable() in line and expect in line, listing[-2000:]
