"""The real hook scripts in subprocesses, the way harnesses run them."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

from dsh_mnemo.hook.inject import PREFACE
from tests.conftest import configure
from tests.hook.conftest import (
    HARNESSES,
    WRAPPER,
    injected_text,
    log_text,
    payload,
    run_cli_hook,
    run_wrapper,
    stop_workers,
    user_rows,
)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("roomy_deadline")]

DEPLOY = "We deploy with make release, never by hand on Fridays"
QUESTION = "how do we deploy a release?"


@pytest.mark.parametrize("harness", HARNESSES)
def test_round_trip_through_the_wrapper(harness: str, repo: Path, data_dir: Path) -> None:
    first = run_wrapper("prompt", harness, payload(harness, "prompt", cwd=repo, session="s1",
                                                   prompt=DEPLOY))
    assert (first.returncode, first.stdout) == (0, "")
    end = run_wrapper("turn-end", harness, payload(harness, "turn-end", cwd=repo, session="s1",
                                                   prompt=DEPLOY, reply="Noted."))
    assert end.returncode == 0
    assert end.stdout == ("{}\n" if harness == "codex" else "")
    if harness == "codex":
        assert json.loads(end.stdout) == {}
    done = run_wrapper("session-end", harness, payload(harness, "session-end", cwd=repo,
                                                       session="s1"))
    assert (done.returncode, done.stdout) == (0, "")
    assert user_rows(data_dir) == [f"[USER] {DEPLOY}"]
    second = run_wrapper("prompt", harness, payload(harness, "prompt", cwd=repo, session="s2",
                                                    prompt=QUESTION))
    assert second.returncode == 0
    if harness == "cursor":
        assert second.stdout == ""
        return
    context = injected_text(harness, second.stdout)
    assert context.startswith('<memory-data source="mnemo" workspace="app">\n' + PREFACE)
    assert "make release" in context
    if harness != "generic":
        assert second.stdout.count("\n") == 1  # one JSON document on one line


def test_mnemo_hook_directly_never_writes_a_traceback(repo: Path, data_dir: Path) -> None:
    for raw in (b"", b"\xff\xfe garbage \x00", b'{"cwd": ' + b"[" * 100_000,
                json.dumps({"cwd": str(repo), "prompt": QUESTION}).encode()):
        for kind in ("prompt", "turn-end", "session-end"):
            done = run_cli_hook(kind, "claude-code", raw)
            assert done.returncode == 0
            assert done.stdout == "" and "Traceback" not in done.stderr
    assert run_cli_hook("prompt", "no-such-harness", b"{}").returncode == 0
    assert run_cli_hook("no-such-event", "codex", b"{}").returncode == 0


def test_the_hook_log_never_holds_a_secret_from_the_event_or_the_arguments(
        tmp_path: Path, data_dir: Path) -> None:
    token = "ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL7zX9cV2b"
    missing = tmp_path / "proj" / "nonexist-password=Xy9Kp2Lm7Qr"
    done = run_cli_hook("prompt", "claude-code",
                        {"session_id": "x", "cwd": str(missing), "prompt": "hi"})
    assert done.returncode == 0
    from tests.conftest import mnemo_executable

    usage = subprocess.run([mnemo_executable(), "hook", "prompt", "--harness", f"bogus-{token}"],
                           input=b"{}", capture_output=True, timeout=30)
    assert usage.returncode == 0
    text = log_text(data_dir)
    assert "nonexist-password=<redacted-password>" in text
    assert "bogus-<redacted-github-token>" in text
    assert "Xy9Kp2Lm7Qr" not in text and token not in text


def test_an_unreachable_embeddings_url_with_a_token_is_kept_scrubbed(
        repo: Path, data_dir: Path) -> None:
    import socket

    token = "ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL7zX9cV2b"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    configure(embeddings__backend="openai-url", embeddings__model="m",
              embeddings__url=f"http://127.0.0.1:{port}/v1/{token}/embeddings")
    done = run_cli_hook("prompt", "claude-code", payload("claude-code", "prompt", cwd=repo,
                                                         prompt=QUESTION))
    assert done.returncode == 0
    text = log_text(data_dir)
    assert "embedding model unavailable" in text and "<redacted-github-token>" in text
    state = (data_dir / "hook-state" / "embeddings.json").read_text(encoding="utf-8")
    assert "<redacted-github-token>" in json.loads(state)["reason"]
    for where in (text, state):
        assert token not in where and "Q7wE9rT2" not in where
    # the same (scrubbed) reason is logged once, not once per prompt
    run_cli_hook("prompt", "claude-code", payload("claude-code", "prompt", cwd=repo,
                                                  prompt=QUESTION))
    assert log_text(data_dir).count("embedding model unavailable") == 1


@pytest.mark.parametrize("harness", HARNESSES)
def test_garbage_through_the_wrapper(harness: str, data_dir: Path) -> None:
    for raw in (b"", b"\xff\x00\x01not json at all", b"[" * 5000):
        for kind in ("prompt", "turn-end"):
            done = run_wrapper(kind, harness, raw)
            assert done.returncode == 0
            assert done.stdout == ("{}\n" if (harness, kind) == ("codex", "turn-end") else "")


def _fake_mnemo(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "fake-bin" / "mnemo"
    script.parent.mkdir(exist_ok=True)
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.parametrize("body", ["exit 3", "echo 'Traceback (most recent call last)'; exit 1",
                                  "kill -9 $$"])
def test_wrapper_fails_open_when_mnemo_crashes(body: str, tmp_path: Path) -> None:
    fake = _fake_mnemo(tmp_path, body)
    for harness, kind, expected in (("claude-code", "prompt", ""), ("codex", "turn-end", "{}\n"),
                                    ("gemini", "prompt", "")):
        done = run_wrapper(kind, harness, b"{}", env={"MNEMO_BIN": str(fake)})
        assert (done.returncode, done.stdout, done.stderr) == (0, expected, "")


def test_wrapper_fails_open_when_mnemo_is_missing_or_hangs(tmp_path: Path) -> None:
    env = {"MNEMO_BIN": "", "PATH": "/usr/bin:/bin"}
    done = run_wrapper("prompt", "claude-code", b"{}", env=env)
    assert (done.returncode, done.stdout) == (0, "")
    done = run_wrapper("turn-end", "codex", b"{}", env={**env, "MNEMO_BIN": "/nonexistent"})
    assert (done.returncode, done.stdout) == (0, "{}\n")
    hang = _fake_mnemo(tmp_path, "sleep 30")
    done = run_wrapper("prompt", "qwen", b"{}", timeout=15,
                       env={"MNEMO_BIN": str(hang), "MNEMO_HOOK_WRAPPER_TIMEOUT": "1"})
    assert (done.returncode, done.stdout) == (0, "")


def test_deadline_prints_nothing_and_exits_zero(repo: Path, data_dir: Path) -> None:
    """MNEMO_HOOK_TEST_DELAY makes the worker sleep; the 0.5 s deadline must cut it off."""
    configure(hooks__deadline_seconds=0.5)
    env = {"MNEMO_HOOK_TEST_DELAY": "20"}
    # subprocess.run raises TimeoutExpired if the hook waited for the 20 s sleep
    started = time.monotonic()
    done = run_cli_hook("prompt", "claude-code", payload("claude-code", "prompt", cwd=repo,
                                                         prompt=QUESTION), env=env, timeout=10,
                        wait=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = run_cli_hook("turn-end", "codex", payload("codex", "turn-end", cwd=repo), env=env,
                        timeout=10, wait=False)
    assert (done.returncode, done.stdout) == (0, "{}\n")
    via_wrapper = run_wrapper("prompt", "gemini", payload("gemini", "prompt", cwd=repo,
                                                          prompt=QUESTION), env=env, timeout=10,
                              wait=False)
    assert (via_wrapper.returncode, via_wrapper.stdout) == (0, "")
    # Three hooks whose work would take 20 s each came back within their deadlines
    # (each cut at 0.5 s, as the log says); the margin is a loaded machine's start-up
    # and exit, still far short of even one hook's work.
    assert time.monotonic() - started < 3 * (0.5 + 3.0)
    assert log_text(data_dir).count("deadline of 0.5s exceeded") == 3
    stop_workers()


PASTED = "PASTED LOG: why does the build fail? " + "log line of the failing build\n" * 4000


def test_an_event_still_being_written_at_the_deadline_is_read_on_and_kept(
        repo: Path, data_dir: Path) -> None:
    """The harness gets its neutral answer at the deadline; the worker reads the
    rest of the event and spools the prompt, which its turn end stores."""
    from tests.conftest import mnemo_executable
    from tests.hook.conftest import run_slowly, settle

    configure(hooks__deadline_seconds=1.0)
    done, seconds = run_slowly(
        [mnemo_executable(), "hook", "prompt", "--harness", "claude-code"],
        payload("claude-code", "prompt", cwd=repo, session="slow", prompt=PASTED), pause=5.0)
    assert (done.returncode, done.stdout) == (0, "")
    assert seconds < 4.0  # answered at the deadline, not once the harness finished writing
    settle()
    configure(hooks__deadline_seconds=10.0)
    run_cli_hook("turn-end", "claude-code", payload("claude-code", "turn-end", cwd=repo,
                                                    session="slow", reply="Fixed."))
    (row,) = user_rows(data_dir)
    assert row.startswith("[USER] PASTED LOG: why does the build fail?")
    assert "still writing the event at the deadline" in log_text(data_dir)


def _bank_db(data_dir: Path) -> Path:
    (db,) = [p for p in data_dir.rglob("mnemosyne.db") if "ws-" in str(p)]
    return db


def test_locked_database_fails_open_and_loses_nothing(repo: Path, data_dir: Path) -> None:
    # create the bank with one turn, then lock it
    run_cli_hook("prompt", "claude-code", payload("claude-code", "prompt", cwd=repo,
                                                  session="a", prompt=DEPLOY))
    run_cli_hook("turn-end", "claude-code", payload("claude-code", "turn-end", cwd=repo,
                                                    session="a"))
    assert user_rows(data_dir) == [f"[USER] {DEPLOY}"]
    configure(hooks__deadline_seconds=1.0)
    holder = sqlite3.connect(_bank_db(data_dir), timeout=0, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        locked_turn = "The staging cluster is called orchid"
        for kind, expected in (("prompt", ""), ("turn-end", "{}\n")):
            done = run_cli_hook(kind, "codex", payload("codex", kind, cwd=repo, session="b",
                                                       prompt=locked_turn), timeout=20)
            assert done.returncode == 0 and done.stderr == ""
            assert done.stdout == expected
        # Only writes wait for the lock (WAL): a bank whose schema is current opens
        # without writing, and a prompt given the time to answer recalls from it.
        configure(hooks__deadline_seconds=10.0)
        again = run_cli_hook("prompt", "claude-code", payload("claude-code", "prompt",
                                                              cwd=repo, session="c",
                                                              prompt=QUESTION))
        assert again.returncode == 0 and again.stderr == ""
        assert DEPLOY in again.stdout
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    configure(hooks__deadline_seconds=5.0)
    # the turn captured while the database was locked is still pending, then stored once
    run_cli_hook("session-end", "codex", payload("codex", "session-end", cwd=repo, session="b"))
    run_cli_hook("session-end", "codex", payload("codex", "session-end", cwd=repo, session="b"))
    rows = user_rows(data_dir)
    assert rows.count(f"[USER] {locked_turn}") == 1
    assert log_text(data_dir)  # the failures were logged


def test_concurrent_hooks_store_each_turn_once(repo: Path, data_dir: Path) -> None:
    def session(name: str) -> None:
        for i in range(3):
            text = f"session {name} message number {i} about module{i}"
            run_cli_hook("prompt", "claude-code", payload("claude-code", "prompt", cwd=repo,
                                                          session=name, prompt=text))
            run_cli_hook("turn-end", "claude-code", payload("claude-code", "turn-end",
                                                            cwd=repo, session=name))

    threads = [threading.Thread(target=session, args=(n,)) for n in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = user_rows(data_dir)
    assert len(rows) == 6 and len(set(rows)) == 6


def _unconsolidated(data_dir: Path) -> int:
    conn = sqlite3.connect(_bank_db(data_dir))
    try:
        return conn.execute("SELECT COUNT(*) FROM working_memory WHERE consolidated_at IS NULL "
                            "AND content LIKE '[USER]%'").fetchone()[0]
    finally:
        conn.close()


def test_consolidates_every_n_captured_turns(repo: Path, data_dir: Path) -> None:
    # A one-hour TTL (set before Mnemosyne is imported) makes every row due at once;
    # upstream's write guard consolidates due rows before each write, so after
    # each turn exactly the newest row is unconsolidated, until the Nth turn.
    configure(capture__consolidate_every=3)
    env = {"MNEMOSYNE_WM_TTL_HOURS": "1"}
    counts = []
    for i, text in enumerate(("alpha topic one", "beta topic two", "gamma topic three")):
        run_cli_hook("prompt", "claude-code", payload("claude-code", "prompt", cwd=repo,
                                                      session=f"c{i}", prompt=text), env=env)
        run_cli_hook("turn-end", "claude-code", payload("claude-code", "turn-end", cwd=repo,
                                                        session=f"c{i}"), env=env)
        counts.append(_unconsolidated(data_dir))
    assert counts == [1, 1, 0]


def test_session_end_consolidates_if_the_session_captured(repo: Path, data_dir: Path) -> None:
    configure(capture__consolidate_every=0)
    env = {"MNEMOSYNE_WM_TTL_HOURS": "1"}
    run_cli_hook("prompt", "gemini", payload("gemini", "prompt", cwd=repo, session="d",
                                             prompt="delta topic four"), env=env)
    run_cli_hook("turn-end", "gemini", payload("gemini", "turn-end", cwd=repo, session="d",
                                               prompt="delta topic four"), env=env)
    assert _unconsolidated(data_dir) == 1
    run_cli_hook("session-end", "gemini", payload("gemini", "session-end", cwd=repo,
                                                  session="other"), env=env)
    assert _unconsolidated(data_dir) == 1  # a session that captured nothing does not
    run_cli_hook("session-end", "gemini", payload("gemini", "session-end", cwd=repo,
                                                  session="d"), env=env)
    assert _unconsolidated(data_dir) == 0


def test_missing_data_dir_in_a_subprocess(repo: Path, tmp_path: Path) -> None:
    fresh = tmp_path / "brand" / "new"
    env = {"MNEMO_DATA_DIR": str(fresh), "MNEMOSYNE_DATA_DIR": str(fresh)}
    done = run_wrapper("prompt", "claude-code", payload("claude-code", "prompt", cwd=repo,
                                                        prompt=QUESTION), env=env)
    assert (done.returncode, done.stdout) == (0, "")
    unusable = tmp_path / "file-not-dir"
    unusable.write_text("")
    env = {"MNEMO_DATA_DIR": str(unusable), "MNEMOSYNE_DATA_DIR": str(unusable)}
    for kind in ("prompt", "turn-end", "session-end"):
        done = run_cli_hook(kind, "claude-code", payload("claude-code", kind, cwd=repo,
                                                         prompt=QUESTION), env=env)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_wrapper_in_hooks_dir_is_executable_posix_sh() -> None:
    assert os.access(WRAPPER, os.X_OK)
    assert WRAPPER.read_text().startswith("#!/bin/sh\n")
    subprocess.run(["sh", "-n", str(WRAPPER)], check=True)
