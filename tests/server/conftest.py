"""Hooks run as a harness runs them, through the installed wrapper and the resident server."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import bind_repo, configure


@dataclass
class Call:
    stdout: str
    seconds: float
    returncode: int


class Served:
    """A bound repository, installed hooks, and helpers to call them and read the bank."""

    def __init__(self, root: Path, data: Path) -> None:
        from dsh_mnemo.harnesses.install import write_wrapper

        self.data = data
        self.repo = bind_repo(root / "app")
        self.wrapper = write_wrapper(data)
        self.env = {k: v for k, v in os.environ.items() if k != "MNEMO_NO_SERVER"}

    def event(self, kind: str, session: str, text: str = "") -> dict[str, Any]:
        document: dict[str, Any] = {"session_id": session, "cwd": str(self.repo.path)}
        if kind == "prompt":
            document.update(hook_event_name="UserPromptSubmit", prompt=text)
        elif kind == "turn-end":
            document.update(hook_event_name="Stop", last_assistant_message=text)
        else:
            document.update(hook_event_name="SessionEnd")
        return document

    def call(self, kind: str, document: dict[str, Any] | None = None, *, session: str = "s1",
             text: str = "", env: dict[str, str] | None = None,
             timeout: float = 60) -> Call:
        """One hook process through the installed wrapper, stdin closed after the event."""
        payload = json.dumps(document or self.event(kind, session, text)).encode()
        started = time.monotonic()
        done = subprocess.run([str(self.wrapper), kind, "claude-code"], input=payload,
                              capture_output=True, timeout=timeout,
                              env={**self.env, **(env or {})}, cwd=self.repo.path)
        return Call(done.stdout.decode("utf-8", "replace"), time.monotonic() - started,
                    done.returncode)

    def contents(self) -> list[str]:
        db = self.repo.db(self.data)
        if not db.exists():
            return []
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return [r[0] for r in conn.execute(
                "SELECT content FROM working_memory WHERE session_id = ? ORDER BY rowid",
                (self.repo.namespace,))]

    def state(self) -> Any:
        from dsh_mnemo.server import state

        return state.read(self.data)

    def wait_server(self, timeout: float = 30.0) -> Any:
        from dsh_mnemo.server import state

        current = state.wait_running(self.data, timeout=timeout)
        assert current.responding, f"no server answered: {current}"
        return current

    def settle(self, timeout: float = 60.0) -> None:
        """Wait until no hook worker and no server housekeeping is at work."""
        from dsh_mnemo.hook.background import wait_idle

        assert wait_idle(self.data, timeout=timeout)

    def log(self) -> str:
        path = self.data / "logs" / "hook.log"
        return path.read_text(encoding="utf-8") if path.exists() else ""


def setup(**values: object) -> object:
    """The config of these tests: replies captured too (a reply is what a turn end spools)."""
    return configure(capture__roles=["user", "assistant"], **values)


@pytest.fixture
def served(projects: Path, data_dir: Path) -> Served:
    setup()
    return Served(projects, data_dir)
