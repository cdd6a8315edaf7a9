"""Many sessions at once, through the real hook command: every turn stored exactly once.

Sixteen sessions send fifty turns each (`mnemo hook prompt`, then `mnemo hook
turn-end`, a new process per call, as Claude Code runs them) into two
workspaces while `mnemo sleep --all` and `mnemo remember` run in a loop
beside them.  A second run keeps every row permanently due (aged past the
TTL while the turns arrive), so each write has to consolidate before
upstream's trim could delete anything.  Afterwards every turn is in its
workspace's bank exactly once.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import bind_repo, configure, mnemo_executable
from tests.hook.conftest import settle

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SESSION_SCRIPT = r"""
import json, subprocess, sys
mnemo, cwd, session, turns = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
for turn in range(turns):
    token = f"tok-{session}-{turn}"
    prompt = {"session_id": session, "cwd": cwd, "hook_event_name": "UserPromptSubmit",
              "transcript_path": None, "prompt": f"please look at {token} in the parser"}
    stop = {"session_id": session, "cwd": cwd, "hook_event_name": "Stop",
            "last_assistant_message": "Done."}
    for event, document in (("prompt", prompt), ("turn-end", stop)):
        done = subprocess.run([mnemo, "hook", event, "--harness", "claude-code"],
                              input=json.dumps(document).encode(), capture_output=True,
                              timeout=60)
        if done.returncode != 0 or done.stderr:
            print("hook failed", event, done.returncode, done.stderr[:200], file=sys.stderr)
            sys.exit(1)
"""


def user_tokens(data_dir: Path) -> Counter[str]:
    found: Counter[str] = Counter()
    for db in data_dir.rglob("mnemosyne.db"):
        conn = sqlite3.connect(db, timeout=30)
        try:
            for (content,) in conn.execute(
                    "SELECT content FROM working_memory WHERE content LIKE '[USER] %tok-%'"):
                for word in content.split():
                    if word.startswith("tok-"):
                        found[word] += 1
        finally:
            conn.close()
    return found


def age_everything(data_dir: Path, stop: threading.Event) -> None:
    """Keep every working row of every bank past the TTL, until stopped."""
    from datetime import datetime, timedelta

    while not stop.is_set():
        stamp = (datetime.now() - timedelta(hours=400)).isoformat()
        for db in data_dir.rglob("mnemosyne.db"):
            try:
                conn = sqlite3.connect(db, timeout=1)
                conn.execute("UPDATE working_memory SET timestamp = ?", (stamp,))
                conn.commit()
                conn.close()
            except sqlite3.Error:
                pass  # busy: the next round ages them
        stop.wait(0.3)


def churn(repos: list[Path], stop: threading.Event, errors: list[str]) -> None:
    """`mnemo sleep --all` and `mnemo remember`, again and again, beside the hooks."""
    i = 0
    while not stop.is_set():
        for argv, cwd in ((["sleep", "--all"], repos[0]),
                          (["remember", f"a fact remembered meanwhile, number {i}"],
                           repos[i % len(repos)])):
            done = subprocess.run([mnemo_executable(), *argv], cwd=cwd, capture_output=True,
                                  text=True, timeout=120)
            if done.returncode not in (0, 7):  # 7: a lock stayed busy, reported cleanly
                errors.append(f"{argv}: {done.returncode} {done.stderr[-300:]}")
        i += 1


def run_sessions(repos: list[Path], sessions: int, turns: int, data_dir: Path,
                 *, keep_due: bool) -> None:
    stop = threading.Event()
    errors: list[str] = []
    helpers = [threading.Thread(target=churn, args=(repos, stop, errors))]
    if keep_due:
        helpers.append(threading.Thread(target=age_everything, args=(data_dir, stop)))
    for helper in helpers:
        helper.start()
    try:
        def one(index: int) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-c", SESSION_SCRIPT, mnemo_executable(),
                 str(repos[index % len(repos)]), f"s{index}", str(turns)],
                capture_output=True, text=True, timeout=900, env=os.environ.copy())

        with ThreadPoolExecutor(max_workers=sessions) as pool:
            results = list(pool.map(one, range(sessions)))
    finally:
        stop.set()
        for helper in helpers:
            helper.join()
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results if r.returncode]
    assert not errors, errors
    settle()
    # Turns whose turn end raced another session's are stored by the session end.
    for index in range(sessions):
        document = {"session_id": f"s{index}", "cwd": str(repos[index % len(repos)]),
                    "hook_event_name": "SessionEnd", "reason": "other"}
        subprocess.run([mnemo_executable(), "hook", "session-end", "--harness", "claude-code"],
                       input=json.dumps(document).encode(), capture_output=True, timeout=60)
    settle()


def expect_each_turn_once(data_dir: Path, sessions: int, turns: int) -> None:
    found = user_tokens(data_dir)
    expected = {f"tok-s{s}-{t}" for s in range(sessions) for t in range(turns)}
    missing = sorted(expected - set(found))
    twice = sorted(t for t, n in found.items() if n > 1)
    assert not missing and not twice, (f"{len(missing)} of {len(expected)} turns missing "
                                       f"(e.g. {missing[:5]}), {len(twice)} stored twice "
                                       f"(e.g. {twice[:5]})")


def test_sixteen_sessions_of_fifty_turns_store_every_turn_once(make_repo, data_dir: Path
                                                              ) -> None:
    configure(hooks__deadline_seconds=2.0, capture__consolidate_every=5)
    repos = [bind_repo(make_repo(name)).path for name in ("alpha", "beta")]
    started = time.monotonic()
    run_sessions(repos, sessions=16, turns=50, data_dir=data_dir, keep_due=False)
    expect_each_turn_once(data_dir, 16, 50)
    print(f"16 x 50 turns in {time.monotonic() - started:.0f}s")


def test_rows_kept_permanently_due_lose_no_turn(make_repo, data_dir: Path) -> None:
    configure(hooks__deadline_seconds=2.0, capture__consolidate_every=3)
    repos = [bind_repo(make_repo(name)).path for name in ("alpha", "beta")]
    run_sessions(repos, sessions=8, turns=25, data_dir=data_dir, keep_due=True)
    expect_each_turn_once(data_dir, 8, 25)
