"""The deadline under a loaded machine: it counts from when the harness started
the hook (the wrapper), and a hook past it answers nothing but keeps the turn."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import configure, mnemo_executable
from tests.hook.conftest import (
    injected_text,
    log_text,
    payload,
    run_cli_hook,
    run_wrapper,
    settle,
    stop_workers,
    user_rows,
)
from tests.hook.test_standing import CHANGELOG, fence_of, standing

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("roomy_deadline")]

DEPLOY = "We deploy with make release, never by hand on Fridays"
QUESTION = "how do we deploy a release?"
LATE_QUESTION = "how do we deploy a release on a Friday?"


def _slow_start(tmp_path: Path) -> Path:
    """A MNEMO_BIN that starts the real mnemo `SLOW_START` seconds late, as a new
    process (not `exec`: its start time is its own), as a starved machine would."""
    script = tmp_path / "slow-mnemo"
    script.write_text(f'#!/bin/sh\nsleep "${{SLOW_START:-0}}"\n"{mnemo_executable()}" "$@"\n'
                      "exit $?\n", encoding="utf-8")
    script.chmod(0o755)
    return script


def _remember_deploy(repo: Path, data_dir: Path) -> None:
    run_cli_hook("prompt", "claude-code", payload("claude-code", "prompt", cwd=repo,
                                                  session="first", prompt=DEPLOY))
    run_cli_hook("turn-end", "claude-code", payload("claude-code", "turn-end", cwd=repo,
                                                    session="first", reply="Noted."))
    assert user_rows(data_dir) == [f"[USER] {DEPLOY}"]


def test_a_hook_started_late_gives_up_at_the_wrappers_deadline_and_keeps_the_turn(
        repo: Path, data_dir: Path, tmp_path: Path) -> None:
    _remember_deploy(repo, data_dir)
    configure(hooks__deadline_seconds=3.0)
    slow = _slow_start(tmp_path)
    # On time, the same wrapper and script recall the memory: the script is not the cause.
    on_time = run_wrapper("prompt", "claude-code", payload(
        "claude-code", "prompt", cwd=repo, session="on-time", prompt=QUESTION),
        env={"MNEMO_BIN": str(slow), "SLOW_START": "0"})
    assert on_time.returncode == 0
    assert "make release" in injected_text("claude-code", on_time.stdout)
    # mnemo itself starts 4 s after the harness called the wrapper: past its 3 s
    # deadline before it runs a line.  It answers nothing at once, and says why.
    late = run_wrapper("prompt", "claude-code", payload(
        "claude-code", "prompt", cwd=repo, session="late", prompt=LATE_QUESTION),
        env={"MNEMO_BIN": str(slow), "SLOW_START": "4"}, wait=False)
    assert (late.returncode, late.stdout, late.stderr) == (0, "", "")
    log = log_text(data_dir)
    assert "deadline of 3s exceeded before answering (the hook process started 4." in log
    assert "after its wrapper)" in log
    # The turn is not lost: the worker spooled it, and its turn end stores it.
    settle()
    configure()
    end = run_cli_hook("turn-end", "claude-code", payload("claude-code", "turn-end", cwd=repo,
                                                          session="late", reply="Done."))
    assert end.returncode == 0
    assert f"[USER] {LATE_QUESTION}" in user_rows(data_dir)


def test_a_late_hooks_worker_steps_aside_for_the_hooks_still_in_time(
        repo: Path, data_dir: Path, tmp_path: Path) -> None:
    """Past its deadline a worker still spools the prompt, at a lower priority."""
    from dsh_mnemo.hook.background import busy
    from dsh_mnemo.hook.entry import LATE_NICENESS

    configure(hooks__deadline_seconds=1.0)
    # late from its start, then held in the worker (MNEMO_HOOK_TEST_DELAY) to be looked at
    late = run_wrapper("prompt", "claude-code", payload(
        "claude-code", "prompt", cwd=repo, session="late", prompt=QUESTION),
        env={"MNEMO_BIN": str(_slow_start(tmp_path)), "SLOW_START": "2",
             "MNEMO_HOOK_TEST_DELAY": "30"}, wait=False)
    assert (late.returncode, late.stdout) == (0, "")
    try:
        workers = []
        end = time.monotonic() + 20
        while not workers and time.monotonic() < end:
            workers = [pid for pid in busy(data_dir) if pid > 0]
            time.sleep(0.05)
        (worker,) = workers
        stat = Path(f"/proc/{worker}/stat").read_bytes().rsplit(b")", 1)[1].split()
        assert int(stat[16]) == max(LATE_NICENESS, os.nice(0))  # field 19 of stat(5): nice
    finally:
        stop_workers()


def test_a_worker_past_the_deadline_gives_no_standing_block_away(
        make_repo, data_dir: Path) -> None:
    """The harness had the neutral answer: a standing block the late worker would
    build reaches nobody, so the session's next prompt must still carry it."""
    from tests.conftest import bind_repo

    configure()
    repo = bind_repo(make_repo("alpha")).path
    standing(CHANGELOG, repo)
    configure(hooks__deadline_seconds=1.0)
    first = run_cli_hook("prompt", "claude-code", payload(
        "claude-code", "prompt", cwd=repo, session="s1", prompt="write the release notes"),
        env={"MNEMO_HOOK_TEST_DELAY": "2"}, timeout=20)
    assert (first.returncode, first.stdout) == (0, "")  # waited for the worker, too
    assert "deadline of 1s exceeded before answering" in log_text(data_dir)
    configure()
    second = run_cli_hook("prompt", "claude-code", payload(
        "claude-code", "prompt", cwd=repo, session="s1", prompt="and the changelog for 2.1?"))
    (block,) = fence_of(injected_text("claude-code", second.stdout))
    assert CHANGELOG in block
    # both prompts of the session are kept
    run_cli_hook("turn-end", "claude-code", payload("claude-code", "turn-end", cwd=repo,
                                                    session="s1", reply="Done."))
    rows = user_rows(data_dir)
    assert "[USER] write the release notes" in rows
    assert "[USER] and the changelog for 2.1?" in rows


AGE = """
import os, sys
from dsh_mnemo.server.client import hook_age
print(f"{hook_age(os.environ):.2f}")
"""


def _age(env: dict[str, str], delay: float) -> float:
    """`hook_age` of a Python process started `delay` s after its `sh` parent."""
    done = subprocess.run(["sh", "-c", f'sleep {delay}; "$0" -c "$1"; exit $?', sys.executable,
                           AGE], capture_output=True, text=True, timeout=30,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return float(done.stdout)


def test_hook_age_counts_from_the_wrapper_only_when_it_is_an_ancestor() -> None:
    own = _age({"MNEMO_HOOK_PID": ""}, 1.5)
    # A pid that is no ancestor (a process started earlier beside it) is ignored.
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.5)
        foreign = _age({"MNEMO_HOOK_PID": str(stranger.pid)}, 1.5)
    finally:
        stranger.kill()
        stranger.wait()
    assert own < 1.0 and foreign < 1.0
    # The wrapper (`sh`, here exporting its own pid) started 1.5 s before the process.
    done = subprocess.run(["sh", "-c", 'MNEMO_HOOK_PID=$$; export MNEMO_HOOK_PID; sleep 1.5; '
                           '"$0" -c "$1"; exit $?', sys.executable, AGE],
                          capture_output=True, text=True, timeout=30, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) >= 1.4
