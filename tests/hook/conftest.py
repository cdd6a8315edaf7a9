"""Fixtures and helpers of the hook tests: payloads, in-process and subprocess runs."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, configure, mnemo_executable

PAYLOADS = Path(__file__).parent / "payloads"
WRAPPER = REPO_ROOT / "hooks" / "mnemo-hook.sh"
HARNESSES = ("claude-code", "codex", "gemini", "cursor", "qwen", "generic")
INJECTING = ("claude-code", "codex", "gemini", "qwen", "generic")
EVENTS = ("prompt", "turn-end", "session-end")


def _fill(value: Any, values: dict[str, str]) -> Any:
    if isinstance(value, str):
        for key, replacement in values.items():
            value = value.replace("{" + key + "}", replacement)
        return value
    if isinstance(value, list):
        return [_fill(v, values) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, values) for k, v in value.items()}
    return value


def payload(harness: str, event: str, *, cwd: Path | str, session: str = "sess-1",
            prompt: str = "", reply: str = "") -> dict[str, Any]:
    raw = json.loads((PAYLOADS / harness / f"{event}.json").read_text(encoding="utf-8"))
    return _fill(raw, {"cwd": str(cwd), "session": session, "prompt": prompt, "reply": reply})


def encode(document: dict[str, Any] | bytes | str) -> bytes:
    if isinstance(document, bytes):
        return document
    if isinstance(document, str):
        return document.encode("utf-8")
    return json.dumps(document).encode("utf-8")


def run_inprocess(event: str, harness: str, document: dict[str, Any] | bytes | str) -> str:
    """`mnemo hook EVENT --harness HARNESS` in this process; returns stdout."""
    from dsh_mnemo.hook.entry import run_hook

    out = io.StringIO()
    code = run_hook([event, "--harness", harness], stdin=io.BytesIO(encode(document)),
                    stdout=out)
    assert code == 0
    return out.getvalue()


@dataclass
class Proc:
    returncode: int
    stdout: str
    stderr: str


def stop_workers() -> None:
    """Kill hook workers still in the background (a test that made them hang)."""
    import signal

    from dsh_mnemo.hook.background import busy

    for pid in busy(Path(os.environ["MNEMO_DATA_DIR"])):
        if pid > 0:
            os.kill(pid, signal.SIGKILL)


def settle() -> None:
    """Wait for the hook workers that answered and went on storing in the background."""
    from dsh_mnemo.hook.background import wait_idle

    assert wait_idle(Path(os.environ["MNEMO_DATA_DIR"]), timeout=60)


def run_cli_hook(event: str, harness: str, document: dict[str, Any] | bytes | str, *,
                 env: dict[str, str] | None = None, cwd: Path | None = None,
                 timeout: float = 30, wait: bool = True) -> Proc:
    """The installed `mnemo hook …` in a new process, as a harness runs it.

    With `wait`, returns once its background worker has finished too.
    """
    done = subprocess.run([mnemo_executable(), "hook", event, "--harness", harness],
                          input=encode(document), capture_output=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=cwd)
    if wait:
        settle()
    return Proc(done.returncode, done.stdout.decode("utf-8", "replace"),
                done.stderr.decode("utf-8", "replace"))


def run_wrapper(event: str, harness: str, document: dict[str, Any] | bytes | str, *,
                env: dict[str, str] | None = None, wrapper: Path = WRAPPER,
                cwd: Path | None = None, timeout: float = 30, wait: bool = True) -> Proc:
    """The real `hooks/mnemo-hook.sh` wrapper, the way harness configs call it."""
    base_env = {**os.environ, "MNEMO_BIN": mnemo_executable()}
    done = subprocess.run(["sh", str(wrapper), event, harness], input=encode(document),
                          capture_output=True, timeout=timeout, env={**base_env, **(env or {})},
                          cwd=cwd)
    if wait:
        settle()
    return Proc(done.returncode, done.stdout.decode("utf-8", "replace"),
                done.stderr.decode("utf-8", "replace"))


def run_slowly(argv: list[str], document: dict[str, Any], *, pause: float,
               env: dict[str, str] | None = None,
               cwd: Path | None = None) -> tuple[Proc, float]:
    """`argv` with the event written to its stdin in two halves, `pause` seconds
    apart (a busy harness writing a long pasted prompt in pieces); the process and
    the seconds it took to answer.  `env` is its whole environment (default: ours)."""
    import threading

    data = encode(document)
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL,
                            env=dict(os.environ) if env is None else env, cwd=cwd)

    def write() -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(data[:len(data) // 2])
            proc.stdin.flush()
            time.sleep(pause)
            proc.stdin.write(data[len(data) // 2:])
            proc.stdin.close()
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert proc.stdout is not None
    out = proc.stdout.read()  # the hook's answer: it does not wait for the writer
    returncode = proc.wait(timeout=30)
    seconds = time.monotonic() - started
    writer.join(30)
    return Proc(returncode, out.decode("utf-8", "replace"), ""), seconds


def injected_text(harness: str, stdout: str, kind: str = "prompt") -> str:
    """The context a harness would hand the model, checking the output shape."""
    if not stdout:
        return ""
    if harness == "generic":
        return stdout
    from dsh_mnemo.harnesses.registry import HARNESSES

    document = json.loads(stdout)
    assert set(document) == {"hookSpecificOutput"}, document
    inner = document["hookSpecificOutput"]
    assert inner["hookEventName"] == HARNESSES[harness].event_names[kind]
    assert isinstance(inner["additionalContext"], str)
    return inner["additionalContext"]


def all_rows(data_dir: Path, tables: tuple[str, ...] = ("working_memory", "episodic_memory",
                                                          "memories")
             ) -> list[tuple[str, str, str]]:
    """(database, session_id, content) of every memory row in every SQLite file.

    Upstream mirrors each working-memory row into the legacy `memories` table.
    """
    rows: list[tuple[str, str, str]] = []
    for db in sorted(data_dir.rglob("*.db")):
        if db.name == "query_cache.db":
            continue
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            present = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
            for table in tables:
                if table in present:
                    rows += [(str(db), str(sid), str(content)) for sid, content in conn.execute(
                        f"SELECT session_id, content FROM {table}")]
        finally:
            conn.close()
    return rows


def raw_bytes_of_databases(data_dir: Path) -> bytes:
    """Every byte of every file under the data dir (WAL included): secrets must not be there."""
    chunks = []
    for path in sorted(data_dir.rglob("*")):
        if path.is_file():
            chunks.append(path.read_bytes())
    return b"\n".join(chunks)


def log_text(data_dir: Path) -> str:
    path = data_dir / "logs" / "hook.log"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def user_rows(data_dir: Path) -> list[str]:
    return [content for _, _, content in all_rows(data_dir, ("working_memory",))
            if content.startswith("[USER]")]



@pytest.fixture
def roomy_deadline(isolated_env: Path) -> None:
    """A roomy hook deadline for every test that does not set its own."""
    configure()

