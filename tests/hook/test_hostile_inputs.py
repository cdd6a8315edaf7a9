"""Hostile stdin through the real `mnemo hook` command: exit 0, nothing unexpected, on time.

Every case of `tests/corpus/hostile.py` (huge and deeply nested payloads,
invalid UTF-8, NUL bytes, lone surrogates, unclosed and nested harness
tags, ReDoS shapes, odd `cwd` values, wrong types for every field) is fed
to the installed console script, as a harness runs it: a new process, JSON
on stdin.  The cases are spread over every harness and event in turn, so
each combination meets many of them.  Each run must exit 0, print nothing
on stderr, print on stdout only what that harness accepts (nothing, Codex's
`{}`, or a well-formed context for a prompt), and end within the deadline
(2 s, counted from process start) plus a small margin.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import cycle
from pathlib import Path

import pytest

from dsh_mnemo.harnesses.registry import EVENTS, HARNESSES, NAMES
from tests.conftest import bind_repo, configure, mnemo_executable
from tests.corpus.hostile import STDIN_CASES, stdin_case
from tests.hook.conftest import settle, stop_workers

pytestmark = pytest.mark.e2e

DEADLINE = 2.0
# Interpreter start-up is inside the deadline; what remains is the parent's
# own exit and, on a loaded machine, being scheduled at all.
MARGIN = 1.5

COMBINATIONS = [(h, e) for h in NAMES for e in EVENTS]
PLAN = [(name, *combo) for name, combo in zip(STDIN_CASES, cycle(COMBINATIONS), strict=False)]


def well_formed(harness: str, event: str, stdout: str) -> bool:
    if stdout == "":
        return True
    spec = HARNESSES[harness]
    if event == "turn-end" and spec.stop_needs_json:
        return stdout == "{}\n"
    if event != "prompt" or not spec.can_inject:
        return False
    if spec.output == "text":
        return stdout.endswith("\n") and stdout.strip() != ""
    document = json.loads(stdout)
    inner = document["hookSpecificOutput"]
    return (set(document) == {"hookSpecificOutput"}
            and inner["hookEventName"] == spec.event_names["prompt"]
            and isinstance(inner["additionalContext"], str) and inner["additionalContext"])


def test_the_corpus_is_large_and_reaches_every_harness_and_event() -> None:
    assert len(STDIN_CASES) >= 100
    assert {(h, e) for _, h, e in PLAN} == set(COMBINATIONS)


def test_every_hostile_input_fails_open_on_time(make_repo, data_dir: Path) -> None:
    configure(hooks__deadline_seconds=DEADLINE)
    repo = bind_repo(make_repo("app")).path
    (repo / "notes.txt").write_text("a file where a directory is expected\n")

    def one(case: tuple[str, str, str]) -> tuple[str, str, str, int, str, str, float]:
        name, harness, event = case
        data = stdin_case(name, str(repo))
        started = time.monotonic()
        done = subprocess.run([mnemo_executable(), "hook", event, "--harness", harness],
                              input=data, capture_output=True, timeout=60, cwd=repo,
                              env=os.environ.copy())
        return (name, harness, event, done.returncode, done.stdout.decode("utf-8", "replace"),
                done.stderr.decode("utf-8", "replace"), time.monotonic() - started)

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(one, PLAN))
    problems = []
    for name, harness, event, code, stdout, stderr, elapsed in results:
        if code != 0 or stderr:
            problems.append(f"{name} {harness} {event}: exit {code}, stderr {stderr[:200]!r}")
        elif not well_formed(harness, event, stdout):
            problems.append(f"{name} {harness} {event}: unexpected stdout {stdout[:200]!r}")
        elif elapsed > DEADLINE + MARGIN:
            problems.append(f"{name} {harness} {event}: took {elapsed:.2f}s")
    slowest = max(results, key=lambda r: r[-1])
    print(f"{len(results)} hostile runs; slowest {slowest[0]} {slowest[-1]:.2f}s")
    try:
        assert not problems, "\n".join(problems)
    finally:
        stop_workers()  # workers still chewing on 8 MiB payloads in the background
    settle()
