"""Killing `bind`, `adopt`, `rebind` and `migrate run` anywhere: nothing is lost, a re-run finishes.

Two ways to stop a process:

- at every fault point it passes, in turn: `MNEMO_TEST_FAULT=*:<n>` makes it
  `os._exit` at the n-th point reached, whichever it is, for n = 1, 2, ...
  until a run passes them all (each n on a fresh data dir);
- with SIGKILL after a random delay (seeded; `MNEMO_KILL_ROUNDS` rounds per
  command, 3 unless set), wherever it happens to be.

After each kill: no row is lost, the index is readable, and running the same
command again succeeds and leaves the state a run without a kill leaves.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from dsh_mnemo import paths
from dsh_mnemo.config import load_settings
from dsh_mnemo.faults import EXIT_CODE
from dsh_mnemo.memory import driver
from dsh_mnemo.memory import store as storage
from dsh_mnemo.migrate import journal as journals
from dsh_mnemo.workspace import identity
from dsh_mnemo.workspace.context import resolve_memory_context
from dsh_mnemo.workspace.index import Index
from tests.conftest import bind_repo, mnemo_executable
from tests.migrate.conftest import ORPHAN_UUID, audit, copy_database, uuid_namespace

pytestmark = pytest.mark.e2e

ORPHAN = uuid_namespace(ORPHAN_UUID)
ROUNDS = int(os.environ.get("MNEMO_KILL_ROUNDS") or 3)
MAX_POINTS = 80  # more fault points than any command passes


def lost(before: Counter, after: Counter) -> Counter:
    """Rows of `before` that exist nowhere now (duplicates in flight are fine)."""
    return Counter({k: n - after[k] for k, n in before.items() if after[k] < n})


def namespace_of(path: Path) -> str | None:
    return resolve_memory_context(path, None, load_settings(), register=False).namespace


@dataclass
class Scenario:
    """One command on a fresh data dir, and what must hold after it (killed or not)."""

    name: str
    prepare: Callable[[], tuple[list[str], Path]]  # -> (argv, cwd), on a fresh data dir
    done: Callable[[], None]  # the state a completed run leaves


class Lab:
    def __init__(self, data: Path, projects: Path, template: Path) -> None:
        self.data = data
        self.projects = projects
        self.template = template
        self.rows: Counter = Counter()

    def reset(self, *, legacy: bool) -> None:
        for path in (self.data, self.projects):
            if path.exists():
                shutil.rmtree(path)
        self.projects.mkdir(parents=True)
        self.data.mkdir(parents=True)
        if legacy:
            copy_database(self.template, self.data / "mnemosyne.db")
        driver.reset_cache()

    def snapshot_rows(self) -> None:
        self.rows = audit(self.data)

    def check_after_kill(self) -> None:
        assert not lost(self.rows, audit(self.data))
        Index(self.data).load()  # readable (or recoverable) whatever the moment

    def check_no_leftovers(self) -> None:
        assert not list(self.data.glob(".*.tmp")), list(self.data.glob(".*.tmp"))
        assert all(journals.load(j, self.data).status in ("done", "failed")
                   for j in journals.all_ids(self.data))
        assert audit(self.data) == self.rows


def run(argv: list[str], cwd: Path, fault: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("MNEMO_TEST_FAULT", None)
    if fault:
        env["MNEMO_TEST_FAULT"] = fault
    return subprocess.run([mnemo_executable(), *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def bind_scenario(lab: Lab) -> Scenario:
    def prepare() -> tuple[list[str], Path]:
        lab.reset(legacy=False)
        repo = lab.projects / "app"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        lab.snapshot_rows()
        return ["bind", str(repo)], lab.projects

    def done() -> None:
        repo = lab.projects / "app"
        key = identity.identity_key_for(identity.read_marker(repo / identity.MARKER_NAME))
        data = Index(lab.data).load()
        entry = data.active_for(key)
        assert entry is not None and entry.lastSeenPath == str(repo)
        assert namespace_of(repo) == identity.namespace_for(key)
        assert len(data.workspaces) == 1

    return Scenario("bind", prepare, done)


def adopt_scenario(lab: Lab) -> Scenario:
    def prepare() -> tuple[list[str], Path]:
        lab.reset(legacy=True)
        target = lab.projects / "webapp"
        target.mkdir()
        lab.snapshot_rows()
        return ["adopt", ORPHAN, str(target)], lab.projects

    def done() -> None:
        target = lab.projects / "webapp"
        assert namespace_of(target) == ORPHAN
        entries = [e for e in Index(lab.data).load().by_namespace(ORPHAN) if not e.supersededBy]
        assert len(entries) == 1
        bank = paths.bank_db_path(identity.bank_for(ORPHAN), lab.data)
        assert bank.exists()
        import sqlite3

        conn = sqlite3.connect(f"file:{paths.default_db_path(lab.data)}?mode=ro", uri=True)
        try:
            left = conn.execute("SELECT count(*) FROM working_memory WHERE session_id = ?",
                                (ORPHAN,)).fetchone()[0]
        finally:
            conn.close()
        assert left == 0

    return Scenario("adopt", prepare, done)


def rebind_scenario(lab: Lab) -> Scenario:
    state: dict[str, str] = {}

    def prepare() -> tuple[list[str], Path]:
        lab.reset(legacy=False)
        first = bind_repo(lab.projects / "first" / "service",
                          "66666666-2222-4333-8444-555555555555")
        driver.reset_cache()
        ctx = resolve_memory_context(first.path, None, load_settings())
        assert storage.remember(ctx, "The service exposes metrics on port 9102.").id
        driver.reset_cache()
        state["namespace"] = first.namespace
        checkout = lab.projects / "laptop" / "service"
        checkout.mkdir(parents=True)
        lab.snapshot_rows()
        return ["rebind", str(checkout), "--from", first.namespace], lab.projects

    def done() -> None:
        checkout = lab.projects / "laptop" / "service"
        assert (checkout / identity.MARKER_NAME).exists()
        assert namespace_of(checkout) == state["namespace"]
        assert namespace_of(lab.projects / "first" / "service") == state["namespace"]
        assert len(Index(lab.data).load().workspaces) == 2

    return Scenario("rebind", prepare, done)


def migrate_scenario(lab: Lab) -> Scenario:
    def prepare() -> tuple[list[str], Path]:
        lab.reset(legacy=True)
        repo = bind_repo(lab.projects / "owned-repo").path
        lab.snapshot_rows()
        return ["migrate", "run", "--legacy-dsh", "--yes"], repo

    def done() -> None:
        import sqlite3

        conn = sqlite3.connect(f"file:{paths.default_db_path(lab.data)}?mode=ro", uri=True)
        try:
            left = conn.execute("SELECT count(*) FROM working_memory WHERE session_id IN "
                                "('dsh_s1', 'dsh_s2')").fetchone()[0]
        finally:
            conn.close()
        assert left == 0

    return Scenario("migrate run", prepare, done)


SCENARIOS = {"bind": bind_scenario, "adopt": adopt_scenario, "rebind": rebind_scenario,
             "migrate run": migrate_scenario}


@pytest.fixture
def lab(data_dir: Path, projects: Path, dsh_template: Path) -> Lab:
    return Lab(data_dir, projects, dsh_template)


def rerun_completes(lab: Lab, scenario: Scenario, argv: list[str], cwd: Path) -> None:
    again = run(argv, cwd)
    assert again.returncode == 0, (scenario.name, again.stderr)
    assert "Traceback" not in again.stderr
    lab.check_no_leftovers()
    scenario.done()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_killed_at_each_fault_point_in_turn(lab: Lab, name: str) -> None:
    scenario = SCENARIOS[name](lab)
    passed = 0
    for n in range(1, MAX_POINTS + 1):
        argv, cwd = scenario.prepare()
        killed = run(argv, cwd, fault=f"*:{n}")
        if killed.returncode != EXIT_CODE:
            # Fewer than n points on the way: the run went through untouched.
            assert killed.returncode == 0, killed.stderr
            scenario.done()
            break
        passed += 1
        lab.check_after_kill()
        rerun_completes(lab, scenario, argv, cwd)
    else:
        pytest.fail(f"{name} passed more than {MAX_POINTS} fault points")
    assert passed >= 2, f"{name} passed only {passed} fault point(s)"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_killed_at_a_random_moment(lab: Lab, name: str) -> None:
    scenario = SCENARIOS[name](lab)
    argv, cwd = scenario.prepare()
    started = time.monotonic()
    assert run(argv, cwd).returncode == 0
    duration = time.monotonic() - started
    scenario.done()
    chance = random.Random(f"{name}-{ROUNDS}")
    for _ in range(ROUNDS):
        argv, cwd = scenario.prepare()
        env = dict(os.environ)
        env.pop("MNEMO_TEST_FAULT", None)
        process = subprocess.Popen([mnemo_executable(), *argv], cwd=cwd, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(chance.uniform(0.2, 1.0) * duration)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        lab.check_after_kill()
        rerun_completes(lab, scenario, argv, cwd)
