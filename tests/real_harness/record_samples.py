"""Re-record tests/real_harness/samples from the real harness CLIs.

    .venv/bin/python tests/real_harness/record_samples.py [--harness NAME ...] [--keep DIR]

For each harness: a temporary HOME pointed at the fake model server, a
recording hook on every event mnemo cares about (it saves its stdin and
answers nothing), one non-interactive turn in which the model first calls a
file-reading tool and then answers.  The hook payloads are written to
samples/payloads/<harness>/<Event>.json and the harness's own transcript of
the turn to samples/transcripts/<harness>/, with the temporary paths replaced
by /home/dev and long strings cut.  For Gemini CLI a second turn has the
SessionStart hook return context, to record how that context shows up in the
prompt of BeforeAgent and AfterAgent.

Not a test: run it after bumping a harness version in package.json, and read
the diff.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tests.real_harness.fake_model import FakeModel, ToolCall  # noqa: E402
from tests.real_harness.harnesses import NAMES, SETUPS  # noqa: E402

SAMPLES = HERE / "samples"
MAX_STRING = 400
PROMPT = "What does the README say?"
EVENTS = {
    "claude-code": ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"),
    "codex": ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"),
    "gemini": ("SessionStart", "BeforeAgent", "AfterAgent", "SessionEnd"),
    "qwen": ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"),
}
TOOLS = {"claude-code": ("Read", "file_path"), "codex": ("exec_command", "cmd"),
         "gemini": ("read_file", "file_path"), "qwen": ("read_file", "file_path")}
TRANSCRIPTS = {"claude-code": (".claude/projects/*/*.jsonl", "session.jsonl"),
               "codex": (".codex/sessions/*/*/*/rollout-*.jsonl", "rollout.jsonl"),
               "gemini": (".gemini/tmp/*/chats/session-*.jsonl", "session.jsonl"),
               "qwen": (".qwen/projects/*/chats/*.jsonl", "chat.jsonl")}

RECORDER = '''#!/usr/bin/env python3
import json, os, sys, pathlib
event = sys.argv[1]
out = pathlib.Path(os.environ["RECORD_DIR"])
out.mkdir(parents=True, exist_ok=True)
n = len(list(out.glob(event + "*.json")))
(out / f"{event}{'' if n == 0 else '-' + str(n)}.json").write_text(sys.stdin.read())
context = os.environ.get("RECORD_CONTEXT_" + event)
if context:
    print(json.dumps({"hookSpecificOutput": {"hookEventName": event,
                                             "additionalContext": context}}))
elif event == "Stop" and os.environ.get("RECORD_HARNESS") == "codex":
    print("{}")
'''


def hooks_table(name: str, recorder: Path) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for event in EVENTS[name]:
        handler: dict[str, Any] = {"type": "command", "command": f"{recorder} {event}",
                                   "timeout": 10}
        if name == "codex" and event == "SessionEnd":
            handler["timeout"] = 3
        if name == "gemini":
            handler.update(name=f"record-{event}", timeout=10000)
        table[event] = [{"hooks": [handler]}]
    return table


def install_recorder(name: str, home: Path, recorder: Path) -> None:
    setup = SETUPS[name]
    target = setup.hooks_file(home)
    document = json.loads(target.read_text()) if target.exists() else {}
    document["hooks"] = hooks_table(name, recorder)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(document, indent=2))


def sanitize(value: Any, home: Path, harness_bin: Path, cut: bool) -> Any:
    if isinstance(value, str):
        text = value.replace(str(home), "/home/dev")
        text = text.replace(re.sub(r"[^A-Za-z0-9]", "-", str(home)), "-home-dev")
        text = text.replace(str(harness_bin.parent.parent), "/opt/harnesses")
        text = re.sub(r"http://127\.0\.0\.1:\d+", "http://127.0.0.1:PORT", text)
        if cut and len(text) > MAX_STRING:
            text = text[:MAX_STRING] + \
                f"…[{len(text) - MAX_STRING} more characters cut from this sample]"
        return text
    if isinstance(value, list):
        return [sanitize(v, home, harness_bin, cut) for v in value]
    if isinstance(value, dict):
        return {k: sanitize(v, home, harness_bin, cut) for k, v in value.items()}
    return value


def turn(name: str, harness_bin: Path, root: Path, context: dict[str, str]) -> Path:
    """One recorded turn in a fresh HOME; returns that HOME."""
    setup = SETUPS[name]
    home = root / "home"
    repo = home / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README.md").write_text("hello repo\n")
    recorder = home / "record-hook"
    recorder.write_text(RECORDER)
    recorder.chmod(0o755)
    tool, arg = TOOLS[name]
    call = ToolCall(tool, {arg: "cat README.md" if name == "codex" else str(repo / "README.md")})
    with FakeModel(reply="The README says hello.", tool_call=call) as model:
        setup.prepare(home, model.url)
        install_recorder(name, home, recorder)
        setup.trust(home, [repo])
        env = setup.env(home, harness_bin, model.url)
        env.update(RECORD_DIR=str(root / "payloads"), RECORD_HARNESS=name)
        env.update({f"RECORD_CONTEXT_{k}": v for k, v in context.items()})
        done = subprocess.run(setup.command(harness_bin, PROMPT), cwd=repo, env=env,
                              capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise SystemExit(f"{name}: exit {done.returncode}: {done.stderr[-2000:]}")
    return home


def record(name: str, harness_bin: Path, keep: Path | None) -> None:
    with tempfile.TemporaryDirectory(prefix=f"record-{name}-") as tmp:
        root = Path(keep or tmp) / name
        if root.exists():
            shutil.rmtree(root)
        home = turn(name, harness_bin, root / "plain", {})
        out = SAMPLES / "payloads" / name
        out.mkdir(parents=True, exist_ok=True)
        for path in sorted((root / "plain" / "payloads").glob("*.json")):
            target = path.name
            if name == "qwen" and path.name == "UserPromptSubmit-1.json":
                target = "UserPromptSubmit-tool-continuation.json"
            document = sanitize(json.loads(path.read_text()), home, harness_bin, cut=False)
            (out / target).write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        pattern, target = TRANSCRIPTS[name]
        found = sorted(home.glob(pattern))
        if len(found) != 1:
            raise SystemExit(f"{name}: expected one transcript for {pattern}, found {found}")
        lines = [json.dumps(sanitize(json.loads(line), home, harness_bin, cut=True),
                            ensure_ascii=False)
                 for line in found[0].read_text().splitlines() if line.strip()]
        transcripts = SAMPLES / "transcripts" / name
        transcripts.mkdir(parents=True, exist_ok=True)
        (transcripts / target).write_text("\n".join(lines) + "\n")
        if name == "gemini":
            context = 'SessionStart context <memory-data x="1">a & b</memory-data>'
            home = turn(name, harness_bin, root / "context", {"SessionStart": context})
            for event in ("BeforeAgent", "AfterAgent"):
                path = root / "context" / "payloads" / f"{event}.json"
                document = sanitize(json.loads(path.read_text()), home, harness_bin, cut=False)
                (out / f"{event}-after-SessionStart-context.json").write_text(
                    json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        print(f"{name}: recorded")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", action="append", choices=NAMES)
    parser.add_argument("--keep", type=Path, help="keep each run's HOME under this directory")
    args = parser.parse_args()
    done = subprocess.run(["bash", str(HERE.parents[1] / "scripts" / "install_harnesses.sh")],
                          capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        raise SystemExit(f"harness CLIs unavailable: {done.stderr.strip()}")
    harness_bin = Path(done.stdout.strip().splitlines()[-1])
    for name in args.harness or NAMES:
        record(name, harness_bin, args.keep)


if __name__ == "__main__":
    main()
