"""`mnemo mcp` against a hostile or buggy client, over the real stdio transport.

A client sends whatever it sends: lines that are not JSON, JSON that is no
JSON-RPC message, strings with lone UTF-16 surrogates (what a JavaScript client
sends for an emoji cut in half), arguments of the wrong type.  Every request
must get an answer (a client waits for ever on one that gets none), every
answer must be a JSON-RPC line, and nothing may be lost on the way.  These
tests write raw lines to the console script's stdin and read its stdout line
by line; the well-behaved client of test_mcp_server.py cannot send such lines.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Repo, bind_repo, mnemo_executable
from tests.mcp.conftest import McpClient, Result, run_client
from tests.memory.conftest import query

pytestmark = pytest.mark.e2e

ANSWER_SECONDS = 30.0


class RawServer:
    """`mnemo mcp` on pipes: raw lines in, one parsed JSON-RPC message per line out."""

    def __init__(self, cwd: Path, capabilities: dict[str, Any] | None = None) -> None:
        self.proc = subprocess.Popen([mnemo_executable(), "mcp"], cwd=cwd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=dict(os.environ))
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": capabilities or {},
            "clientInfo": {"name": "hostile", "version": "1"}}})
        assert self.answer()["id"] == 0
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, message: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def answer(self) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=ANSWER_SECONDS)
        except queue.Empty:
            pytest.fail(f"no answer within {ANSWER_SECONDS:.0f} s")
        return json.loads(line)  # every stdout line is one JSON-RPC message

    def close(self) -> str:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        return self.proc.stderr.read().decode("utf-8", "replace")


def tool_call(request_id: int, tool: str, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}


def contents(repo: Repo, data_dir: Path) -> list[str]:
    return [r[0] for r in query(repo.db(data_dir), "SELECT content FROM working_memory "
                                "WHERE session_id = ? ORDER BY rowid", repo.namespace)]


@pytest.fixture
def alpha(make_repo) -> Repo:
    return bind_repo(make_repo("alpha"))


def test_every_line_gets_an_answer_and_the_server_goes_on(alpha: Repo,
                                                          data_dir: Path) -> None:
    server = RawServer(alpha.path)
    try:
        # Not JSON at all: a parse error, with the null id JSON-RPC asks for.
        server.send(b"this is not json\n")
        answer = server.answer()
        assert answer["id"] is None and answer["error"]["code"] == -32700
        assert "not JSON" in answer["error"]["message"]
        # JSON, but no JSON-RPC request: refused under its own id.
        server.send(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"remember"}\n')
        answer = server.answer()
        assert answer["id"] == 7 and answer["error"]["code"] == -32600
        assert "params" in answer["error"]["message"]
        # A batch (the protocol has none).
        server.send(b'[{"jsonrpc":"2.0","id":8,"method":"tools/list"}]\n')
        answer = server.answer()
        assert answer["id"] is None and answer["error"]["code"] == -32600
        assert "batch" in answer["error"]["message"]
        # Nested deeper than any parser here goes: a parse error, and the server lives.
        server.send(b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":'
                    b'"recall","arguments":{"query":' + b"[" * 100_000 + b"]" * 100_000
                    + b"}}}\n")
        answer = server.answer()
        assert answer["id"] is None and answer["error"]["code"] == -32700
        # A lone surrogate, as JSON.stringify writes half an emoji: the memory is
        # kept, with U+FFFD where the half was.
        server.send(b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":'
                    b'"remember","arguments":{"text":"Ship it \\ud83d on Friday"}}}\n')
        answer = server.answer()
        assert answer["id"] == 9 and answer["result"]["isError"] is False, answer
        # And the server still serves an ordinary call.
        server.send(tool_call(10, "recall", query="Friday"))
        answer = server.answer()
        assert answer["id"] == 10 and "Ship it" in answer["result"]["content"][0]["text"]
    finally:
        stderr = server.close()
    assert contents(alpha, data_dir) == ["Ship it \ufffd on Friday"]
    assert "Traceback" not in stderr


def test_arguments_of_the_wrong_kind_are_a_clear_tool_error(alpha: Repo,
                                                            data_dir: Path) -> None:
    async def body(client: McpClient) -> list[Result]:
        unknown = await client.call("rememberr", text="Fine")
        assert unknown.is_error and unknown.text.startswith('mnemo has no tool "rememberr"')
        assert "Its tools: `remember`, `recall`" in unknown.text
        assert json.loads(unknown.texts[-1])["exit_code"] == 2
        return [await client.call("remember", text=5),
                await client.call("remember", text="x" * 20_001),
                await client.call("recall", query="deploy", top_k=10**30),
                await client.call("remember", text="Fine", importance="very")]

    number, too_long, huge, word = run_client(body, cwd=alpha.path)
    for result in (number, too_long, huge, word):
        assert result.is_error, result
        assert "pydantic" not in result.text and "validation error" not in result.text
        assert result.text.startswith("invalid arguments for `")
        assert "nothing was read or written" in result.text
        error = json.loads(result.texts[-1])
        assert error["kind"] == "error" and error["exit_code"] == 2
    assert "`text`: input should be a valid string (got 5)" in number.text
    assert "`text`: string should have at most 20000 characters" in too_long.text
    assert len(too_long.text) < 1000  # the 20,001 characters are not sent back
    assert "`top_k`: input should be less than or equal to 50" in huge.text
    assert "`importance`" in word.text
    assert contents(alpha, data_dir) == []


def damage(db: Path) -> bytes:
    """Overwrite bytes all through a bank file, as a bad disk or a stray write would."""
    data = bytearray(db.read_bytes())
    for offset in range(100, len(data), 97):
        data[offset] = 0x5A
    db.write_bytes(bytes(data))
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return bytes(data)


def test_a_damaged_bank_is_a_clear_tool_error_and_is_left_as_it_was(
        alpha: Repo, data_dir: Path) -> None:
    from tests.memory.conftest import mnemo

    assert mnemo("remember", "Alpha deploys with make release", cwd=alpha.path).exit_code == 0
    damaged = damage(alpha.db(data_dir))

    async def body(client: McpClient) -> list[Result]:
        return [await client.call("forget", id="abcd1234"),
                await client.call("sleep", force=True)]

    for result in run_client(body, cwd=alpha.path):
        assert result.is_error, result
        assert f"the database {alpha.db(data_dir)} is damaged" in result.text, result
        assert "Run `mnemo doctor`." in result.text
        assert json.loads(result.texts[-1])["exit_code"] == 9
    assert alpha.db(data_dir).read_bytes() == damaged


def test_a_client_that_gives_no_roots_gets_a_tool_error_in_bounded_time(
        alpha: Repo, data_dir: Path) -> None:
    """A client that declares the roots capability, then answers roots/list with an
    error, with something else, or not at all: the call is a tool error saying so
    (never the client's error passed off as the call's, never a wait for ever), and
    a call with an absolute `path` needs no roots."""
    from dsh_mnemo.mcp.server import ROOTS_WAIT_SECONDS

    server = RawServer(alpha.path, capabilities={"roots": {"listChanged": False}})

    def asked() -> Any:
        ask = server.answer()
        assert ask["method"] == "roots/list", ask
        return ask["id"]

    def result(request_id: int) -> dict[str, Any]:
        while True:  # past the server's own notifications (a cancelled roots/list)
            answer = server.answer()
            if answer.get("id") == request_id:
                assert "result" in answer, answer
                return answer["result"]

    try:
        server.send(tool_call(1, "remember", text="Alpha ships on Fridays"))
        server.send({"jsonrpc": "2.0", "id": asked(),
                     "error": {"code": -32601, "message": "roots are off"}})
        refused = result(1)
        assert refused["isError"] is True
        assert ("the client gave no roots (it answered roots/list with an error: roots are "
                "off); nothing was read or written") in refused["content"][0]["text"]
        assert "Pass `path` (absolute)" in refused["content"][0]["text"]

        server.send(tool_call(2, "remember", text="Alpha ships on Fridays",
                              path=str(alpha.path)))
        server.send({"jsonrpc": "2.0", "id": asked(), "result": {"roots": "all of them"}})
        assert result(2)["isError"] is False

        server.send(tool_call(3, "recall", query="Fridays"))
        asked()  # and never answered
        started = time.monotonic()
        silent = result(3)
        waited = time.monotonic() - started
        assert silent["isError"] is True
        assert "did not answer roots/list within" in silent["content"][0]["text"]
        assert ROOTS_WAIT_SECONDS - 1 < waited < ROOTS_WAIT_SECONDS + 15
    finally:
        stderr = server.close()
    assert contents(alpha, data_dir) == ["Alpha ships on Fridays"]
    assert "Traceback" not in stderr


def test_a_bank_sqlite_cannot_open_is_a_tool_error_not_a_bare_crash(alpha: Repo,
                                                                     data_dir: Path) -> None:
    """Where no command translates SQLite's error (here a directory stands where the
    bank should be), the tool still answers with what failed, not the SDK's bare
    "Error executing tool remember"."""
    alpha.db(data_dir).mkdir(parents=True)

    async def body(client: McpClient) -> list[Result]:
        return [await client.call("remember", text="Alpha deploys with make release"),
                await client.call("stats")]

    for result in run_client(body, cwd=alpha.path):
        assert result.is_error, result
        assert result.text.startswith("a memory database failed: "), result
        assert "Run `mnemo doctor`." in result.text
        assert json.loads(result.texts[-1])["exit_code"] == 9
    assert alpha.db(data_dir).is_dir()


def test_a_client_that_stops_reading_ends_the_server_quietly(alpha: Repo,
                                                             data_dir: Path) -> None:
    """The client closes its end of our stdout, sends a memory, and goes: the memory
    is written, the answer has nowhere to go, and the server ends with exit 0 instead
    of a BrokenPipeError traceback."""
    proc = subprocess.Popen([mnemo_executable(), "mcp"], cwd=alpha.path, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ))
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    for message in ({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "hostile", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"}):
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 0
    proc.stdout.close()
    proc.stdin.write(json.dumps(tool_call(1, "remember", text="Alpha deploys with make "
                                          "release")).encode() + b"\n")
    proc.stdin.flush()
    time.sleep(2)  # the answer meets the closed pipe
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    stderr = proc.stderr.read().decode("utf-8", "replace")
    assert "BrokenPipeError" not in stderr and "Traceback" not in stderr, stderr
    assert contents(alpha, data_dir) == ["Alpha deploys with make release"]


def test_sigint_ends_the_server_at_once(alpha: Repo) -> None:
    """SIGINT stopped the answers but left the server waiting for the end of stdin,
    so a client that interrupts and then waits for the exit waited for ever."""
    import signal

    server = RawServer(alpha.path)
    server.send(tool_call(1, "stats"))
    assert server.answer()["id"] == 1
    server.proc.send_signal(signal.SIGINT)
    assert server.proc.wait(timeout=10) == -signal.SIGINT


def test_calls_under_way_when_stdin_ends_get_their_real_answers(alpha: Repo,
                                                                data_dir: Path) -> None:
    """A client sends its memories and closes stdin at once, reading on: each
    memory is stored, and each answer says so (the SDK answered "Connection
    closed" to calls under way, though their writes still landed)."""
    server = RawServer(alpha.path)
    texts = [f"Alpha release step {n} runs on the staging cluster" for n in range(3)]
    for n, text in enumerate(texts, start=1):
        server.send(tool_call(n, "remember", text=text))
    assert server.proc.stdin is not None
    server.proc.stdin.close()
    answers = {a["id"]: a for a in (server.answer() for _ in texts)}
    assert server.proc.wait(timeout=30) == 0
    for n in range(1, len(texts) + 1):
        assert "result" in answers[n], answers[n]
        assert answers[n]["result"]["isError"] is False, answers[n]
    assert sorted(contents(alpha, data_dir)) == sorted(texts)
