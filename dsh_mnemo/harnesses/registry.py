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

from ..record import field, record

# mnemo's own event names, as `mnemo hook EVENT` takes them.
EVENTS = ("session-start", "prompt", "turn-end", "session-end")
# Events whose answer can add text to the model's context.
CONTEXT_EVENTS = ("session-start", "prompt")

# Where a harness's reply to the model may be found on a turn-end event, most
# specific first (each harness uses one; the others are harmless fallbacks).
REPLY_FIELDS = ("last_assistant_message", "prompt_response", "assistant", "response")


@record(frozen=True)
class Harness:
    name: str
    # mnemo event -> the harness's own event name.
    event_names: dict[str, str]
    # Events `hooks install` registers (a subset of `event_names`).
    installed_events: tuple[str, ...]
    # The config directory, relative to $HOME (user level) or a project root, and
    # the file in it that holds the hooks (None: no config file).
    config_dir: str | None
    config_file: str | None
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
    # The variable that moves the user-level config directory, and whether it
    # names that directory itself or (Gemini) a home holding `config_dir`.
    config_dir_env: str | None = None
    config_dir_env_is_home: bool = False
    # The harness reads its settings file as JSON with `//` and `/* */` comments.
    config_comments: bool = False
    # Per-event timeouts (in seconds) where the harness caps the usual one.
    event_timeouts: dict[str, int] = field(default_factory=dict)
    # Hooks are trusted per entry, by position in the file (Codex): entries are
    # never moved, and removing one leaves an empty group while later ones exist.
    positional_trust: bool = False
    # How the prompt hook's context reaches the model: "system" (Claude Code: a
    # system message `UserPromptSubmit hook additional context: …`), "developer"
    # (Codex: a developer message, as is), "hook_context" (Gemini:
    # `<hook_context>…</hook_context>`, `<` `>` escaped), "qwen" (Qwen:
    # `<qwen:user-prompt-submit-context>…`, escaped), "stdout" (generic), None.
    context_shape: str | None = None
    next_steps: tuple[str, ...] = ()

    @property
    def can_inject(self) -> bool:
        return self.output != "none"

    @property
    def escapes_context(self) -> bool:
        """The harness HTML-escapes `<` and `>` (not `&`) in the context it passes on."""
        return self.context_shape in ("hook_context", "qwen")


_CLAUDE_EVENTS = {"session-start": "SessionStart", "prompt": "UserPromptSubmit",
                  "turn-end": "Stop", "session-end": "SessionEnd"}
_ALL = ("session-start", "prompt", "turn-end", "session-end")

HARNESS_LIST: tuple[Harness, ...] = (
    Harness(
        "claude-code", _CLAUDE_EVENTS, _ALL, ".claude", "settings.json", "nested", "s",
        "hook-json", project_env=("CLAUDE_PROJECT_DIR",), transcript_jsonl=True,
        config_dir_env="CLAUDE_CONFIG_DIR", context_shape="system",
        next_steps=("Start a new Claude Code session (or run /hooks) so it loads the new "
                    "hooks.",)),
    Harness(
        "codex", _CLAUDE_EVENTS, _ALL, ".codex", "hooks.json", "nested", "s", "hook-json",
        stop_needs_json=True, config_dir_env="CODEX_HOME", positional_trust=True,
        # Codex clamps a SessionEnd timeout to 3 s, and warns about it at every start.
        event_timeouts={"session-end": 3}, context_shape="developer",
        next_steps=(
            "Codex runs a new or changed hook only once you have trusted it, and `codex "
            "exec` skips an untrusted one without a word: open Codex and trust mnemo's "
            "entries in /hooks, or run `mnemo hooks install --harness codex --trust` to "
            "record that trust for mnemo's own entries in Codex's config.toml.",)),
    Harness(
        "gemini", {"session-start": "SessionStart", "prompt": "BeforeAgent",
                   "turn-end": "AfterAgent", "session-end": "SessionEnd"}, _ALL,
        ".gemini", "settings.json", "nested", "ms", "hook-json",
        turn_user_fields=("prompt",),  # AfterAgent repeats the prompt
        project_env=("GEMINI_PROJECT_DIR", "GEMINI_CWD", "CLAUDE_PROJECT_DIR"),
        session_env=("GEMINI_SESSION_ID",), named_entries=True,
        config_dir_env="GEMINI_CLI_HOME", config_dir_env_is_home=True, config_comments=True,
        context_shape="hook_context",
        next_steps=(
            "Gemini CLI runs no hooks at all (yours included) in a folder you have not "
            "trusted, and `gemini -p` refuses to start there (exit 55): trust each project "
            "folder in Gemini's trust dialog (or in trustedFolders.json). User-level hooks "
            "need nothing else; project-level ones are announced once, then trusted.",)),
    Harness(
        # Cursor's sessionStart can answer `additional_context` (unconfirmed): mnemo
        # does not install it, and Cursor's prompt hook cannot inject either.
        "cursor", {"session-start": "sessionStart", "prompt": "beforeSubmitPrompt",
                   "turn-end": "stop", "session-end": "sessionEnd"},
        ("prompt", "turn-end", "session-end"),
        ".cursor", "hooks.json", "flat", None, "none",
        project_env=("CURSOR_PROJECT_DIR",),
        next_steps=("Restart Cursor so it reloads hooks.json.",
                    "Cursor's beforeSubmitPrompt cannot add context: in Cursor mnemo captures "
                    "turns but cannot show memories to the model.")),
    Harness(
        "qwen", _CLAUDE_EVENTS, _ALL, ".qwen", "settings.json", "nested", "s", "hook-json",
        submitted_field="submitted_prompt", project_env=("QWEN_PROJECT_DIR",),
        transcript_jsonl=True, config_dir_env="QWEN_HOME", config_comments=True,
        context_shape="qwen",
        next_steps=("Restart Qwen Code so it loads the new hooks; check with /hooks.",)),
    Harness(
        "generic", {"session-start": "session-start", "prompt": "prompt",
                    "turn-end": "turn-end", "session-end": "session-end"},
        _ALL, None, None, "none", None, "text",
        prompt_fields=("prompt", "user"), context_shape="stdout",
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
    if kind in CONTEXT_EVENTS and context:
        context = escape_context(harness, context)
        if spec.output == "text":
            return context if context.endswith("\n") else context + "\n"
        if spec.output == "hook-json":
            document = {"hookSpecificOutput": {
                "hookEventName": spec.event_names[kind], "additionalContext": context}}
            return json.dumps(document, ensure_ascii=False) + "\n"
        return ""
    return neutral_output(harness, kind)


def escape_context(harness: str, context: str) -> str:
    """The context as the hook must hand it to `harness`.

    Gemini CLI and Qwen Code HTML-escape `<` and `>` in additional context but
    leave `&` alone, so memory text holding `&lt;/memory-data&gt;` would read,
    after their escaping, exactly like the closing fence.  Escaping `&` first
    completes the encoding: the model gets consistently HTML-escaped text in
    which only mnemo's own fence decodes to `<memory-data …>`.
    """
    if HARNESSES[harness].escapes_context:
        return context.replace("&", "&amp;")
    return context


def model_view(harness: str, additional_context: str, kind: str = "prompt") -> str | None:
    """What the model reads for the `kind` hook's (`prompt` or `session-start`)
    `additional_context`, as each harness wraps it (docs/harnesses-real.md); None
    where nothing reaches it."""
    shape = HARNESSES[harness].context_shape
    escaped = additional_context.replace("<", "&lt;").replace(">", "&gt;")
    start = kind == "session-start"
    if shape == "system":
        event = "SessionStart" if start else "UserPromptSubmit"
        return f"{event} hook additional context: {additional_context}"
    if shape in ("developer", "stdout"):
        return additional_context
    if shape == "hook_context":  # a session start's goes before the user's prompt
        return f"<hook_context>{escaped}</hook_context>"
    if shape == "qwen":
        if start:
            return ('<qwen:session-start-context hidden="true">\nSessionStart additional '
                    f"context:\n{escaped}\n</qwen:session-start-context>")
        return (f"<qwen:user-prompt-submit-context>\n{escaped}\n"
                "</qwen:user-prompt-submit-context>")
    return None


def neutral_output(harness: str, kind: str) -> str:
    """What to print when there is nothing to say (also on any failure).

    Codex's Stop hook must answer JSON when it exits 0; everyone else gets silence.
    """
    spec = HARNESSES.get(harness)
    if spec is not None and spec.stop_needs_json and kind == "turn-end":
        return "{}\n"
    return ""
