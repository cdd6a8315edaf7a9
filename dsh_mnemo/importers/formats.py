"""Readers: each source's files as sessions of turns (docs/import.md).

A turn is one prompt the user typed, with the last thing the assistant said
before the next prompt.  Everything a harness put into the conversation
itself — tool results, its environment and instruction preambles, hook
context (mnemo's own included) — is not the user's words and is left out
here, before the capture path's own stripping runs on what remains.

Shapes, as the pinned harnesses write them (docs/harnesses-real.md, samples
in tests/real_harness/samples/transcripts/):

- Claude Code: JSON Lines; `type: user|assistant` lines carry `message`
  (`content` a string or blocks), `cwd`, `sessionId`, `timestamp`;
- Codex CLI: JSON Lines of `{timestamp, type, payload}`; `session_meta`
  holds `id` and `cwd`, `response_item` messages the turns;
- Gemini CLI: JSON Lines: a header (`sessionId`, `projectHash`), message
  records `{id, type: user|gemini, content}` (a record may be written again
  with the same id) and `{"$set": …}` updates; older versions wrote one JSON
  object with `messages`;
- Qwen Code: JSON Lines of `{type: user|assistant|…, cwd, sessionId,
  message: {role, parts}}`;
- ChatGPT export: `conversations.json`, a list of conversations whose
  `mapping` is a message tree (the shown branch ends at `current_node`);
- Claude.ai export: `conversations.json`, a list of conversations with
  `chat_messages` (`sender: human|assistant`, `content` blocks or `text`).

Nothing here raises on bad data: unreadable lines and records of unknown
shape are counted in `Session.unknown` (or `FileResult.unknown`).
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..record import field, record

HARNESS_SOURCES = ("claude-code", "codex", "gemini", "qwen")
EXPORT_SOURCES = ("chatgpt", "claude-ai")
SOURCES = HARNESS_SOURCES + EXPORT_SOURCES

MAX_LINE_BYTES = 32 * 1024 * 1024  # a larger JSONL line is counted as unknown
MAX_EXPORT_BYTES = 2 * 1024 * 1024 * 1024


@record
class Turn:
    index: int  # the prompt's position in its session, from 0
    user: str
    reply: str | None = None
    timestamp: str | float | None = None  # ISO-8601 text, or epoch seconds


@record
class Session:
    source: str
    session_id: str
    path: str
    cwd: str | None  # the recorded directory (None for chat exports)
    title: str | None = None
    turns: list[Turn] = field(default_factory=list)
    unknown: int = 0  # records not understood
    note: str | None = None  # why the directory is unknown, when it is


@record
class FileResult:
    path: str
    sessions: list[Session] = field(default_factory=list)
    unknown: int = 0  # records outside any session, or the whole file when unreadable
    error: str | None = None  # the file could not be read at all


# ─── Shared helpers ────────────────────────────────────────────────────────

def _read_jsonl(path: Path, result: FileResult) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON Lines file; anything else is counted as unknown."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        result.error = f"cannot read: {exc.strerror or exc}"
        return
    with handle:
        for raw in handle:
            if not raw.strip():
                continue
            if len(raw) > MAX_LINE_BYTES:
                result.unknown += 1
                continue
            try:
                entry = json.loads(raw)
            except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
                result.unknown += 1
                continue
            if not isinstance(entry, dict):
                result.unknown += 1
                continue
            yield entry


def _text_blocks(content: Any, *, key: str = "text",
                 types: tuple[str, ...] = ("text",)) -> str:
    """The text of a string, or of the text blocks in a list of blocks."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type", types[0]) in types \
                and isinstance(block.get(key), str):
            parts.append(block[key])
    return "\n".join(p for p in parts if p)


class _Turns:
    """Collects turns: a prompt opens one, replies update its answer."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []

    def prompt(self, text: str, timestamp: Any) -> None:
        if text.strip():
            self.turns.append(Turn(index=len(self.turns), user=text, timestamp=timestamp))

    def reply(self, text: str) -> None:
        if self.turns and text.strip():
            self.turns[-1].reply = text


# ─── Claude Code ───────────────────────────────────────────────────────────

_CLAUDE_INTERRUPTED = re.compile(r"^\[Request interrupted by user[^\]]*\]$")


def read_claude_code(path: Path) -> FileResult:
    result = FileResult(str(path))
    collected = _Turns()
    session_id: str | None = None
    cwd: str | None = None
    unknown = 0
    last_reply_id: object = None
    reply_parts: list[str] = []
    for entry in _read_jsonl(path, result):
        kind = entry.get("type")
        if not isinstance(kind, str):
            unknown += 1
            continue
        if kind not in ("user", "assistant"):
            continue  # attachments, queue operations, api records, summaries …
        message = entry.get("message")
        if not isinstance(message, dict):
            unknown += 1
            continue
        session_id = session_id or _str(entry.get("sessionId"))
        if entry.get("isSidechain") or entry.get("isMeta") or entry.get("isCompactSummary"):
            continue  # a sub-agent's prompt, harness meta text, a compaction summary
        if kind == "user":
            if "toolUseResult" in entry:
                continue
            text = _text_blocks(message.get("content"))
            if not text or _CLAUDE_INTERRUPTED.match(text.strip()):
                continue  # tool results only, or the interruption marker
            cwd = cwd or _str(entry.get("cwd"))
            collected.prompt(text, entry.get("timestamp"))
            last_reply_id, reply_parts = None, []
        else:
            text = _text_blocks(message.get("content"))
            if not text:
                continue
            # One reply is streamed as several lines sharing the message id.
            message_id = message.get("id") or entry.get("uuid")
            if message_id != last_reply_id:
                last_reply_id, reply_parts = message_id, []
            reply_parts.append(text)
            collected.reply("\n".join(reply_parts))
    if session_id is None and not collected.turns:
        result.unknown += unknown
        return result
    result.sessions.append(Session("claude-code", session_id or path.stem, str(path), cwd,
                                   turns=collected.turns, unknown=unknown))
    return result


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# ─── Codex CLI ─────────────────────────────────────────────────────────────

# User-role messages Codex writes itself: its environment and AGENTS.md
# preambles, shell command echoes, interruption notices, skill injections.
_CODEX_CONTEXT = re.compile(
    r"^\s*(?:<(?:environment_context|user_instructions|user_shell_command|turn_aborted|"
    r"skill|subagent_notification|INSTRUCTIONS)\b|# AGENTS\.md instructions for )")


def read_codex(path: Path) -> FileResult:
    result = FileResult(str(path))
    collected = _Turns()
    session_id: str | None = None
    cwd: str | None = None
    unknown = 0
    for entry in _read_jsonl(path, result):
        kind = entry.get("type")
        payload = entry.get("payload")
        if kind == "session_meta" and isinstance(payload, dict):
            session_id = session_id or _str(payload.get("id")) or _str(payload.get("session_id"))
            cwd = cwd or _str(payload.get("cwd"))
            continue
        if kind == "turn_context" and isinstance(payload, dict):
            cwd = cwd or _str(payload.get("cwd"))
            continue
        if kind == "response_item" and isinstance(payload, dict):
            item, stamp = payload, entry.get("timestamp")
        elif kind == "message" and "role" in entry:
            item, stamp = entry, entry.get("timestamp")  # early rollouts: bare items
        elif isinstance(kind, str):
            continue  # event_msg, token counts, compaction records …
        elif "id" in entry and "timestamp" in entry and session_id is None:
            session_id = _str(entry.get("id"))  # early rollouts' first line
            continue
        else:
            unknown += 1
            continue
        if item.get("type") != "message":
            continue  # function calls and their output, reasoning
        role = item.get("role")
        text = _text_blocks(item.get("content"), types=("input_text", "output_text", "text"))
        if role == "user":
            if not _CODEX_CONTEXT.match(text):
                collected.prompt(text, stamp)
        elif role == "assistant":
            collected.reply(text)
    if session_id is None and not collected.turns:
        result.unknown += unknown
        return result
    result.sessions.append(Session("codex", session_id or path.stem, str(path), cwd,
                                   turns=collected.turns, unknown=unknown))
    return result


# ─── Gemini CLI ────────────────────────────────────────────────────────────

# Gemini's own wrappers: the environment preamble, and hook context (escaped
# inside, so no memory-data tag of mnemo's can be seen in it).
_GEMINI_CONTEXT = re.compile(r"<(session_context|hook_context)>.*?(?:</\1>|\Z)\s*", re.S)


def _gemini_user_text(content: Any) -> str:
    if isinstance(content, str):
        return _GEMINI_CONTEXT.sub("", content)
    if not isinstance(content, list):
        return ""
    parts = [_GEMINI_CONTEXT.sub("", p["text"]) for p in content
             if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")]
    return "\n".join(p for p in parts if p.strip())


def gemini_session(path: Path, header: dict[str, Any], messages: list[dict[str, Any]],
                   cwd: str | None, note: str | None, unknown: int) -> Session:
    collected = _Turns()
    for message in messages:
        kind = message.get("type")
        if kind == "user":
            collected.prompt(_gemini_user_text(message.get("content")), message.get("timestamp"))
        elif kind == "gemini":
            collected.reply(_gemini_user_text(message.get("content")))
    return Session("gemini", _str(header.get("sessionId")) or path.stem, str(path), cwd,
                   turns=collected.turns, unknown=unknown, note=note)


def read_gemini(path: Path, *, cwd: str | None = None, note: str | None = None) -> FileResult:
    """A Gemini chat file; `cwd` is the project it belongs to (found by `discover`)."""
    result = FileResult(str(path))
    if path.suffix == ".json":  # before JSON Lines: one object
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
            result.error = f"cannot read: {exc}"
            return result
        messages = document.get("messages") if isinstance(document, dict) else None
        if not isinstance(messages, list):
            result.unknown += 1
            return result
        good = [m for m in messages if isinstance(m, dict)]
        result.sessions.append(gemini_session(path, document, good, cwd, note,
                                              len(messages) - len(good)))
        return result
    header: dict[str, Any] = {}
    order: list[str] = []
    by_id: dict[str, dict[str, Any]] = {}
    unknown = 0

    def upsert(message: Any) -> None:
        nonlocal unknown
        if not isinstance(message, dict) or not isinstance(message.get("id"), str):
            unknown += 1
            return
        if message["id"] not in by_id:
            order.append(message["id"])
        by_id[message["id"]] = message  # a record written again replaces the first

    for entry in _read_jsonl(path, result):
        if "$set" in entry:
            update = entry["$set"]
            if isinstance(update, dict) and isinstance(update.get("messages"), list):
                order.clear()
                by_id.clear()
                for message in update["messages"]:
                    upsert(message)
            continue
        if "sessionId" in entry and "type" not in entry:
            header = entry
            continue
        if isinstance(entry.get("type"), str) and "id" in entry:
            upsert(entry)
            continue
        unknown += 1
    if not header and not order:
        result.unknown += unknown
        return result
    if header.get("kind") not in (None, "main"):
        return result  # a sub-agent's chat: its prompts are the model's
    result.sessions.append(gemini_session(path, header, [by_id[i] for i in order], cwd, note,
                                          unknown))
    return result


def gemini_header(path: Path) -> dict[str, Any]:
    """The header of a Gemini chat file (its first line or the whole object)."""
    try:
        if path.suffix == ".json":
            document = json.loads(path.read_text(encoding="utf-8"))
            return document if isinstance(document, dict) else {}
        with path.open("rb") as handle:
            first = handle.readline(MAX_LINE_BYTES)
        document = json.loads(first)
        return document if isinstance(document, dict) else {}
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return {}


# ─── Qwen Code ─────────────────────────────────────────────────────────────

_QWEN_CONTEXT = re.compile(r"<(qwen:[a-z-]+)\b[^>]*>.*?(?:</\1>|\Z)\s*", re.S)


def _qwen_text(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    texts = [_QWEN_CONTEXT.sub("", p["text"]) for p in parts
             if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")]
    return "\n".join(t for t in texts if t.strip())


def read_qwen(path: Path) -> FileResult:
    result = FileResult(str(path))
    collected = _Turns()
    session_id: str | None = None
    cwd: str | None = None
    unknown = 0
    for entry in _read_jsonl(path, result):
        kind = entry.get("type")
        if not isinstance(kind, str):
            unknown += 1
            continue
        session_id = session_id or _str(entry.get("sessionId"))
        if kind not in ("user", "assistant"):
            continue  # tool results, system records (telemetry, snapshots)
        message = entry.get("message")
        if not isinstance(message, dict):
            unknown += 1
            continue
        text = _qwen_text(message.get("parts"))
        if kind == "user":
            cwd = cwd or _str(entry.get("cwd"))
            collected.prompt(text, entry.get("timestamp"))
        else:
            collected.reply(text)
    if session_id is None and not collected.turns:
        result.unknown += unknown
        return result
    result.sessions.append(Session("qwen", session_id or path.stem, str(path), cwd,
                                   turns=collected.turns, unknown=unknown))
    return result


# ─── Chat exports ──────────────────────────────────────────────────────────

def load_export(path: Path) -> tuple[Any, str | None]:
    """The parsed `conversations.json` of an export (the file, its folder, or the zip),
    or None and why it cannot be read."""
    try:
        if path.is_dir():
            path = path / "conversations.json"
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                names = [n for n in archive.namelist()
                         if n.rsplit("/", 1)[-1] == "conversations.json"]
                if not names:
                    return None, "the archive holds no conversations.json"
                info = archive.getinfo(sorted(names, key=len)[0])
                if info.file_size > MAX_EXPORT_BYTES:
                    return None, "conversations.json is larger than 2 GiB"
                raw = _unzip(archive, info)
                if isinstance(raw, str):
                    return None, raw
                return json.loads(raw), None
        if path.stat().st_size > MAX_EXPORT_BYTES:
            return None, "the file is larger than 2 GiB"
        return json.loads(path.read_text(encoding="utf-8")), None
    except RecursionError:
        return None, "cannot read: its JSON is nested deeper than Python can parse"
    except (OSError, ValueError, UnicodeDecodeError, zipfile.BadZipFile) as exc:
        return None, f"cannot read: {exc}"


def _unzip(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes | str:
    """The entry's bytes, or why they cannot be had: an archive raises whatever its
    entry's method does (RuntimeError when encrypted, NotImplementedError for a
    method zipfile lacks, zlib.error or lzma.LZMAError for damaged data)."""
    try:
        return archive.read(info)
    except Exception as exc:  # noqa: BLE001 - any of the above is the file's fault
        return f"cannot read {info.filename} in the archive: {exc}"


def export_kind(document: Any) -> str | None:
    """`chatgpt` or `claude-ai`, from the first conversation's shape."""
    if isinstance(document, dict):  # some tools wrap the list
        document = document.get("conversations")
    if not isinstance(document, list):
        return None
    for item in document:
        if isinstance(item, dict) and "mapping" in item:
            return "chatgpt"
        if isinstance(item, dict) and "chat_messages" in item:
            return "claude-ai"
    return None


def _conversations(document: Any) -> list[Any]:
    if isinstance(document, dict):
        document = document.get("conversations")
    return document if isinstance(document, list) else []


def _chatgpt_branch(mapping: dict[str, Any], current: Any) -> list[dict[str, Any]]:
    """The messages of the branch the export shows, oldest first."""
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    node_id = current if isinstance(current, str) and current in mapping else None
    if node_id is None:  # no pointer: follow first children from the root
        roots = [k for k, v in mapping.items() if isinstance(v, dict) and not v.get("parent")]
        node_id = roots[0] if roots else None
        # A link that is not a node id (a list, a number) ends the branch there.
        while isinstance(node_id, str) and node_id not in seen:
            seen.add(node_id)
            node = mapping.get(node_id)
            if not isinstance(node, dict):
                break
            if isinstance(node.get("message"), dict):
                chain.append(node["message"])
            children = node.get("children") or []
            node_id = children[0] if isinstance(children, list) and children else None
        return chain
    while isinstance(node_id, str) and node_id not in seen:
        seen.add(node_id)
        node = mapping.get(node_id)
        if not isinstance(node, dict):
            break
        if isinstance(node.get("message"), dict):
            chain.append(node["message"])
        node_id = node.get("parent")
    chain.reverse()
    return chain


def _chatgpt_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if not isinstance(content, dict):
        return ""
    if content.get("content_type") not in ("text", "multimodal_text"):
        return ""  # code, tool output, browsing, reasoning …
    parts = content.get("parts")
    if not isinstance(parts, list):
        return ""
    return "\n".join(p for p in parts if isinstance(p, str) and p.strip())


def read_chatgpt(path: Path, document: Any) -> FileResult:
    result = FileResult(str(path))
    for conversation in _conversations(document):
        if not isinstance(conversation, dict) or not isinstance(conversation.get("mapping"),
                                                                dict):
            result.unknown += 1
            continue
        collected = _Turns()
        unknown = 0
        for message in _chatgpt_branch(conversation["mapping"], conversation.get("current_node")):
            author = message.get("author")
            role = author.get("role") if isinstance(author, dict) else None
            metadata = message.get("metadata") if isinstance(message.get("metadata"), dict) \
                else {}
            if metadata.get("is_visually_hidden_from_conversation") \
                    or metadata.get("is_user_system_message"):
                continue
            if role == "user":
                collected.prompt(_chatgpt_text(message),
                                 message.get("create_time") or conversation.get("create_time"))
            elif role == "assistant":
                if message.get("recipient", "all") == "all":
                    collected.reply(_chatgpt_text(message))
            elif role not in ("system", "tool"):
                unknown += 1
        conversation_id = _str(conversation.get("conversation_id")) or \
            _str(conversation.get("id")) or f"conversation-{len(result.sessions)}"
        result.sessions.append(Session("chatgpt", conversation_id, str(path), None,
                                       title=_str(conversation.get("title")),
                                       turns=collected.turns, unknown=unknown))
    return result


def read_claude_ai(path: Path, document: Any) -> FileResult:
    result = FileResult(str(path))
    for conversation in _conversations(document):
        if not isinstance(conversation, dict) or not isinstance(
                conversation.get("chat_messages"), list):
            result.unknown += 1
            continue
        collected = _Turns()
        unknown = 0
        for message in conversation["chat_messages"]:
            if not isinstance(message, dict):
                unknown += 1
                continue
            blocks = message.get("content")
            text = _text_blocks(blocks) if isinstance(blocks, list) and blocks \
                else message.get("text") if isinstance(message.get("text"), str) else ""
            sender = message.get("sender")
            if sender in ("human", "user"):
                collected.prompt(text, message.get("created_at"))
            elif sender == "assistant":
                collected.reply(text)
            else:
                unknown += 1
        conversation_id = _str(conversation.get("uuid")) or \
            f"conversation-{len(result.sessions)}"
        result.sessions.append(Session("claude-ai", conversation_id, str(path), None,
                                       title=_str(conversation.get("name")),
                                       turns=collected.turns, unknown=unknown))
    return result
