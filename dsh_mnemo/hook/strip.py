"""Remove injected context from text before it is captured.

Harnesses write what a hook injected into their transcripts, and some echo
it into the next event; models sometimes quote it back.  Stored, it would be
recalled and re-injected, growing every turn.  So mnemo's own `<memory-data>`
blocks, its hint lines, and the reminders harnesses wrap their own injections
in are cut out of anything captured.
"""

from __future__ import annotations

import re

from .inject import HINT_PREFIX, PREFACE

# Tags that harnesses (Claude Code, Codex, Gemini, Qwen, DSH) use for text they
# add to a turn themselves.  Their content is never the user's own words.
HARNESS_TAGS = (
    "memory-data", "system-reminder", "system_reminder", "user-prompt-submit-hook",
    "hook-output", "hook_output", "additional-context", "additional_context",
    "local-command-stdout", "local-command-stderr", "local-command-caveat",
    "command-name", "command-message", "command-args", "environment_context",
    "environment-context", "user_instructions", "session-context", "context-injection",
)

_TAGS = "|".join(re.escape(t) for t in HARNESS_TAGS)
# A closed block, then an unclosed one (runs to the end: a truncated echo).
_BLOCK = re.compile(rf"<\s*({_TAGS})\b[^>]*>.*?<\s*/\s*\1\s*>", re.S | re.I)
_OPEN_TO_END = re.compile(rf"<\s*({_TAGS})\b[^>]*>.*\Z", re.S | re.I)
_STRAY_CLOSE = re.compile(rf"<\s*/\s*({_TAGS})\s*>", re.I)
_OWN_LINES = re.compile(
    rf"^[ \t]*(?:{re.escape(HINT_PREFIX)}|{re.escape(PREFACE)}).*$\n?", re.M)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BLANK_RUNS = re.compile(r"\n{3,}")


def strip_injected(text: str) -> str:
    """`text` without injected blocks, hint lines, or control characters."""
    text = _CONTROL.sub("", text.replace("\r\n", "\n"))
    previous = None
    while previous != text:  # nested or repeated blocks
        previous = text
        text = _BLOCK.sub("", text)
    text = _OPEN_TO_END.sub("", text)
    text = _STRAY_CLOSE.sub("", text)
    text = _OWN_LINES.sub("", text)
    return _BLANK_RUNS.sub("\n\n", text).strip()
