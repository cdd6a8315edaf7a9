"""End to end: the installed `mnemo` console script, SQLite files inspected directly."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from dsh_mnemo import paths
from dsh_mnemo.memory import driver, targets
from dsh_mnemo.memory import store as storage
from tests.conftest import configure, git_init, mnemo_executable
from tests.memory.conftest import age_rows, db_files, query

pytestmark = pytest.mark.e2e


def run(cwd: Path, *args: str, input: str | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # mnemo must set these itself (and keep upstream out of ~/.hermes).
    for name in ("MNEMOSYNE_DATA_DIR", "HERMES_HOME", "MNEMOSYNE_LLM_ENABLED", "TERM"):
        env.pop(name, None)
    proc = subprocess.run([mnemo_executable(), *args], cwd=cwd, env=env, input=input,
                          capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc


def run_json(cwd: Path, *args: str) -> dict:
    return json.loads(run(cwd, *args, "--json").stdout)


def bind(path: Path) -> dict:
    git_init(path)
    run(path, "bind")
    status = run_json(path, "status")
    assert status["bound"] is True
    return status


def test_two_repositories_recall_only_their_own_and_global(projects, data_dir, isolated_env):
    shop, blog = projects / "shop", projects / "blog"
    s_shop, s_blog = bind(shop), bind(blog)
    assert s_shop["bank"] != s_blog["bank"]

    shop_id = run_json(shop, "remember", "We deploy the shop with make release.")["id"]
    blog_id = run_json(blog, "remember", "The blog deploy runs from main via Netlify.")["id"]
    glob_id = run_json(shop, "remember", "--scope", "global",
                       "The user wants deploy steps spelled out.")["id"]
    stdin_id = json.loads(run(blog, "remember", "-", "--json",
                              input="Blog deploy previews live on branch URLs.\n").stdout)["id"]

    shop_hits = {r["id"]: r["level"] for r in run_json(shop, "recall", "deploy")["results"]}
    blog_hits = {r["id"]: r["level"] for r in run_json(blog, "recall", "deploy")["results"]}
    assert shop_hits == {shop_id: "workspace", glob_id: "global"}
    assert blog_hits == {blog_id: "workspace", stdin_id: "workspace", glob_id: "global"}
    human = run(shop, "recall", "deploy").stdout
    assert shop_id in human and blog_id not in human and "Netlify" not in human

    # The files: one bank per repository, global apart, no default db (nothing
    # was stored there, and importing upstream creates none).
    files = db_files(data_dir)
    assert set(files) == {"global", s_shop["bank"], s_blog["bank"]}
    assert Path(s_shop["db_path"]) == files[s_shop["bank"]]
    wm = "SELECT id, session_id, scope FROM working_memory ORDER BY id"
    assert query(files[s_shop["bank"]], wm) == [(shop_id, s_shop["namespace"], "session")]
    assert sorted(query(files[s_blog["bank"]], wm)) == sorted(
        [(blog_id, s_blog["namespace"], "session"), (stdin_id, s_blog["namespace"], "session")])
    assert query(files["global"], wm) == [(glob_id, "global", "global")]

    # forget across the boundary is refused; own and global work.
    refused = run(shop, "forget", blog_id, check=False)
    assert refused.returncode == 5 and "another workspace" in refused.stderr
    assert query(files[s_blog["bank"]], "SELECT COUNT(*) FROM working_memory") == [(2,)]
    run(blog, "forget", glob_id)
    assert query(files["global"], "SELECT COUNT(*) FROM working_memory") == [(0,)]
    assert not (isolated_env / "home" / ".hermes").exists()


def test_competition_aged_rows_and_cron_sleep(projects, data_dir, isolated_env):
    big, small = projects / "big", projects / "small"
    s_big, s_small = bind(big), bind(small)

    # A few hundred strongly matching rows in `big` (built in process: faster
    # than 300 subprocesses; every check below goes through the console script).
    configure()
    target = targets.Target(bank=s_big["bank"], namespace=s_big["namespace"], level="workspace")
    for i in range(300):
        storage.remember_at(target, f"release checklist item {i}: tag the release, run the "
                                    f"release checklist, publish the release notes")
    driver.reset_cache()

    old_id = run_json(small, "remember", "The release checklist needs a signed tag.")["id"]
    hits = run_json(small, "recall", "release checklist", "--top-k", "5")["results"]
    assert [h["id"] for h in hits] == [old_id]

    # A month passes without any sleep; the next write must not lose the row.
    small_db = Path(s_small["db_path"])
    age_rows(small_db, s_small["namespace"], hours=24 * 30)
    write = run_json(small, "remember", "Release notes go to the changelog.")
    assert write["consolidated_first"] == 1
    assert query(small_db, "SELECT consolidated_at IS NOT NULL FROM working_memory WHERE id = ?",
                 old_id) == [(1,)]
    hits = run_json(small, "recall", "signed tag", "--top-k", "5")["results"]
    assert old_id in {h["id"] for h in hits}

    # cron: `mnemo sleep --all` from anywhere, no terminal.
    big_db = Path(s_big["db_path"])
    age_rows(big_db, s_big["namespace"], hours=100)
    home = isolated_env / "home"
    dry = run_json(home, "sleep", "--all", "--dry-run")
    assert [(r["bank"], r["due"]) for r in dry["results"]] == [(s_big["bank"], 300)]
    assert query(big_db, "SELECT COUNT(*) FROM working_memory "
                         "WHERE consolidated_at IS NOT NULL") == [(0,)]
    slept = run(home, "sleep", "--all")
    assert "300 consolidated" in slept.stdout
    assert slept.stderr == ""  # cron mails any output: upstream's warnings stay quiet
    assert query(big_db, "SELECT COUNT(*) FROM working_memory "
                         "WHERE consolidated_at IS NULL") == [(0,)]
    assert query(big_db, "SELECT DISTINCT session_id FROM episodic_memory") == [
        (s_big["namespace"],)]
    assert run(home, "sleep", "--all").stdout.strip() == "Nothing due."
    stats = run_json(home, "stats", "--all")
    by_ns = {r["namespace"]: r for r in stats["namespaces"]}
    assert by_ns[s_big["namespace"]]["working_consolidated"] == 300
    assert by_ns[s_small["namespace"]]["working"] == 2
    assert not (home / ".hermes").exists()
    assert not paths.default_db_path(data_dir).exists()  # upstream's import-time init wrote none


@pytest.mark.parametrize("name, value, what", [
    ("MNEMOSYNE_WM_MAX_ITEMS", "abc", "a whole number"),
    ("MNEMOSYNE_WM_TTL_HOURS", "1.5", "a whole number"),  # upstream reads it with int()
    ("MNEMOSYNE_RECENCY_HALFLIFE", "soon", "a number"),
])
def test_a_mnemosyne_variable_it_cannot_read_is_a_config_error(
        projects, isolated_env, monkeypatch: pytest.MonkeyPatch, name: str, value: str,
        what: str) -> None:
    # Upstream's beam module converts these when it is imported: a ValueError
    # there was a traceback (exit 1) in every command that reads or writes.
    repo = projects / "app"
    bind(repo)
    monkeypatch.setenv(name, value)
    done = run(repo, "remember", "We deploy with make release", "--json", check=False)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    error = json.loads(done.stdout)
    assert error["error"] == f"the environment variable {name} must be {what}, not {value!r}"
    assert f"unset {name}" in error["hint"]
    doctor = json.loads(run(repo, "doctor", "--json", check=False).stdout)
    check = {c["name"]: c for c in doctor["checks"]}["config"]
    assert check["status"] == "fail" and name in check["summary"]
    monkeypatch.delenv(name)
    run(repo, "remember", "We deploy with make release")
