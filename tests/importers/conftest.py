"""Real harness transcripts placed where each harness keeps them.

The samples in tests/real_harness/samples/transcripts/ were written by the
pinned harness CLIs (recorded with their paths replaced by /home/dev/repo).
`place` copies one under the test HOME exactly where that harness writes it,
with the recorded directory pointed at a test repository and, optionally,
its prompt, reply, session id and dates changed, so several sessions can be
laid out side by side.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tests.conftest import REPO_ROOT

SAMPLES = REPO_ROOT / "tests" / "real_harness" / "samples" / "transcripts"
SAMPLE_FILE = {"claude-code": "claude-code/session.jsonl", "codex": "codex/rollout.jsonl",
               "gemini": "gemini/session.jsonl", "qwen": "qwen/chat.jsonl"}
SAMPLE_SESSION = {"claude-code": "2b543745-366d-4594-96ea-eab1cc48e85d",
                  "codex": "01a23104-0f6b-7b91-a84c-f524141c5a4b",
                  "gemini": "2d10b3e9-4509-4e4f-870a-7ac0774ea139",
                  "qwen": "d2998671-38fc-45ef-9bbb-8ce322b0c4e4"}
SAMPLE_PROMPT = "What does the README say?"
SAMPLE_REPLY = "The README says hello."
SAMPLE_DIR = "/home/dev/repo"


def mangle(path: Path) -> str:
    """Claude Code's and Qwen Code's project folder name for a directory."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(path))


@dataclass
class Placed:
    source: str
    path: Path
    session_id: str
    prompt: str
    reply: str


def place(source: str, home: Path, directory: Path, *, prompt: str | None = None,
          reply: str | None = None, session_id: str | None = None, days_ago: int = 0,
          extra_lines: list[str] | None = None) -> Placed:
    text = (SAMPLES / SAMPLE_FILE[source]).read_text(encoding="utf-8")
    prompt = prompt or SAMPLE_PROMPT
    reply = reply or SAMPLE_REPLY
    sid = session_id or SAMPLE_SESSION[source]
    for old, new in ((SAMPLE_PROMPT, prompt), (SAMPLE_REPLY, reply),
                     (SAMPLE_SESSION[source], sid), (SAMPLE_DIR, str(directory))):
        text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
    if days_ago:
        # Counted from today, not from the sample's own date: the tests compare ages
        # with now (the trim and sleep cut-offs do too).
        day = datetime.now(timezone.utc) - timedelta(days=days_ago)
        # Only the ISO dates of records; the sample's epoch numbers are left alone.
        text = text.replace("2026-12-01T", day.strftime("%Y-%m-%dT"))
    if extra_lines:
        text += "".join(line + "\n" for line in extra_lines)
    if source == "claude-code":
        target = home / ".claude" / "projects" / mangle(directory) / f"{sid}.jsonl"
    elif source == "codex":
        target = (home / ".codex" / "sessions" / "2026" / "12" / "01"
                  / f"rollout-2026-12-01T09-51-19-{sid}.jsonl")
    elif source == "qwen":
        target = home / ".qwen" / "projects" / mangle(directory) / "chats" / f"{sid}.jsonl"
    else:
        folder = home / ".gemini" / "tmp" / directory.name
        target = folder / "chats" / f"session-2026-12-01T09-51-{sid[:8]}.jsonl"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ".project_root").write_text(str(directory), encoding="utf-8")
        digest = hashlib.sha256(str(directory).encode()).hexdigest()
        text = re.sub(r'"projectHash": "[0-9a-f]{64}"', f'"projectHash": "{digest}"', text)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return Placed(source, target, sid, prompt, reply)
