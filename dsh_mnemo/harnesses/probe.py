"""`mnemo hooks test`: run the installed hooks of a session's start and first prompt
as the harness would.

It takes mnemo's commands from the harness's config (the file the harness
reads, config-directory variables included), sends each a sample event for
the current directory on stdin through `/bin/sh -c` (as the harnesses do):
first the session start, where the config has mnemo's entry for it (the
standing block arrives there), then the prompt, in the same session.  It
reports what came back, what the model would read (each harness's wrapping
and escaping, `registry.model_view`), and whether the harness would run the
prompt hook at all: Codex's per-hook trust, Gemini's folder trust, a moved
config directory.  The sample session id starts with
`injections.TEST_SESSION_PREFIX`; the caller removes the pending turn the
hook spooled for it, so a test never becomes a memory.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from .. import paths
from ..errors import RefusedError
from ..record import field, record
from . import install as installer
from .injections import TEST_SESSION_PREFIX
from .registry import HARNESSES, model_view

DEFAULT_PROMPT = "What should I keep in mind when working on this project?"


@record
class SessionStartRun:
    """The session-start hook, run before the prompt in the same sample session."""
    command: str
    event: dict[str, Any]
    exit_code: int | None
    timed_out: bool
    duration_ms: int
    additional_context: str | None
    model_view: str | None


@record
class HookTest:
    harness: str
    config_path: str | None
    config_dir_env: str | None
    command: str
    cwd: str
    session_id: str
    event: dict[str, Any]
    exit_code: int | None
    timed_out: bool
    duration_ms: int
    stdout: str
    stderr: str
    additional_context: str | None  # what the hook handed the harness for the model
    model_view: str | None  # what the model reads, as the harness wraps it
    would_run: bool
    blockers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    trust: list[dict[str, Any]] = field(default_factory=list)
    folder_trust: dict[str, Any] | None = None
    hook_log: list[str] = field(default_factory=list)  # lines the hook logged meanwhile
    data_dir: str = ""
    session_start: SessionStartRun | None = None


def sample_event(harness: str, cwd: Path, session_id: str, prompt: str) -> dict[str, Any]:
    """A prompt event shaped like the harness's own (tests/hook/payloads)."""
    spec = HARNESSES[harness]
    if harness == "cursor":
        return {"conversation_id": session_id, "generation_id": session_id,
                "hook_event_name": spec.event_names["prompt"], "prompt": prompt,
                "workspace_roots": [str(cwd)], "attachments": []}
    if harness == "generic":
        return {"cwd": str(cwd), "session_id": session_id, "prompt": prompt}
    event: dict[str, Any] = {"session_id": session_id, "transcript_path": None,
                             "cwd": str(cwd), "hook_event_name": spec.event_names["prompt"],
                             "prompt": prompt}
    if spec.submitted_field:
        event[spec.submitted_field] = prompt
    return event


def session_start_event(harness: str, cwd: Path, session_id: str) -> dict[str, Any]:
    """A new session's start event, shaped like the harness's own (tests/hook/payloads)."""
    return {"session_id": session_id, "transcript_path": None, "cwd": str(cwd),
            "hook_event_name": HARNESSES[harness].event_names["session-start"],
            "source": "startup"}


def _command(harness: str, project: Path | None, base: Path, kind: str) -> str | None:
    """mnemo's command for the event `kind` in the harness's config.  `generic` has
    no config: its prompt command is the wrapper's, and whether its caller runs a
    session start is not known, so none."""
    spec = HARNESSES[harness]
    path = installer.config_path(harness, project)
    if path is None:
        if kind != "prompt":
            return None
        wrapper = installer.wrapper_path(base)
        return installer.command_for(wrapper, harness, "prompt") if wrapper.exists() else None
    document = installer._read_config(path, spec) or {}
    for located in installer.find_ours(document):
        if located.event == spec.event_names[kind]:
            return str(located.entry["command"])
    return None


def _run(command: str, event: dict[str, Any], cwd: Path, env: dict[str, str],
         limit: float) -> tuple[int | None, bool, str, str, int]:
    """Exit code (None: timed out), timed out, stdout, stderr, milliseconds."""
    import json

    started = time.monotonic()
    try:
        done = subprocess.run(["/bin/sh", "-c", command], input=json.dumps(event),
                              capture_output=True, text=True, cwd=cwd, env=env,
                              timeout=limit)
        exit_code: int | None = done.returncode
        timed_out, stdout, stderr = False, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        timed_out, exit_code = True, None
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
    return exit_code, timed_out, stdout, stderr, int((time.monotonic() - started) * 1000)


def wrapper_data_dir(command: str) -> Path | None:
    """The data dir the wrapper run by `command` uses when MNEMO_DATA_DIR is unset."""
    wrapper, _ = installer._command_target(command)
    try:
        text = wrapper.read_text(encoding="utf-8") if wrapper else ""
    except OSError:
        return None
    match = re.search(r"^installed_data_dir='(.*)'$", text, re.M)
    value = match.group(1).replace("'\"'\"'", "'") if match else ""
    return Path(value) if value and not value.startswith("@") else None


def _log_size(log: Path) -> int:
    try:
        return log.stat().st_size
    except OSError:
        return 0


def _additional_context(harness: str, stdout: str) -> str | None:
    spec = HARNESSES[harness]
    if not stdout.strip():
        return None
    if spec.output == "text":
        return stdout.rstrip("\n")
    if spec.output == "hook-json":
        import json

        try:
            document = json.loads(stdout)
            return str(document["hookSpecificOutput"]["additionalContext"])
        except (ValueError, KeyError, TypeError):
            return None
    return None


def run(harness: str, project: Path | None = None, *, cwd: Path | None = None,
        prompt: str | None = None, base: Path | None = None,
        timeout: float | None = None) -> HookTest:
    spec = installer.spec_for(harness)
    base = base or paths.data_dir()
    cwd = (cwd or Path.cwd()).resolve()
    status = installer.harness_status(harness, project, base=base, cwd=cwd)
    command = _command(harness, project, base, "prompt")
    if command is None:
        where = status.config_path or str(installer.wrapper_path(base))
        raise RefusedError(f"mnemo's prompt hook for {harness} is not installed ({where})",
                           hint=f"Run `mnemo hooks install --harness {harness}` first.")
    session_id = f"{TEST_SESSION_PREFIX}{uuid.uuid4().hex[:12]}"
    event = sample_event(harness, cwd, session_id, prompt or DEFAULT_PROMPT)
    env = dict(os.environ)
    if spec.project_env:
        env[spec.project_env[0]] = str(cwd)
    data_dir = Path(os.environ["MNEMO_DATA_DIR"]) if os.environ.get("MNEMO_DATA_DIR") \
        else wrapper_data_dir(command) or base
    log = paths.logs_dir(data_dir) / "hook.log"
    log_before = _log_size(log)
    limit = timeout if timeout is not None else float(installer.HOOK_TIMEOUT_SECONDS)
    started: SessionStartRun | None = None
    start_command = _command(harness, project, base, "session-start")
    # Codex runs no entry it has not trusted: an untrusted session start gives nothing,
    # and the first prompt brings the standing block instead, as the test then shows.
    untrusted = _untrusted(status, harness, "session-start")
    if start_command is not None and not untrusted:
        start_event = session_start_event(harness, cwd, session_id)
        code, late, out, _, took = _run(start_command, start_event, cwd, env, limit)
        given = _additional_context(harness, out)
        started = SessionStartRun(
            command=start_command, event=start_event, exit_code=code, timed_out=late,
            duration_ms=took, additional_context=given,
            model_view=model_view(harness, given, "session-start") if given else None)
    exit_code, timed_out, stdout, stderr, duration = _run(command, event, cwd, env, limit)
    context = _additional_context(harness, stdout)
    result = HookTest(harness=harness, config_path=status.config_path,
                      config_dir_env=status.config_dir_env, command=command, cwd=str(cwd),
                      session_id=session_id, event=event, exit_code=exit_code,
                      timed_out=timed_out, duration_ms=duration, stdout=stdout, stderr=stderr,
                      additional_context=context,
                      model_view=model_view(harness, context) if context else None,
                      would_run=False, trust=status.trust, folder_trust=status.folder_trust,
                      data_dir=str(data_dir), session_start=started)
    try:
        with log.open("rb") as handle:
            handle.seek(log_before)
            result.hook_log = handle.read().decode("utf-8", "replace").splitlines()[-20:]
    except OSError:
        pass
    if start_command is not None and untrusted:
        result.notes.append(f"the harness would not run mnemo's session-start entry (it is "
                            f"{untrusted[0]['state']}): the standing block comes with the "
                            "first prompt instead")
    _judge(result, status, spec.can_inject)
    return result


def _untrusted(status: installer.HarnessStatus, harness: str, kind: str) -> list[dict[str, Any]]:
    """mnemo's entries for the event `kind` that the harness (Codex) has not trusted,
    and so skips."""
    event = HARNESSES[harness].event_names[kind]
    return [t for t in status.trust
            if t["ours"] and t["event"] == event and t["state"] != "trusted"]


def _judge(result: HookTest, status: installer.HarnessStatus, can_inject: bool) -> None:
    blockers, notes = result.blockers, result.notes
    name = result.harness
    if not status.installed:
        blockers.append("not every event has mnemo's entry: " + "; ".join(status.problems))
    for entry in _untrusted(status, name, "prompt"):
        blockers.append(f"Codex skips this entry silently: it is {entry['state']} "
                        f"({entry['key']}). {status.trust_fix or ''}".strip())
    for problem in status.problems:
        if "is not trusted in" in problem:
            blockers.append(problem)
    if status.folder_trust is not None and not status.folder_trust["trusted"]:
        from .gemini import trust_fix

        folder = status.folder_trust
        blockers.append(f"Gemini CLI runs no hooks in {folder['path']}: {folder['detail']}. "
                        + trust_fix(folder["path"]))
    if result.timed_out:
        blockers.append("the command did not answer within the harness's timeout")
    elif result.exit_code not in (0, None):
        blockers.append(f"the command exited {result.exit_code}")
    start = result.session_start
    if start is not None and (start.timed_out or start.exit_code != 0):
        ran = "did not answer in time" if start.timed_out else f"exited {start.exit_code}"
        notes.append(f"the session-start command {ran}: the model gets no standing block "
                     "at the start of a session")
    if result.config_dir_env:
        notes.append(f"{result.config_dir_env} is set here: the harness must see the same "
                     "value, or it reads another config")
    for other in status.unread_configs:
        notes.append(f"{other} also holds mnemo's entries; {name} does not read it now")
    if not can_inject:
        notes.append(f"{name} cannot show hook output to the model: mnemo only captures there")
    elif result.additional_context is None and not result.timed_out:
        notes.append("the hook answered nothing: an unbound directory whose hint is off or "
                     "declined, or no memory matched the prompt (try --prompt with words from "
                     "a memory)")
    result.would_run = not blockers
