"""Remove injected context from text before it is captured.

Harnesses write what a hook injected into their transcripts, and some echo
it into the next event; models sometimes quote it back.  Stored, it would be
recalled and re-injected, growing every turn.  So mnemo's own `<memory-data>`
blocks, its hint lines, and the reminders harnesses wrap their own injections
in are cut out of anything captured.

What goes:

- a closed block of a harness tag (`<system-reminder>…</system-reminder>`),
  whole, nested or repeated blocks included (the outermost pair wins);
- an unclosed harness tag: only the tag itself, since the text after it is
  most likely the user's own (a prompt that mentions `<system-reminder>`);
  for an unclosed `<memory-data …>` (a truncated echo of mnemo's own block)
  also mnemo's preface line and the rendered memory lines that directly
  follow it (`- (2026-11-02, workspace) …`), up to the first line that is
  not one;
- a closing tag without its opening tag;
- mnemo's hint lines (`[mnemo] …`) and preface lines anywhere;
- invisible characters, controls and lone surrogates (`clean_invisible`).

Linear time, with no regular expression spanning the text: one bounded
pattern finds the tag tokens (`<`, optional `/`, a harness tag name,
attributes up to 512 characters, `>`), then a stack pairs each closing tag
with the innermost open tag of its name (a count per name makes "is it
open?" constant time, so a flood of stray closing tags stays linear), and
the spans to remove are cut out in one pass.
"""

from __future__ import annotations

import re

from ..lazy_re import lazy
from ..memory.scrub import clean_invisible, fix_surrogates
from .inject import HINT_PREFIX, PREFACE, STANDING_PREFACE

__all__ = ["HARNESS_TAGS", "clean_invisible", "fix_surrogates", "strip_injected"]

# Tags that harnesses (Claude Code, Codex, Gemini, Qwen, DSH) use for text they
# add to a turn themselves.  Their content is never the user's own words.
HARNESS_TAGS = (
    "memory-data", "system-reminder", "system_reminder", "user-prompt-submit-hook",
    "hook-output", "hook_output", "additional-context", "additional_context",
    "local-command-stdout", "local-command-stderr", "local-command-caveat",
    "command-name", "command-message", "command-args", "environment_context",
    "environment-context", "user_instructions", "session-context", "context-injection",
    # Gemini CLI wraps hook context (SessionStart's lands inside the prompt it
    # then hands BeforeAgent); Qwen Code wraps it in its own tags.
    "hook_context", "session_context", "qwen:user-prompt-submit-context",
    "qwen:session-start-context",
)
OWN_TAG = "memory-data"
MAX_ATTRIBUTES = 512  # a tag with more attribute text than this is not a tag

_TAGS = "|".join(re.escape(t) for t in sorted(HARNESS_TAGS, key=len, reverse=True))
_TAG = lazy(
    rf"<[ \t\n]{{0,16}}(?P<close>/[ \t\n]{{0,16}})?(?P<name>{_TAGS})(?![\w-])"
    rf"(?P<attrs>[^<>]{{0,{MAX_ATTRIBUTES}}})>", re.I)
# The lines of mnemo's block after its opening tag: the preface, then memory
# lines "- (DATE, LEVEL) text", "- (LEVEL) text" or "- (DATE) text".
_ECHO_LINES = lazy(
    r"(?:[ \t]{0,16}(?:" + re.escape(PREFACE) + "|" + re.escape(STANDING_PREFACE)
    + r"|- \([^()\n]{1,80}\)(?: [^\n]*)?)"
    r"[ \t]*(?:\n|\Z))*")
# Compiled on first use, and used only on a text that holds what they look for:
# a plain prompt compiles none of them.
_REST_OF_LINE_BLANK = lazy(r"[ \t]*(?:\n|\Z)")
_OWN_LINE_STARTS = (HINT_PREFIX, PREFACE, STANDING_PREFACE)
_OWN_LINES = lazy(
    rf"^[ \t]{{0,64}}(?:{re.escape(HINT_PREFIX)}|{re.escape(PREFACE)}|"
    rf"{re.escape(STANDING_PREFACE)})[^\n]*(?:\n|\Z)", re.M)
_BLANK_RUNS = lazy(r"\n{3,}")


def _echo_end(text: str, pos: int) -> int:
    """Where a truncated echo of mnemo's block, starting after its open tag, ends."""
    blank = _REST_OF_LINE_BLANK.match(text, pos)
    if blank is None:
        return pos  # text on the tag's own line is not part of the block
    lines = _ECHO_LINES.match(text, blank.end())
    end = lines.end() if lines else blank.end()
    return end if end > blank.end() else pos


def _tag_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) spans of injected blocks and stray tags, unsorted."""
    spans: list[tuple[int, int]] = []
    stack: list[tuple[str, int, int]] = []  # open tags: (name, start, end)
    open_count: dict[str, int] = {}
    for token in _TAG.finditer(text):
        name = token.group("name").lower()
        if token.group("close"):
            if open_count.get(name):
                while True:  # pop to the innermost open tag of this name
                    opened, start, _ = stack.pop()
                    open_count[opened] -= 1
                    if opened == name:
                        break
                spans.append((start, token.end()))
            else:
                spans.append((token.start(), token.end()))  # a stray closing tag
        elif token.group("attrs").rstrip().endswith("/"):
            spans.append((token.start(), token.end()))  # <tag/>: nothing inside
        else:
            stack.append((name, token.start(), token.end()))
            open_count[name] = open_count.get(name, 0) + 1
    for name, start, end in stack:  # never closed: the tag only
        spans.append((start, _echo_end(text, end) if name == OWN_TAG else end))
    return spans


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    spans.sort()
    out: list[str] = []
    pos = 0
    for start, end in spans:
        if end <= pos:
            continue  # inside a span already cut
        out.append(text[pos:max(pos, start)])
        pos = end
    out.append(text[pos:])
    return "".join(out)


def strip_injected(text: str) -> str:
    """`text` without injected blocks, hint lines, invisible or control characters.

    Also repairs lone surrogates (U+FFFD), so the result can always be
    encoded as UTF-8.  Linear time.
    """
    text = clean_invisible(text)
    if "<" in text:
        text = _cut(text, _tag_spans(text))
    if any(start in text for start in _OWN_LINE_STARTS):
        text = _OWN_LINES.sub("", text)
    if "\n\n\n" in text:
        text = _BLANK_RUNS.sub("\n\n", text)
    return text.strip()
