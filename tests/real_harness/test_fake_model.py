"""The fake model server on its own (no harness, no node): each wire format, the
tool-call script, the recording bounds, and that it stops."""

from __future__ import annotations

import json
import socket
import urllib.request
from typing import Any

import pytest

from tests.real_harness.fake_model import FakeModel, ToolCall


def post(model: FakeModel, path: str, body: dict[str, Any]) -> tuple[str, str]:
    request = urllib.request.Request(model.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers.get("Content-Type", ""), response.read().decode()


def sse_data(text: str) -> list[Any]:
    items = []
    for line in text.splitlines():
        if line.startswith("data: "):
            payload = line[len("data: "):]
            items.append(payload if payload == "[DONE]" else json.loads(payload))
    return items


@pytest.fixture
def model() -> Any:
    with FakeModel(reply="hello there") as server:
        yield server


def test_anthropic_messages_stream_and_json(model: FakeModel) -> None:
    kind, text = post(model, "/v1/messages?beta=true", {
        "model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    assert kind == "text/event-stream"
    events = sse_data(text)
    assert [e["type"] for e in events] == [
        "message_start", "content_block_start", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop"]
    assert events[2]["delta"] == {"type": "text_delta", "text": "hello there"}
    _, text = post(model, "/v1/messages", {"model": "m", "messages": []})
    assert json.loads(text)["content"] == [{"type": "text", "text": "hello there"}]
    _, text = post(model, "/v1/messages/count_tokens", {"messages": []})
    assert json.loads(text) == {"input_tokens": 100}


def test_responses_stream(model: FakeModel) -> None:
    _, text = post(model, "/v1/responses", {"model": "m", "stream": True, "input": []})
    events = sse_data(text)
    assert events[0]["type"] == "response.created"
    assert events[-1]["type"] == "response.completed"
    done = [e for e in events if e["type"] == "response.output_item.done"]
    assert done[0]["item"]["content"][0]["text"] == "hello there"


def test_gemini_stream_json_and_schema_answers(model: FakeModel) -> None:
    _, text = post(model, "/v1beta/models/g:streamGenerateContent?alt=sse", {"contents": []})
    chunk = sse_data(text)[0]
    assert chunk["candidates"][0]["content"]["parts"] == [{"text": "hello there"}]
    _, text = post(model, "/v1beta/models/g:generateContent", {
        "contents": [], "generationConfig": {
            "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "OBJECT", "properties": {
                "complexity_reasoning": {"type": "STRING"},
                "complexity_score": {"type": "INTEGER"},
                "choice": {"type": "STRING", "enum": ["flash", "pro"]}}}}})
    answer = json.loads(json.loads(text)["candidates"][0]["content"]["parts"][0]["text"])
    assert answer == {"complexity_reasoning": "fake", "complexity_score": 1, "choice": "flash"}


def test_chat_completions_stream(model: FakeModel) -> None:
    _, text = post(model, "/v1/chat/completions", {"model": "m", "stream": True,
                                                   "messages": [{"role": "user",
                                                                 "content": "hi"}]})
    chunks = sse_data(text)
    assert chunks[-1] == "[DONE]"
    assert chunks[0]["choices"][0]["delta"]["content"] == "hello there"
    assert chunks[1]["choices"][0]["finish_reason"] == "stop"


def test_one_tool_call_then_the_text_answer() -> None:
    tool = {"type": "function", "function": {"name": "read_file", "parameters": {}}}
    with FakeModel(reply="done", tool_call=ToolCall("read_file", {"file_path": "/x"})) as model:
        _, text = post(model, "/v1/chat/completions", {
            "stream": True, "tools": [tool], "messages": [{"role": "user", "content": "go"}]})
        call = sse_data(text)[0]["choices"][0]["delta"]["tool_calls"][0]
        assert call["function"] == {"name": "read_file", "arguments": '{"file_path": "/x"}'}
        _, text = post(model, "/v1/chat/completions", {
            "stream": True, "tools": [tool], "messages": [
                {"role": "user", "content": "go"},
                {"role": "tool", "tool_call_id": call["id"], "content": "data"}]})
        assert sse_data(text)[0]["choices"][0]["delta"]["content"] == "done"
        # A request that does not offer the tool never gets the call.
        _, text = post(model, "/v1/chat/completions", {"stream": True, "messages": []})
        assert sse_data(text)[0]["choices"][0]["delta"]["content"] == "done"


def test_requests_are_recorded_within_bounds() -> None:
    with FakeModel(max_requests=2, max_body=64) as model:
        post(model, "/v1/messages", {"messages": [{"role": "user", "content": "needle " * 3}]})
        post(model, "/v1/messages", {"messages": [{"role": "user", "content": "x" * 500}]})
        post(model, "/v1/messages", {"messages": []})
        assert len(model.requests) == 2 and model.dropped == 1
        assert model.requests[1].truncated and len(model.requests[1].body) == 64
        assert model.saw("needle") and model.count("needle") == 1
        model.clear()
        assert model.requests == [] and not model.saw("needle")


def test_probes_get_quick_answers_and_stop_frees_the_port(model: FakeModel) -> None:
    with urllib.request.urlopen(model.url + "/v1/models", timeout=5) as response:
        assert json.loads(response.read())["data"] == []
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(model.url + "/anything-else", timeout=5)
    assert error.value.code == 404
    port = model.port
    model.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1)
