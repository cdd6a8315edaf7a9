"""What each harness sends on stdin, and exactly what it expects back.

Facts in `shared/HARNESSES.md`.  A harness event is reduced to one
`HookEvent` (where, which session, the prompt, the reply); the answer is
built by `format_output`, the only place that knows each harness's output
shape.  Unknown fields are ignored; fields of the wrong type count as
missing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

HARNESSES = ("claude-code", "codex", "gemini", "cursor", "qwen", "generic")
EVENTS = ("prompt", "turn-end", "session-end")

# The hook event name each harness uses for our three events (for output and install).
EVENT_NAMES: dict[str, dict[str, str]] = {
    "claude-code": {"prompt": "UserPromptSubmit", "turn-end": "Stop", "session-end": "SessionEnd"},
    "codex": {"prompt": "UserPromptSubmit", "turn-end": "Stop", "session-end": "SessionEnd"},
    "gemini": {"prompt": "BeforeAgent", "turn-end": "AfterAgent", "session-end": "SessionEnd"},
    "cursor": {"prompt": "beforeSubmitPrompt", "turn-end": "stop", "session-end": "sessionEnd"},
    "qwen": {"prompt": "UserPromptSubmit", "turn-end": "Stop", "session-end": "SessionEnd"},
    "generic": {"prompt": "prompt", "turn-end": "turn-end", "session-end": "session-end"},
}

# Harnesses whose prompt hook can put text into the model's context.
CAN_INJECT = {"claude-code", "codex", "gemini", "qwen", "generic"}

# Project-directory environment variables, in the order each harness sets them.
PROJECT_ENV: dict[str, tuple[str, ...]] = {
    "claude-code": ("CLAUDE_PROJECT_DIR",),
    "codex": (),
    "gemini": ("GEMINI_PROJECT_DIR", "GEMINI_CWD", "CLAUDE_PROJECT_DIR"),
    "cursor": ("CURSOR_PROJECT_DIR",),
    "qwen": ("QWEN_PROJECT_DIR",),
    "generic": (),
}

SESSION_ENV: dict[str, tuple[str, ...]] = {"gemini": ("GEMINI_SESSION_ID",)}

# Where the assistant's reply may be, most specific first.
REPLY_FIELDS = ("last_assistant_message", "prompt_response", "assistant", "response")


class BadEvent(ValueError):
    """The stdin payload is not an event we can use."""


@dataclass
class HookEvent:
    harness: str
    kind: str  # "prompt" | "turn-end" | "session-end"
    cwd: str | None  # the directory the context is resolved from
    cwd_source: str  # "event" | "workspace_roots" | "env:NAME" | "process"
    session_id: str | None
    prompt: str | None = None  # the user's message on a prompt event
    user: str | None = None  # the user's message when the turn-end event carries it
    assistant: str | None = None
    event_name: str | None = None
    continuation: bool = False  # Qwen: the prompt hook fired for a tool-result continuation
    transcript_path: str | None = None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _session(payload: dict[str, object], harness: str) -> str | None:
    for key in ("session_id", "conversation_id", "sessionId", "conversationId"):
        value = payload.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return str(value)
    for name in SESSION_ENV.get(harness, ()):
        if os.environ.get(name):
            return os.environ[name]
    return None


def resolve_cwd(payload: dict[str, object], harness: str) -> tuple[str | None, str]:
    """Event `cwd` → `workspace_roots[0]` → the harness's project env var → process cwd.

    A non-empty event `cwd` is used as given even if it does not exist: guessing
    another directory could inject a different project's memory.
    """
    cwd = payload.get("cwd")
    if isinstance(cwd, str) and cwd.strip():
        return cwd, "event"
    roots = payload.get("workspace_roots")
    if isinstance(roots, list) and roots and isinstance(roots[0], str) and roots[0].strip():
        root = roots[0]
        if root.startswith("file://"):
            from urllib.parse import unquote, urlparse

            root = unquote(urlparse(root).path)
        return root, "workspace_roots"
    for name in PROJECT_ENV.get(harness, ()):
        value = os.environ.get(name)
        if value and value.strip():
            return value, f"env:{name}"
    # Harnesses run hooks in the session's directory, so this is the last resort.
    try:
        return os.getcwd(), "process"
    except OSError:
        return None, "none"


def decode_payload(raw: bytes) -> dict[str, object]:
    """Bytes on stdin → the event object.  Invalid UTF-8 is replaced, not fatal."""
    if not raw or not raw.strip():
        raise BadEvent("empty stdin")
    text = raw.decode("utf-8", errors="replace").lstrip("\ufeff")
    try:
        # strict=False: raw control characters (NUL included) inside strings are
        # tolerated here and removed before anything is stored.
        payload = json.loads(text, strict=False)
    except (ValueError, RecursionError) as exc:
        raise BadEvent(f"stdin is not JSON ({str(exc)[:80]})") from None
    if not isinstance(payload, dict):
        raise BadEvent(f"stdin is JSON but not an object ({type(payload).__name__})")
    return payload


def parse_event(payload: dict[str, object], harness: str, kind: str) -> HookEvent:
    cwd, source = resolve_cwd(payload, harness)
    event = HookEvent(harness=harness, kind=kind, cwd=cwd, cwd_source=source,
                      session_id=_session(payload, harness),
                      event_name=_text(payload.get("hook_event_name")),
                      transcript_path=_text(payload.get("transcript_path")))
    if harness == "qwen" and "submitted_prompt" in payload:
        # Qwen also fires UserPromptSubmit on tool-result continuations; only
        # `submitted_prompt` is what the user typed.
        submitted = _text(payload.get("submitted_prompt"))
        event.prompt = submitted
        event.continuation = not (submitted and submitted.strip())
    else:
        event.prompt = _text(payload.get("prompt"))
        if event.prompt is None and harness == "generic":
            event.prompt = _text(payload.get("user"))
    if kind == "turn-end":
        event.user = _text(payload.get("user"))
        if event.user is None and harness == "gemini":
            event.user = _text(payload.get("prompt"))  # AfterAgent repeats the prompt
        for key in REPLY_FIELDS:
            reply = _text(payload.get(key))
            if reply is not None:
                event.assistant = reply
                break
    return event


# Harnesses whose transcript is Claude Code's JSONL; only they get the fallback.
TRANSCRIPT_JSONL = {"claude-code", "qwen"}
TRANSCRIPT_TAIL_BYTES = 1024 * 1024


def last_reply_from_transcript(path: str) -> str | None:
    """The last assistant text in a Claude-Code-style JSONL transcript, or None.

    Only a fallback for events without `last_assistant_message` (older
    versions): the event's own field is preferred, since the transcript may
    lag the turn.  Reads at most the last MiB.
    """
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TRANSCRIPT_TAIL_BYTES))
            tail = handle.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    for line in reversed(tail.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            text = "\n".join(part.get("text", "") for part in content
                             if isinstance(part, dict) and part.get("type") == "text"
                             and isinstance(part.get("text"), str))
        else:
            continue
        if text.strip():
            return text
    return None


def format_output(harness: str, kind: str, context: str | None) -> str:
    """The exact stdout for `harness`; `context` is the text for the model, if any."""
    if kind == "prompt" and context:
        if harness == "generic":
            return context if context.endswith("\n") else context + "\n"
        if harness in CAN_INJECT:
            document = {"hookSpecificOutput": {
                "hookEventName": EVENT_NAMES[harness]["prompt"],
                "additionalContext": context}}
            return json.dumps(document, ensure_ascii=False) + "\n"
        return ""  # Cursor's beforeSubmitPrompt cannot inject
    return neutral_output(harness, kind)


def neutral_output(harness: str, kind: str) -> str:
    """What to print when there is nothing to say (also on any failure).

    Codex's Stop hook must answer JSON when it exits 0; everyone else gets silence.
    """
    if harness == "codex" and kind == "turn-end":
        return "{}\n"
    return ""
