"""How to run each real harness CLI offline against the fake model server.

One `HarnessSetup` per harness knows where its config lives under a given
HOME, what to write there so the CLI talks only to the fake server (and never
phones home), the non-interactive command, and the environment.  Facts behind
every line are in docs/harnesses-real.md.

The helpers never touch the real user's directories: every path is under the
`home` they are given.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

NAMES = ("claude-code", "codex", "gemini", "qwen")

# Environment passed through from the test process; everything else is set here.
PASS_THROUGH = ("PATH", "LANG", "LC_ALL", "TERM", "USER", "LOGNAME", "SHELL",
                "MNEMO_DATA_DIR", "MNEMO_CONFIG", "MNEMOSYNE_DATA_DIR",
                "MNEMOSYNE_NO_EMBEDDINGS", "MNEMOSYNE_LLM_ENABLED", "HERMES_HOME")

# Codex names hook events in trust keys and hashes in snake case.
CODEX_EVENT_LABELS = {
    "PreToolUse": "pre_tool_use", "PermissionRequest": "permission_request",
    "PostToolUse": "post_tool_use", "PreCompact": "pre_compact", "PostCompact": "post_compact",
    "SessionStart": "session_start", "UserPromptSubmit": "user_prompt_submit",
    "SubagentStart": "subagent_start", "SubagentStop": "subagent_stop", "Stop": "stop",
    "SessionEnd": "session_end",
}
CODEX_SESSION_END_MAX_TIMEOUT = 3  # Codex clamps SessionEnd timeouts to this (seconds)


def base_env(home: Path, harness_bin: Path) -> dict[str, str]:
    """The harness's environment: HOME, XDG dirs and TMPDIR (Claude Code keeps
    sockets and notes there) all beside `home`, the harness CLIs first on PATH."""
    env = {k: v for k, v in os.environ.items() if k in PASS_THROUGH}
    tmp = home.parent / "tmp"
    tmp.mkdir(exist_ok=True)
    env["TMPDIR"] = str(tmp)
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               XDG_CACHE_HOME=str(home / ".cache"), XDG_DATA_HOME=str(home / ".local/share"),
               XDG_STATE_HOME=str(home / ".local/state"), NO_COLOR="1", CI="1",
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    env["PATH"] = f"{harness_bin}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    return env


def _write_json(path: Path, document: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


# The variable that moves each harness's user config directory, and what it names:
# the config directory itself, or (Gemini) a home that holds `.gemini`.
CONFIG_DIR_VARIABLES = {"claude-code": "CLAUDE_CONFIG_DIR", "codex": "CODEX_HOME",
                        "gemini": "GEMINI_CLI_HOME", "qwen": "QWEN_HOME"}


@dataclass(frozen=True)
class HarnessSetup:
    name: str
    relocated: Path | None = None  # set CONFIG_DIR_VARIABLES[name] to this

    def moved_to(self, path: Path) -> HarnessSetup:
        return HarnessSetup(self.name, path)

    # ── where things are ───────────────────────────────────────────────────
    def config_dir(self, home: Path) -> Path:
        if self.relocated is not None:
            return self.relocated / ".gemini" if self.name == "gemini" else self.relocated
        return home / {"claude-code": ".claude", "codex": ".codex", "gemini": ".gemini",
                       "qwen": ".qwen"}[self.name]

    def hooks_file(self, home: Path) -> Path:
        """The file `mnemo hooks install --harness NAME` writes (user level)."""
        return self.config_dir(home) / ("hooks.json" if self.name == "codex" else "settings.json")

    # ── before `mnemo hooks install`: what a user's config already holds ───
    def prepare(self, home: Path, model_url: str) -> None:
        """Point the harness at the fake server and turn off telemetry and updates."""
        config = self.config_dir(home)
        config.mkdir(parents=True, exist_ok=True)
        if self.name == "codex":
            (config / "config.toml").write_text(
                'model = "gpt-5.5"\n'
                'model_provider = "fake"\n'
                "check_for_update_on_startup = false\n"
                "[model_providers.fake]\n"
                'name = "Fake"\n'
                f'base_url = "{model_url}/v1"\n'
                'wire_api = "responses"\n'
                'env_key = "FAKE_OPENAI_API_KEY"\n'
                "request_max_retries = 0\n"
                "stream_max_retries = 0\n"
                "[analytics]\nenabled = false\n"
                "[feedback]\nenabled = false\n"
                # The plugin marketplace looks up github.com and chatgpt.com at start-up.
                "[features]\nplugins = false\n", encoding="utf-8")
        elif self.name == "gemini":
            _write_json(config / "settings.json", {
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "telemetry": {"enabled": False},
                "privacy": {"usageStatisticsEnabled": False},
                "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            })
        elif self.name == "qwen":
            _write_json(config / "settings.json", {
                "security": {"auth": {"selectedType": "openai"}},
                "model": {"name": "fake-model"},
                "privacy": {"usageStatisticsEnabled": False},
                "telemetry": {"enabled": False},
                "general": {"enableAutoUpdate": False},
                # Qwen's own memory extraction would send every turn (mnemo's block
                # included) to the model a second time.
                "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False},
            })

    # ── after `mnemo hooks install`: the steps a user does in the harness ──
    def install_args(self) -> list[str]:
        """`mnemo hooks install` arguments beyond --harness: Codex's explicit trust opt-in."""
        return ["--trust"] if self.name == "codex" else []

    def trust(self, home: Path, folders: Iterable[Path]) -> None:
        if self.name == "gemini":
            # Not a mnemo step: Gemini CLI refuses `-p` in a folder the user has not
            # trusted (exit 55). A user trusts it in Gemini's dialog; this is that file.
            _write_json(self.config_dir(home) / "trustedFolders.json",
                        {str(folder): "TRUST_FOLDER" for folder in folders})

    # ── running it ─────────────────────────────────────────────────────────
    def env(self, home: Path, harness_bin: Path, model_url: str) -> dict[str, str]:
        env = base_env(home, harness_bin)
        if self.name == "claude-code":
            env.update(ANTHROPIC_BASE_URL=model_url, ANTHROPIC_API_KEY="sk-ant-fake-key",
                       CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
                       DISABLE_TELEMETRY="1", DISABLE_ERROR_REPORTING="1")
        elif self.name == "codex":
            env.update(CODEX_HOME=str(self.config_dir(home)), FAKE_OPENAI_API_KEY="sk-fake")
        elif self.name == "gemini":
            env.update(GEMINI_API_KEY="fake-gemini-key", GOOGLE_GEMINI_BASE_URL=model_url,
                       GEMINI_CLI_NO_RELAUNCH="true")
        elif self.name == "qwen":
            env.update(OPENAI_API_KEY="sk-fake", OPENAI_BASE_URL=f"{model_url}/v1",
                       OPENAI_MODEL="fake-model", QWEN_CODE_NO_RELAUNCH="true")
        if self.relocated is not None:
            env[CONFIG_DIR_VARIABLES[self.name]] = str(self.relocated)
        return env

    def command(self, harness_bin: Path, prompt: str) -> list[str]:
        exe = {"claude-code": "claude", "codex": "codex", "gemini": "gemini",
               "qwen": "qwen"}[self.name]
        if self.name == "codex":
            return [str(harness_bin / exe), "exec", prompt]
        return [str(harness_bin / exe), "-p", prompt]


SETUPS = {name: HarnessSetup(name) for name in NAMES}


# ─── Codex hook trust ──────────────────────────────────────────────────────

def codex_trusted_hash(event: str, handler: dict[str, object],
                       matcher: str | None = None) -> str:
    """The `trusted_hash` Codex 0.171 expects for one command hook.

    sha256 over the compact, key-sorted JSON of the normalized identity
    `{"event_name": <snake case>, "matcher"?: …, "hooks": [{"type": "command",
    "command", "timeout", "async", "statusMessage"?}]}`, where `timeout` is the
    effective value (default 600, at least 1, SessionEnd clamped to 3).
    """
    timeout = handler.get("timeout", handler.get("timeoutSec", 600))
    seconds = max(1, int(timeout)) if isinstance(timeout, (int, float)) else 600
    if event == "SessionEnd":
        seconds = min(seconds, CODEX_SESSION_END_MAX_TIMEOUT)
    normalized: dict[str, object] = {"type": "command", "command": handler["command"],
                                     "timeout": seconds, "async": bool(handler.get("async"))}
    if handler.get("statusMessage") is not None:
        normalized["statusMessage"] = handler["statusMessage"]
    identity: dict[str, object] = {"event_name": CODEX_EVENT_LABELS[event],
                                   "hooks": [normalized]}
    if matcher is not None:
        identity["matcher"] = matcher
    data = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()


def codex_trust_toml(hooks_json: Path, skip: Iterable[str] = ()) -> str:
    """`[hooks.state."<file>:<event>:<group>:<handler>"]` tables trusting every entry
    (but the keys in `skip`, which the config already has): what Codex's /hooks writes."""
    document = json.loads(hooks_json.read_text(encoding="utf-8"))
    skipped = set(skip)
    tables = []
    for event, groups in document.get("hooks", {}).items():
        for group_index, group in enumerate(groups):
            for handler_index, handler in enumerate(group.get("hooks", [])):
                if handler.get("type", "command") != "command":
                    continue
                label = CODEX_EVENT_LABELS[event]
                key = f"{hooks_json}:{label}:{group_index}:{handler_index}"
                if key in skipped:
                    continue
                digest = codex_trusted_hash(event, handler, group.get("matcher"))
                tables.append(f"[hooks.state.{json.dumps(key)}]\n"
                              f"trusted_hash = {json.dumps(digest)}\n")
    return "\n".join(tables)
