"""A small fake model server on 127.0.0.1 for running real harness CLIs offline.

It speaks just enough of four wire formats for one non-interactive turn:

- Anthropic Messages (`POST /v1/messages`, SSE or JSON; `count_tokens`): Claude Code
- OpenAI Responses (`POST /v1/responses`, SSE): Codex CLI
- Gemini (`POST /v1beta/models/M:generateContent`, `:streamGenerateContent?alt=sse`,
  `:countTokens`): Gemini CLI
- OpenAI chat completions (`POST /v1/chat/completions`, SSE or JSON): Qwen Code

Anything else a harness probes at start-up gets a quick, minimal answer (an
empty model list, `{}`, or 404), so nothing waits on a missing service.

Every request is recorded (at most `max_requests`, each body cut to
`max_body` bytes) so a test can look for text in what the harness sent.
Replies are scripted: a fixed text answer, or, with `tool_call`, one tool call
for a request that offers that tool and whose conversation holds no tool
result yet, followed by the text answer once the result comes back.

    with FakeModel(reply="All done.") as model:
        env["ANTHROPIC_BASE_URL"] = model.url
        ...
        assert model.saw("distinctive fact")
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

DEFAULT_REPLY = "Fake model reply."
MAX_REQUESTS = 400
MAX_BODY = 4 * 1024 * 1024


@dataclass(frozen=True)
class ToolCall:
    """Ask the harness to run one tool, e.g. ToolCall("read_file", {"absolute_path": p})."""

    name: str
    arguments: dict[str, Any]
    call_id: str = "call_fake_1"


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]] = field(repr=False)
    headers: dict[str, str] = field(repr=False)
    body: bytes = field(repr=False)
    truncated: bool = False
    at: float = 0.0

    @property
    def json(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8", "replace"))
        except ValueError:
            return None

    def strings(self) -> list[str]:
        """Every string value in the JSON body (keys not included), in document order;
        a body that is not JSON (or was cut at `max_body`) as one raw string."""
        document = self.json
        if document is None:
            return [self.body.decode("utf-8", "replace")] if self.body else []
        out: list[str] = []

        def walk(value: Any) -> None:
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, list):
                for item in value:
                    walk(item)
            elif isinstance(value, dict):
                for item in value.values():
                    walk(item)

        walk(document)
        return out

    def text(self) -> str:
        return "\n".join(self.strings())


@dataclass
class FakeModel:
    reply: str = DEFAULT_REPLY
    tool_call: ToolCall | None = None
    max_requests: int = MAX_REQUESTS
    max_body: int = MAX_BODY
    requests: list[Recorded] = field(default_factory=list, repr=False)
    dropped: int = 0  # requests not recorded because `max_requests` was reached

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ── lifecycle ──────────────────────────────────────────────────────────
    def start(self) -> FakeModel:
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="fake-model", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "the fake model server is not running"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ── what tests look at ─────────────────────────────────────────────────
    def record(self, item: Recorded) -> None:
        with self._lock:
            if len(self.requests) >= self.max_requests:
                self.dropped += 1
            else:
                self.requests.append(item)

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
            self.dropped = 0

    def model_requests(self) -> list[Recorded]:
        """Requests that asked for a completion (not probes or token counts)."""
        with self._lock:
            items = list(self.requests)
        return [r for r in items if r.method == "POST" and _api_of(r.path) is not None
                and not r.path.endswith(("count_tokens", ":countTokens"))]

    def saw(self, needle: str) -> bool:
        """Does any model request carry `needle` in one of its JSON strings?"""
        return any(needle in s for r in self.model_requests() for s in r.strings())

    def count(self, needle: str) -> int:
        """How many model requests carry `needle`."""
        return sum(1 for r in self.model_requests() if any(needle in s for s in r.strings()))

    def strings_with(self, needle: str) -> list[str]:
        return [s for r in self.model_requests() for s in r.strings() if needle in s]


def fake_model(**kwargs: Any) -> Iterator[FakeModel]:
    """Generator for a pytest fixture: yields a running server, stops it after."""
    model = FakeModel(**kwargs).start()
    try:
        yield model
    finally:
        model.stop()


# ─── Request handling ──────────────────────────────────────────────────────

def _api_of(path: str) -> str | None:
    if path.startswith("/v1/messages"):
        return "anthropic"
    if path.rstrip("/").endswith("/responses"):
        return "responses"
    if path.rstrip("/").endswith("/chat/completions"):
        return "chat"
    if ":generateContent" in path or ":streamGenerateContent" in path or ":countTokens" in path:
        return "gemini"
    return None


def _decode_body(raw: bytes, encoding: str) -> bytes:
    encoding = encoding.lower().strip()
    try:
        if encoding == "gzip":
            return gzip.decompress(raw)
        if encoding == "deflate":
            return zlib.decompress(raw)
        if encoding == "zstd":
            try:
                from compression import zstd  # type: ignore[import-not-found]
            except ImportError:
                return raw
            return bytes(zstd.decompress(raw))
    except (OSError, zlib.error, ValueError):
        return raw
    return raw


def _make_handler(model: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "FakeModel/1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # quiet: tests read `model.requests` instead

        def _read_body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                raw = self.rfile.read(length)
            elif "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                parts = []
                while True:
                    size = int(self.rfile.readline().strip().split(b";")[0] or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        break
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
                raw = b"".join(parts)
            else:
                raw = b""
            return _decode_body(raw, self.headers.get("Content-Encoding") or "")

        def _record(self, body: bytes) -> Recorded:
            parsed = urlparse(self.path)
            item = Recorded(method=self.command, path=parsed.path,
                            query=parse_qs(parsed.query),
                            headers={k.lower(): v for k, v in self.headers.items()},
                            body=body[: model.max_body], truncated=len(body) > model.max_body,
                            at=time.time())
            model.record(item)
            return item

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, status: int, document: Any) -> None:
            self._send(status, json.dumps(document).encode(), "application/json")

        def _sse(self, events: list[tuple[str | None, Any]]) -> None:
            chunks = []
            for name, data in events:
                text = data if isinstance(data, str) else json.dumps(data)
                chunks.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
            self._send(200, "".join(chunks).encode(), "text/event-stream")

        def do_HEAD(self) -> None:  # noqa: N802
            self._record(b"")
            self._send(200, b"", "text/plain")

        def do_GET(self) -> None:  # noqa: N802
            item = self._record(b"")
            if item.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [], "models": []})
            else:
                self._json(404, {"error": {"message": f"fake model: no {item.path}"}})

        def do_POST(self) -> None:  # noqa: N802
            item = self._record(self._read_body())
            api = _api_of(item.path)
            request = item.json if isinstance(item.json, dict) else {}
            try:
                if api == "anthropic":
                    self._anthropic(item, request)
                elif api == "responses":
                    self._responses(request)
                elif api == "gemini":
                    self._gemini(item, request)
                elif api == "chat":
                    self._chat(request)
                else:
                    self._json(200, {})
            except (BrokenPipeError, ConnectionResetError):
                pass

        # ── Anthropic Messages ─────────────────────────────────────────────
        def _anthropic(self, item: Recorded, request: dict[str, Any]) -> None:
            if item.path.endswith("count_tokens"):
                self._json(200, {"input_tokens": 100})
                return
            messages = request.get("messages") or []
            tools = {t.get("name") for t in request.get("tools") or [] if isinstance(t, dict)}
            call = model.tool_call if model.tool_call and model.tool_call.name in tools \
                and not _anthropic_has_result(messages) else None
            usage = {"input_tokens": 100, "output_tokens": 10,
                     "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
            if call:
                block: dict[str, Any] = {"type": "tool_use", "id": "toolu_" + call.call_id,
                                         "name": call.name, "input": call.arguments}
                stop = "tool_use"
            else:
                block = {"type": "text", "text": model.reply}
                stop = "end_turn"
            message = {"id": "msg_fake", "type": "message", "role": "assistant",
                       "model": request.get("model", "fake"), "content": [block],
                       "stop_reason": stop, "stop_sequence": None, "usage": usage}
            if not request.get("stream"):
                self._json(200, message)
                return
            start_block = dict(block, input={}) if call else {"type": "text", "text": ""}
            delta = ({"type": "input_json_delta", "partial_json": json.dumps(call.arguments)}
                     if call else {"type": "text_delta", "text": model.reply})
            self._sse([
                ("message_start", {"type": "message_start", "message": dict(
                    message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))}),
                ("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": start_block}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": {"output_tokens": 10}}),
                ("message_stop", {"type": "message_stop"}),
            ])

        # ── OpenAI Responses ───────────────────────────────────────────────
        def _responses(self, request: dict[str, Any]) -> None:
            items = request.get("input") or []
            tools = {t.get("name") for t in request.get("tools") or [] if isinstance(t, dict)}
            has_result = any(isinstance(i, dict) and i.get("type") == "function_call_output"
                             for i in items)
            call = model.tool_call if model.tool_call and model.tool_call.name in tools \
                and not has_result else None
            if call:
                output: dict[str, Any] = {"type": "function_call", "id": "fc_fake",
                                          "call_id": call.call_id, "name": call.name,
                                          "arguments": json.dumps(call.arguments),
                                          "status": "completed"}
            else:
                output = {"type": "message", "id": "msg_fake", "role": "assistant",
                          "status": "completed",
                          "content": [{"type": "output_text", "text": model.reply,
                                       "annotations": []}]}
            usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                     "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                     "total_tokens": 110}
            response = {"id": "resp_fake", "object": "response", "status": "completed",
                        "model": request.get("model", "fake"), "output": [output],
                        "usage": usage}
            if not request.get("stream", True):
                self._json(200, response)
                return
            events: list[tuple[str | None, Any]] = [
                ("response.created", {"type": "response.created",
                                      "response": dict(response, status="in_progress",
                                                       output=[])}),
                ("response.output_item.added", {"type": "response.output_item.added",
                                                "output_index": 0,
                                                "item": dict(output, status="in_progress")}),
            ]
            if not call:
                events.append(("response.output_text.delta", {
                    "type": "response.output_text.delta", "item_id": "msg_fake",
                    "output_index": 0, "content_index": 0, "delta": model.reply}))
            events += [
                ("response.output_item.done", {"type": "response.output_item.done",
                                               "output_index": 0, "item": output}),
                ("response.completed", {"type": "response.completed", "response": response}),
            ]
            self._sse(events)

        # ── Gemini ─────────────────────────────────────────────────────────
        def _gemini(self, item: Recorded, request: dict[str, Any]) -> None:
            if ":countTokens" in item.path:
                self._json(200, {"totalTokens": 100})
                return
            contents = request.get("contents") or []
            config = request.get("generationConfig") or {}
            declared = {d.get("name") for t in request.get("tools") or [] if isinstance(t, dict)
                        for d in t.get("functionDeclarations") or [] if isinstance(d, dict)}
            has_result = any(isinstance(p, dict) and "functionResponse" in p
                             for c in contents if isinstance(c, dict)
                             for p in c.get("parts") or [])
            call = model.tool_call if model.tool_call and model.tool_call.name in declared \
                and not has_result else None
            if call:
                part: dict[str, Any] = {"functionCall": {"name": call.name,
                                                         "args": call.arguments}}
            elif config.get("responseMimeType") == "application/json":
                # Side questions the CLI asks itself (routing, next speaker): an answer
                # of the requested schema's shape.
                schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
                part = {"text": json.dumps(_sample(schema))}
            else:
                part = {"text": model.reply}
            chunk = {"candidates": [{"content": {"role": "model", "parts": [part]},
                                     "finishReason": "STOP", "index": 0}],
                     "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10,
                                       "totalTokenCount": 110},
                     "modelVersion": "fake"}
            if ":streamGenerateContent" in item.path:
                self._sse([(None, chunk)])
            else:
                self._json(200, chunk)

        # ── OpenAI chat completions ────────────────────────────────────────
        def _chat(self, request: dict[str, Any]) -> None:
            messages = request.get("messages") or []
            tools = {(t.get("function") or {}).get("name") for t in request.get("tools") or []
                     if isinstance(t, dict)}
            has_result = any(isinstance(m, dict) and m.get("role") == "tool" for m in messages)
            call = model.tool_call if model.tool_call and model.tool_call.name in tools \
                and not has_result else None
            name = request.get("model", "fake")
            usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
            if call:
                tool_calls = [{"index": 0, "id": call.call_id, "type": "function",
                               "function": {"name": call.name,
                                            "arguments": json.dumps(call.arguments)}}]
                delta: dict[str, Any] = {"role": "assistant", "content": None,
                                         "tool_calls": tool_calls}
                finish = "tool_calls"
            else:
                delta = {"role": "assistant", "content": model.reply}
                finish = "stop"
            if not request.get("stream"):
                message = dict(delta)
                if call:
                    message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"}
                                             for c in tool_calls]
                self._json(200, {"id": "chatcmpl-fake", "object": "chat.completion",
                                 "created": int(time.time()), "model": name,
                                 "choices": [{"index": 0, "message": message,
                                              "finish_reason": finish}],
                                 "usage": usage})
                return
            base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                    "created": int(time.time()), "model": name}
            self._sse([
                (None, dict(base, choices=[{"index": 0, "delta": delta,
                                            "finish_reason": None}])),
                (None, dict(base, choices=[{"index": 0, "delta": {},
                                            "finish_reason": finish}])),
                (None, dict(base, choices=[], usage=usage)),
                (None, "[DONE]"),
            ])

    return Handler


def _anthropic_has_result(messages: list[Any]) -> bool:
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
                isinstance(block, dict) and block.get("type") == "tool_result"
                for block in content):
            return True
    return False


def _sample(schema: Any) -> Any:
    """A minimal value of a (Gemini-style) JSON schema: first enum value, 1, "fake"…"""
    if not isinstance(schema, dict):
        return {}
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        return {k: _sample(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "fake"
