"""What each harness sends on stdin, and exactly what it expects back.

A harness event is reduced to one `HookEvent` (where, which session, the
prompt, the reply), using the facts of `harnesses.registry` (which fields,
which environment variables).  Unknown fields are ignored; fields of the
wrong type count as missing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from ..harnesses.registry import HARNESSES, REPLY_FIELDS
from ..record import record

# Events a subagent's run sends (Claude Code's and Qwen Code's `SubagentStop`, Codex's
# `subagent_stop`, …): wired to a mnemo hook by hand, they are not the user's turn.
SUBAGENT_EVENTS = frozenset(["SubagentStart", "SubagentStop", "subagent_start",
                             "subagent_stop", "subagentStart", "subagentStop"])


class BadEvent(ValueError):
    """The stdin payload is not an event we can use."""


@record
class HookEvent:
    harness: str
    kind: str  # "session-start" | "prompt" | "turn-end" | "session-end"
    cwd: str | None  # the directory the context is resolved from
    cwd_source: str  # "event" | "workspace_roots" | "env:NAME" | "process"
    session_id: str | None
    prompt: str | None = None  # the user's message on a prompt event
    user: str | None = None  # the user's message when the turn-end event carries it
    assistant: str | None = None
    event_name: str | None = None
    # The prompt hook fired again inside a turn (an empty prompt, or Qwen's empty
    # `submitted_prompt`): neither capture nor inject.
    continuation: bool = False
    transcript_path: str | None = None
    # Why a session starts: "startup", "resume", "clear", "compact" (Claude Code
    # fires SessionStart again after compacting the context away).
    start_source: str | None = None


def _text(value: object) -> str | None:
    """A string field (lone surrogates repaired: a path or id may carry them too)."""
    if not isinstance(value, str):
        return None
    from ..memory.scrub import fix_surrogates

    return fix_surrogates(value)


def _first_text(payload: dict[str, object], fields: tuple[str, ...]) -> str | None:
    for key in fields:
        value = _text(payload.get(key))
        if value is not None:
            return value
    return None


def _session(payload: dict[str, object], harness: str,
             environ: Mapping[str, str]) -> str | None:
    for key in ("session_id", "conversation_id", "sessionId", "conversationId"):
        value = payload.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return _text(str(value))
    for name in HARNESSES[harness].session_env:
        if environ.get(name):
            return environ[name]
    return None


SEVERAL_ROOTS = "workspace_roots:several"


def _root_path(root: str) -> str:
    if root.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return unquote(urlparse(root).path)
    return root


def _one_project(roots: list[str]) -> bool:
    """Do all these directories resolve to one workspace (or, unbound, one repository)?"""
    from pathlib import Path

    from ..workspace import identity

    seen: set[str] = set()
    for root in roots:
        try:
            location = identity.find_workspace(Path(root))
        except Exception:  # noqa: BLE001 - a root that cannot be resolved is its own
            seen.add(f"?{root}")
            continue
        seen.add(location.workspace_uuid or f"unbound:{location.git_top or location.start}")
    return len(seen) == 1


def resolve_cwd(payload: dict[str, object], harness: str,
                environ: Mapping[str, str] | None = None,
                process_cwd: str | None = None) -> tuple[str | None, str]:
    """Event `cwd` → `workspace_roots[0]` → the harness's project env var → process cwd.

    Several workspace roots that are not all one project give no directory at all
    (`SEVERAL_ROOTS`): nothing is read or written rather than the first one's memory
    taking the others' prompts.

    `environ` and `process_cwd` are the hook process's (the resident server
    passes its client's: `""` when the client had no directory, its own was
    deleted); they default to this process's own.

    A non-empty event `cwd` is used as given even if it does not exist: guessing
    another directory could inject a different project's memory.
    """
    cwd = _text(payload.get("cwd"))
    if cwd and cwd.strip():
        return cwd, "event"
    roots = payload.get("workspace_roots")
    if isinstance(roots, list) and roots and isinstance(roots[0], str) and roots[0].strip():
        found = [_root_path(r) for r in roots if isinstance(r, str) and r.strip()]
        if len(set(found)) > 1 and not _one_project(found):
            # A multi-root window of several projects: the event does not say which
            # one the prompt is about, and the first is no better a guess.
            return None, SEVERAL_ROOTS
        return found[0], "workspace_roots"
    environ = os.environ if environ is None else environ
    for name in HARNESSES[harness].project_env:
        value = environ.get(name)
        if value and value.strip():
            return value, f"env:{name}"
    # Harnesses run hooks in the session's directory, so this is the last resort.
    if process_cwd is not None:
        return (process_cwd, "process") if process_cwd else (None, "none")
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


def parse_event(payload: dict[str, object], harness: str, kind: str, *,
                environ: Mapping[str, str] | None = None,
                process_cwd: str | None = None) -> HookEvent:
    """The event as mnemo uses it; `environ`/`process_cwd` as for `resolve_cwd`."""
    environ = os.environ if environ is None else environ
    cwd, source = resolve_cwd(payload, harness, environ, process_cwd)
    event = HookEvent(harness=harness, kind=kind, cwd=cwd, cwd_source=source,
                      session_id=_session(payload, harness, environ),
                      event_name=_text(payload.get("hook_event_name")),
                      transcript_path=_text(payload.get("transcript_path")))
    spec = HARNESSES[harness]
    if kind == "session-start":
        event.start_source = _text(payload.get("source"))
    if spec.submitted_field and spec.submitted_field in payload:
        # The prompt event also fires on tool-result continuations; only this
        # field is what the user typed.
        submitted = _text(payload.get(spec.submitted_field))
        event.prompt = submitted
        event.continuation = not (submitted and submitted.strip())
    else:
        event.prompt = _first_text(payload, spec.prompt_fields)
        # Nobody submits an empty prompt: an empty one is a harness firing the
        # prompt hook again inside a turn (Qwen Code 0.24 after every tool result
        # sends {"prompt": ""} without `submitted_prompt`).  Nothing to capture,
        # nothing to add: the model already has what the turn's first prompt got.
        if kind == "prompt" and not (event.prompt and event.prompt.strip()):
            event.continuation = True
    if kind == "turn-end":
        event.user = _first_text(payload, ("user", *spec.turn_user_fields))
        event.assistant = _first_text(payload, REPLY_FIELDS)
    return event


TRANSCRIPT_TAIL_BYTES = 1024 * 1024


def last_reply_from_transcript(path: str) -> str | None:
    """The last assistant text in a Claude-Code-style JSONL transcript, or None.

    Only a fallback for events without `last_assistant_message` (older
    versions): the event's own field is preferred, since the transcript may
    lag the turn.  Reads at most the last MiB.
    """
    try:
        if not os.path.isfile(path):
            return None  # a device or FIFO (`/dev/zero`) would never end
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TRANSCRIPT_TAIL_BYTES))
            tail = handle.read(TRANSCRIPT_TAIL_BYTES).decode("utf-8", "replace")
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
        if not isinstance(entry, dict) or entry.get("isSidechain") is True:
            continue  # a subagent's message (older versions keep them in this file)
        message = entry.get("message")
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
