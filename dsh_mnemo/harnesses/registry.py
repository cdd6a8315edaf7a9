"""Every fact mnemo knows about a harness, in one place.

What each harness calls its events, where its config files live, the unit
of its hook timeouts, which stdin fields carry the prompt and the reply,
which environment variables name the project, and what it expects back.
The hook runtime (`dsh_mnemo.hook`) reads events and answers with these
facts; the installer (`harnesses.install`) writes config entries from them;
docs/hooks.md explains them per harness.  Pure data plus two formatting
functions, cheap to import on the hook path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

# mnemo's own event names, as `mnemo hook EVENT` takes them.
EVENTS = ("prompt", "turn-end", "session-end")

# Where a harness's reply to the model may be found on a turn-end event, most
# specific first (each harness uses one; the others are harmless fallbacks).
REPLY_FIELDS = ("last_assistant_message", "prompt_response", "assistant", "response")


@dataclass(frozen=True)
class Harness:
    name: str
    # mnemo event -> the harness's own event name.
    event_names: dict[str, str]
    # Events `hooks install` registers (a subset of `event_names`).
    installed_events: tuple[str, ...]
    # Config file relative to $HOME (user level) and to a project root.
    user_config: str | None
    project_config: str | None
    # "nested": {"hooks": {Event: [{"hooks": [entry]}]}} (Claude Code style);
    # "flat": {"version": 1, "hooks": {event: [entry]}} (Cursor);
    # "none": no config file (generic harnesses call the wrapper themselves).
    config_style: str
    timeout_unit: str | None  # "s" | "ms" | None (no timeout is written)
    # The prompt hook can add text to the model's context, and how it answers:
    # "hook-json" = {"hookSpecificOutput": {"hookEventName", "additionalContext"}},
    # "text" = the text itself on stdout, "none" = cannot inject.
    output: str
    # Stdin fields that hold the user's prompt on the prompt event, in order.
    prompt_fields: tuple[str, ...] = ("prompt",)
    # Field that, when present, is the only one holding what the user typed
    # (the prompt event also fires for tool-result continuations).
    submitted_field: str | None = None
    # Stdin fields that hold the user's message on the turn-end event.
    turn_user_fields: tuple[str, ...] = ()
    # Environment variables naming the project directory, in order.
    project_env: tuple[str, ...] = ()
    # Environment variables naming the session, when stdin has none.
    session_env: tuple[str, ...] = ()
    # The transcript is Claude Code's JSONL (a fallback source of the reply).
    transcript_jsonl: bool = False
    # The turn-end hook must print JSON even when it has nothing to say.
    stop_needs_json: bool = False
    # Config entries carry a `name` (shown in the harness's hook list).
    named_entries: bool = False
    next_steps: tuple[str, ...] = ()

    @property
    def can_inject(self) -> bool:
        return self.output != "none"


_CLAUDE_EVENTS = {"prompt": "UserPromptSubmit", "turn-end": "Stop", "session-end": "SessionEnd"}

HARNESS_LIST: tuple[Harness, ...] = (
    Harness(
        "claude-code", _CLAUDE_EVENTS, ("prompt", "turn-end", "session-end"),
        ".claude/settings.json", ".claude/settings.json", "nested", "s", "hook-json",
        project_env=("CLAUDE_PROJECT_DIR",), transcript_jsonl=True,
        next_steps=("Start a new Claude Code session (or run /hooks) so it loads the new "
                    "hooks.",)),
    Harness(
        "codex", _CLAUDE_EVENTS, ("prompt", "turn-end"),
        ".codex/hooks.json", ".codex/hooks.json", "nested", "s", "hook-json",
        stop_needs_json=True,
        next_steps=(
            "Codex asks you to review new or changed hooks: open Codex and run /hooks to "
            "trust mnemo's entries; until then they do not run.",
            "If your Codex version keeps hooks behind a feature flag, add `hooks = true` "
            "under [features] in ~/.codex/config.toml.",
            "Codex has no confirmed session-end event; pending turns are stored by the "
            "next prompt or turn end instead.")),
    Harness(
        "gemini", {"prompt": "BeforeAgent", "turn-end": "AfterAgent",
                   "session-end": "SessionEnd"}, ("prompt", "turn-end", "session-end"),
        ".gemini/settings.json", ".gemini/settings.json", "nested", "ms", "hook-json",
        turn_user_fields=("prompt",),  # AfterAgent repeats the prompt
        project_env=("GEMINI_PROJECT_DIR", "GEMINI_CWD", "CLAUDE_PROJECT_DIR"),
        session_env=("GEMINI_SESSION_ID",), named_entries=True,
        next_steps=("Gemini CLI fingerprints hooks and asks you to trust new or changed ones "
                    "(project hooks only run in a trusted folder): review them with /hooks "
                    "in Gemini CLI.",)),
    Harness(
        "cursor", {"prompt": "beforeSubmitPrompt", "turn-end": "stop",
                   "session-end": "sessionEnd"}, ("prompt", "turn-end", "session-end"),
        ".cursor/hooks.json", ".cursor/hooks.json", "flat", None, "none",
        project_env=("CURSOR_PROJECT_DIR",),
        next_steps=("Restart Cursor so it reloads hooks.json.",
                    "Cursor's beforeSubmitPrompt cannot add context: in Cursor mnemo captures "
                    "turns but cannot show memories to the model.")),
    Harness(
        "qwen", _CLAUDE_EVENTS, ("prompt", "turn-end", "session-end"),
        ".qwen/settings.json", ".qwen/settings.json", "nested", "ms", "hook-json",
        submitted_field="submitted_prompt", project_env=("QWEN_PROJECT_DIR",),
        transcript_jsonl=True,
        next_steps=("Restart Qwen Code (project hooks need a trusted folder); check with "
                    "/hooks.",)),
    Harness(
        "generic", {"prompt": "prompt", "turn-end": "turn-end", "session-end": "session-end"},
        ("prompt", "turn-end", "session-end"), None, None, "none", None, "text",
        prompt_fields=("prompt", "user"),
        next_steps=("Call the commands above from your harness: JSON event on stdin "
                    '({"cwd", "session_id", "prompt"} / {"cwd", "session_id", "user", '
                    '"assistant"}); the prompt command prints the text to add to the '
                    "model's context, or nothing.",)),
)

HARNESSES: dict[str, Harness] = {h.name: h for h in HARNESS_LIST}
NAMES: tuple[str, ...] = tuple(HARNESSES)


def get(name: str) -> Harness | None:
    return HARNESSES.get(name)


def format_output(harness: str, kind: str, context: str | None) -> str:
    """The exact stdout for `harness`; `context` is the text for the model, if any."""
    spec = HARNESSES[harness]
    if kind == "prompt" and context:
        if spec.output == "text":
            return context if context.endswith("\n") else context + "\n"
        if spec.output == "hook-json":
            document = {"hookSpecificOutput": {
                "hookEventName": spec.event_names["prompt"], "additionalContext": context}}
            return json.dumps(document, ensure_ascii=False) + "\n"
        return ""
    return neutral_output(harness, kind)


def neutral_output(harness: str, kind: str) -> str:
    """What to print when there is nothing to say (also on any failure).

    Codex's Stop hook must answer JSON when it exits 0; everyone else gets silence.
    """
    spec = HARNESSES.get(harness)
    if spec is not None and spec.stop_needs_json and kind == "turn-end":
        return "{}\n"
    return ""
