"""`mnemo doctor`: read-only checks that say what is wrong and how to fix it."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_mnemo import doctor
from dsh_mnemo.cli import app
from dsh_mnemo.errors import ExitCode
from tests.conftest import REPO_ROOT, mnemo_executable

runner = CliRunner()


@pytest.fixture(autouse=True)
def fake_crontab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `crontab` on PATH that lists what the test wrote, never the real user's."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    listing = tmp_path / "crontab.txt"
    script = bin_dir / "crontab"
    script.write_text(f'#!/bin/sh\n[ -f "{listing}" ] || {{ echo "no crontab" >&2; exit 1; }}\n'
                      f'cat "{listing}"\n', encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return listing


def run_doctor(*args: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["doctor", "--json", *args])
    assert "Traceback" not in result.output
    return result.exit_code, json.loads(result.stdout)


def by_name(report: dict) -> dict[str, dict]:
    return {check["name"]: check for check in report["checks"]}


def bound_repo_with_memory(make_repo, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = make_repo("proj")
    monkeypatch.chdir(repo)
    assert runner.invoke(app, ["bind"]).exit_code == 0
    result = runner.invoke(app, ["remember", "We deploy with make release"])
    assert result.exit_code == 0, result.output
    return repo


def snapshot(directory: Path) -> dict[str, bytes]:
    # `-shm` is SQLite's shared-memory index of the WAL: every reader, even a
    # read-only one, updates it; it holds no data.
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file() and
            not p.name.endswith("-shm")}


def test_a_fresh_install_is_healthy_and_doctor_creates_nothing(data_dir: Path) -> None:
    code, report = run_doctor()
    assert code == 0, report
    assert report["needs_action"] is False
    checks = by_name(report)
    assert checks["mnemosyne"]["status"] == "ok"
    assert checks["mnemosyne"]["details"]["version"].startswith("3.15")
    assert checks["data-dir"]["status"] == "ok"
    assert checks["index"]["status"] == "ok"
    assert checks["config"]["status"] == "ok"
    assert checks["workspace"]["status"] == "info"  # unbound: worth knowing, no action
    assert not data_dir.exists(), "doctor must not create the data directory"
    people = runner.invoke(app, ["doctor"])
    assert people.exit_code == 0
    assert "all good" in people.stdout
    if any(c["name"].startswith("hooks:") for c in report["checks"]):
        # Harnesses without hooks are one line for people, not one each.
        assert "hooks: no mnemo hooks installed for claude-code, codex" in people.stdout
        assert "hooks:codex" not in people.stdout
    # The closing count counts the lines shown.
    lines = [line.split()[0] for line in people.stdout.splitlines()
             if line.strip() and line.split()[0] in ("ok", "info", "warn", "fail", "unknown")]
    shown = ", ".join(f"{lines.count(s)} {s}" for s in ("ok", "info", "warn", "fail", "unknown")
                      if lines.count(s))
    assert f"all good ({shown})" in people.stdout


def test_a_workspace_whose_marker_was_deleted_is_a_warning_naming_the_rebind(
        make_repo, monkeypatch, data_dir) -> None:
    repo = bound_repo_with_memory(make_repo, monkeypatch)
    namespace = json.loads((data_dir / "identity.json").read_text())["workspaces"][0][
        "namespace"]
    (repo / ".mnemosyne-id").unlink()  # `git clean -x` of a git-ignored marker
    code, report = run_doctor()
    check = by_name(report)["workspace"]
    assert check["status"] == "warn", check
    assert f"mnemo rebind {repo.resolve()} --from {namespace}" in check["fix"]
    assert check["details"]["lost_namespace"] == namespace


def test_a_nul_in_a_recorded_path_of_the_index_is_not_a_crash(make_repo, monkeypatch,
                                                               data_dir) -> None:
    """A damaged (or hand-edited) index whose path holds a NUL: stat raises ValueError,
    not OSError; doctor, bind and workspaces carry on."""
    repo = bound_repo_with_memory(make_repo, monkeypatch)
    index = data_dir / "identity.json"
    raw = json.loads(index.read_text())
    raw["workspaces"][0]["previousPaths"] = [str(repo.parent / "lo\u0000st")]
    index.write_text(json.dumps(raw))
    code, report = run_doctor()
    assert by_name(report)["shared-markers"]["status"] == "ok", report
    loose = make_repo("loose")
    assert runner.invoke(app, ["bind", str(loose)]).exit_code == 0
    assert runner.invoke(app, ["workspaces"]).exit_code == 0


def test_a_bound_workspace_and_its_bank_check_out(make_repo, monkeypatch, data_dir) -> None:
    # Set up in a separate process: connections this process kept open could
    # checkpoint a WAL at any moment and muddle the read-only comparison.
    repo = make_repo("proj")
    monkeypatch.chdir(repo)
    for argv in (["bind"], ["remember", "We deploy with make release"]):
        subprocess.run([mnemo_executable(), *argv], check=True, capture_output=True,
                       timeout=60)
    before = snapshot(data_dir)
    code, report = run_doctor()
    assert code == 0, report
    checks = by_name(report)
    assert checks["workspace"]["status"] == "ok"
    assert checks["workspace"]["details"]["root"] == str(repo.resolve())
    banks = [c for c in report["checks"] if c["name"].startswith("bank:")]
    assert banks and all(c["status"] == "ok" for c in banks)
    assert snapshot(data_dir) == before, "doctor must be read-only"


def test_a_corrupt_index_is_reported_and_left_in_place(make_repo, monkeypatch,
                                                       data_dir) -> None:
    bound_repo_with_memory(make_repo, monkeypatch)
    index = data_dir / "identity.json"
    index.write_text('{"version": 1, "workspaces": [', encoding="utf-8")
    code, report = run_doctor()
    assert code == ExitCode.PENDING
    check = by_name(report)["index"]
    assert check["status"] == "fail"
    assert "mnemo workspaces" in check["fix"]
    assert "1 workspace entry recoverable" in check["fix"]  # from the last good copy
    assert index.read_text(encoding="utf-8") == '{"version": 1, "workspaces": ['
    assert not list(data_dir.glob("identity.json.corrupt-*")), "doctor moved the index"


def test_a_copied_checkout_that_shares_the_memory_is_a_warning(make_repo, monkeypatch,
                                                                  data_dir) -> None:
    original = bound_repo_with_memory(make_repo, monkeypatch).resolve()
    code, report = run_doctor()
    assert code == 0, report
    assert by_name(report)["shared-markers"]["status"] == "ok"
    copy = original.parent / "proj-copy"
    shutil.copytree(original, copy)
    # the copy is used, then the original again (the index follows the marker)
    for where in (copy, original):
        monkeypatch.chdir(where)
        assert runner.invoke(app, ["status"]).exit_code == 0
    code, report = run_doctor()
    assert code == ExitCode.PENDING
    check = by_name(report)["shared-markers"]
    assert check["status"] == "warn"
    assert f"{original}, {copy}" in check["summary"] and "share one memory" in check["summary"]
    command = f"rm {copy / '.mnemosyne-id'} && mnemo bind {copy}"
    assert command in check["fix"]
    assert check["details"]["shared"][0]["copies"] == [str(copy)]
    human = runner.invoke(app, ["doctor"])
    assert human.exit_code == ExitCode.PENDING and "shared-markers" in human.stdout
    # what the fix says gives the copy its own (empty) memory; the original keeps its own
    (copy / ".mnemosyne-id").unlink()
    assert runner.invoke(app, ["bind", str(copy)]).exit_code == 0
    code, report = run_doctor()
    assert by_name(report)["shared-markers"]["status"] == "ok", report
    monkeypatch.chdir(copy)
    assert "make release" not in runner.invoke(app, ["recall", "deploy"]).stdout
    monkeypatch.chdir(original)
    assert "make release" in runner.invoke(app, ["recall", "deploy"]).stdout


def _git(where: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@t",
                    *args], check=True, capture_output=True)


def test_clones_that_commit_the_marker_share_it_on_purpose(make_repo, monkeypatch,
                                                           data_dir) -> None:
    """Two clones of one repository with the marker committed (what `bind` intends when
    the marker is not ignored) share the memory on purpose: doctor says so (info) and
    exits 0.  A project made from it with a history of its own (a template that carried
    the marker) is a copy: a warning."""
    original = bound_repo_with_memory(make_repo, monkeypatch).resolve()
    _git(original, "add", ".mnemosyne-id")
    _git(original, "commit", "-q", "-m", "bind")
    clone = original.parent / "proj-clone"
    _git(original.parent, "clone", "-q", str(original), str(clone))
    for where in (clone, original):
        monkeypatch.chdir(where)
        assert runner.invoke(app, ["status"]).exit_code == 0
    code, report = run_doctor()
    check = by_name(report)["shared-markers"]
    assert check["status"] == "info", check
    assert code == 0, report
    assert str(clone) in check["summary"] and check["details"]["shared"][0]["through_git"]

    templated = original.parent / "from-template"
    shutil.copytree(original, templated)
    shutil.rmtree(templated / ".git")
    _git(templated, "init", "-q")
    _git(templated, "add", ".mnemosyne-id")
    _git(templated, "commit", "-q", "-m", "from the template")
    monkeypatch.chdir(templated)
    assert runner.invoke(app, ["status"]).exit_code == 0
    code, report = run_doctor()
    check = by_name(report)["shared-markers"]
    assert code == ExitCode.PENDING and check["status"] == "warn", check
    assert f"rm {templated / '.mnemosyne-id'} && mnemo bind {templated}" in check["fix"]
    assert check["details"]["shared"][0]["copies"] == [str(templated)]  # not the clone


def test_a_moved_project_is_not_a_shared_marker(make_repo, monkeypatch, data_dir) -> None:
    original = bound_repo_with_memory(make_repo, monkeypatch).resolve()
    moved = original.parent / "proj-moved"
    monkeypatch.chdir(original.parent)
    original.rename(moved)
    monkeypatch.chdir(moved)
    assert runner.invoke(app, ["status"]).exit_code == 0
    # the old place holds a new project now, with a marker of its own
    original.mkdir()
    monkeypatch.chdir(original)
    assert runner.invoke(app, ["bind", str(original)]).exit_code == 0
    code, report = run_doctor()
    assert by_name(report)["shared-markers"]["status"] == "ok", report


def test_a_damaged_bank_fails_quick_check(make_repo, monkeypatch, data_dir) -> None:
    bound_repo_with_memory(make_repo, monkeypatch)
    db = next((data_dir / "banks").glob("ws-*/mnemosyne.db"))
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    assert pages > 4
    with open(db, "r+b") as handle:  # scribble over b-tree pages, keep the header
        for page in range(2, pages, 2):
            handle.seek(page * page_size)
            handle.write(b"\xa5" * page_size)
    damaged = db.read_bytes()
    code, report = run_doctor()
    assert code == ExitCode.PENDING
    check = by_name(report)[f"bank:{db.parent.name}"]
    assert check["status"] == "fail"
    assert check["fix"]
    assert db.read_bytes() == damaged


def test_a_file_that_is_not_a_database_fails(data_dir: Path) -> None:
    bogus = data_dir / "banks" / "ws-bogus" / "mnemosyne.db"
    bogus.parent.mkdir(parents=True)
    bogus.write_bytes(b"this is not sqlite" * 100)
    code, report = run_doctor()
    assert code == ExitCode.PENDING
    assert by_name(report)["bank:ws-bogus"]["status"] == "fail"


def test_a_data_dir_that_is_a_file_fails(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x", encoding="utf-8")
    monkeypatch.setenv("MNEMO_DATA_DIR", str(blocker))
    code, report = run_doctor()
    assert code == ExitCode.PENDING
    check = by_name(report)["data-dir"]
    assert check["status"] == "fail"
    assert "MNEMO_DATA_DIR" in check["fix"]


def test_an_invalid_marker_is_a_warning_with_a_fix(make_repo, monkeypatch) -> None:
    repo = make_repo("broken")
    (repo / ".mnemosyne-id").write_text("mnemosyne-workspace-v1: not-a-uuid\n",
                                        encoding="utf-8")
    monkeypatch.chdir(repo)
    code, report = run_doctor()
    assert code == ExitCode.PENDING
    check = by_name(report)["workspace"]
    assert check["status"] == "warn"
    assert "not-a-uuid" in check["summary"]
    assert "remove" in check["fix"]
    # The PATH argument checks another directory instead.
    elsewhere = make_repo("fine")
    code, report = run_doctor(str(elsewhere))
    assert by_name(report)["workspace"]["status"] == "info"


def test_an_invalid_config_file_is_reported_not_fatal(tmp_path: Path) -> None:
    config = Path(os.environ["MNEMO_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("recall_mode: session\nauto_write_scope: sideways\n", encoding="utf-8")
    code, report = run_doctor()
    assert code == ExitCode.PENDING
    check = by_name(report)["config"]
    assert check["status"] == "fail"
    assert "auto_write_scope" in check["summary"]
    assert by_name(report)["mnemosyne"]["status"] == "ok"  # the rest still ran


def test_mnemosyne_outside_the_pinned_range_is_a_warning(monkeypatch) -> None:
    monkeypatch.setattr(doctor, "pinned_range", lambda: ">=9.0,<10")
    check = doctor.check_mnemosyne()
    assert check.status == "warn"
    assert "pip install" in check.fix


def test_a_missing_mnemosyne_package_fails_with_the_install_command(monkeypatch) -> None:
    monkeypatch.setattr(doctor, "MNEMOSYNE_DISTRIBUTION", "mnemosyne-memory-not-installed")
    check = doctor.check_mnemosyne()
    assert check.status == "fail"
    assert "not installed" in check.summary
    assert "pip install" in check.fix and ">=3.15.1,<3.16" in check.fix


def test_a_deleted_current_directory_is_reported(tmp_path: Path, monkeypatch) -> None:
    doomed = tmp_path / "doomed"
    doomed.mkdir()
    monkeypatch.chdir(doomed)
    doomed.rmdir()
    code, report = run_doctor()
    assert code == ExitCode.PENDING
    assert by_name(report)["workspace"]["summary"] == "the current directory no longer exists"


def test_the_pinned_range_is_the_one_the_package_declares() -> None:
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    assert '"mnemosyne-memory>=3.15.1,<3.16"' in pyproject
    assert doctor.pinned_range() == ">=3.15.1,<3.16" == doctor.MNEMOSYNE_RANGE


@pytest.mark.parametrize("version, spec, expected", [
    ("3.15.1", ">=3.15.1,<3.16", True),
    ("3.15.9", ">=3.15.1,<3.16", True),
    ("3.15.0", ">=3.15.1,<3.16", False),
    ("3.16.0", ">=3.15.1,<3.16", False),
    ("3.16", "<3.16", False),
    ("4.0.0rc1", ">=3", True),
])
def test_version_ranges(version: str, spec: str, expected: bool) -> None:
    assert doctor._satisfies(version, spec) is expected


def test_recent_hook_failures_are_warned_about_old_ones_are_not(data_dir: Path) -> None:
    log = data_dir / "logs" / "hook.log"
    log.parent.mkdir(parents=True)
    old = (datetime.now(timezone.utc) - timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%S")
    log.write_text(f"{old}Z error pid=1 claude-code prompt: DataError: old trouble\n",
                   encoding="utf-8")
    code, report = run_doctor()
    assert by_name(report)["hook-log"]["status"] == "ok"
    recent = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(f"{recent}Z error pid=2 codex turn-end: BusyError: database is locked\n")
    code, report = run_doctor()
    assert code == ExitCode.PENDING
    check = by_name(report)["hook-log"]
    assert check["status"] == "warn"
    assert check["details"]["recent_failures"] == 1
    assert "database is locked" in check["summary"]


def test_a_damaged_spool_set_aside_is_reported(data_dir: Path) -> None:
    code, report = run_doctor()
    assert by_name(report)["spool"]["status"] == "ok"
    spool = data_dir / "spool"
    spool.mkdir(parents=True)
    (spool / "3f9a.corrupt-1796603463346").write_text('{"version": 1, "turns": [{"id"')
    code, report = run_doctor()
    assert code == ExitCode.PENDING
    check = by_name(report)["spool"]
    assert check["status"] == "warn" and "3f9a.corrupt-1796603463346" in check["summary"]
    assert check["details"]["set_aside"] == ["3f9a.corrupt-1796603463346"]


def test_rows_close_to_the_trim_need_a_sleep(make_repo, monkeypatch, data_dir) -> None:
    bound_repo_with_memory(make_repo, monkeypatch)
    db = next((data_dir / "banks").glob("ws-*/mnemosyne.db"))
    aged = (datetime.now() - timedelta(hours=130)).isoformat()
    with sqlite3.connect(db) as conn:
        changed = conn.execute("UPDATE working_memory SET timestamp = ?", (aged,)).rowcount
    assert changed >= 1
    code, report = run_doctor()
    assert code == ExitCode.PENDING
    check = by_name(report)["consolidation"]
    assert check["status"] == "warn"
    assert check["details"]["rows_near_trim"] == {db.parent.name: changed}
    assert "mnemo sleep --all" in check["fix"]
    # Consolidating is the fix: afterwards the rows are safe from the trim.
    slept = runner.invoke(app, ["sleep", "--all"])
    assert slept.exit_code == 0, slept.output
    code, report = run_doctor()
    assert by_name(report)["consolidation"]["status"] in ("ok", "info")


def test_a_schedule_is_found_in_cron_or_a_systemd_timer(fake_crontab: Path,
                                                        tmp_path: Path) -> None:
    assert doctor.find_schedule() is None
    fake_crontab.write_text("# m h dom mon dow command\n17 3 * * * mnemo sleep --all\n",
                            encoding="utf-8")
    assert "mnemo sleep --all" in (doctor.find_schedule() or "")
    fake_crontab.write_text("# 17 3 * * * mnemo sleep --all\n", encoding="utf-8")
    assert doctor.find_schedule() is None  # commented out
    timer = Path(os.environ["XDG_CONFIG_HOME"]) / "systemd" / "user" / "mnemo-sleep.timer"
    timer.parent.mkdir(parents=True)
    timer.write_text("[Timer]\nOnCalendar=daily\n", encoding="utf-8")
    assert doctor.find_schedule() == str(timer)
    code, report = run_doctor()
    assert by_name(report)["consolidation"]["status"] == "ok"


def test_hook_verdicts_from_installer_status() -> None:
    absent = doctor.hook_check("codex", {"installed": False, "commands": []})
    assert absent.status == "info"
    partial = doctor.hook_check("codex", {"installed": False, "commands": ["mnemo hook x"],
                                          "problems": ["missing entries for Stop"]})
    assert partial.status == "warn"
    broken = doctor.hook_check("claude-code", {
        "installed": True, "commands": ["/nonexistent/bin/mnemo hook prompt"]})
    assert broken.status == "fail"
    assert "mnemo hooks install --harness claude-code" in broken.fix
    real = mnemo_executable()
    fine = doctor.hook_check("claude-code", {"installed": True, "ok": True, "problems": [],
                                             "commands": [f"{real} hook prompt"],
                                             "config_path": "/x/settings.json"})
    assert fine.status == "ok"
    pointing_nowhere = doctor.hook_check("gemini", {
        "installed": True, "ok": False, "commands": [f"{real} hook prompt"],
        "mnemo_exists": False, "mnemo_path": "/gone/mnemo",
        "problems": ["the hook command does not lead to an existing mnemo (/gone/mnemo)"]})
    assert pointing_nowhere.status == "fail"
    assert "/gone/mnemo" in pointing_nowhere.summary


def test_installed_hooks_are_checked_against_the_mnemo_they_run(data_dir: Path) -> None:
    installed = runner.invoke(app, ["hooks", "install", "--harness", "claude-code"])
    assert installed.exit_code == 0, installed.output
    code, report = run_doctor()
    assert by_name(report)["hooks:claude-code"]["status"] == "ok"
    assert by_name(report)["hooks:codex"]["status"] == "info"
    # Break it the way a reinstall or a deleted virtualenv does: the entry now
    # runs a program that is gone.
    settings_file = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    text = settings_file.read_text(encoding="utf-8")
    wrapper = str(data_dir / "hooks" / "mnemo-hook.sh")
    assert wrapper in text
    settings_file.write_text(text.replace(wrapper, "/nonexistent/venv/bin/mnemo-hook.sh"),
                             encoding="utf-8")
    code, report = run_doctor()
    assert code == ExitCode.PENDING
    check = by_name(report)["hooks:claude-code"]
    assert check["status"] == "fail"
    assert "mnemo hooks install --harness claude-code" in check["fix"]
    people = runner.invoke(app, ["doctor"])
    assert "hooks:claude-code" in people.stdout and "fix:" in people.stdout


@pytest.mark.parametrize("harness", doctor.HARNESSES)
def test_after_install_then_uninstall_doctor_reports_no_hooks_anywhere(
        harness: str, data_dir: Path) -> None:
    """Every install writes the shared wrapper and no uninstall removes it (the other
    harnesses' entries run it): `generic`, which has no config file, must not be taken
    for installed because the wrapper is there."""
    install = ["hooks", "install", "--harness", harness] + (
        ["--trust"] if harness == "codex" else [])
    done = runner.invoke(app, install)
    assert done.exit_code == 0, done.output
    _, report = run_doctor()
    hooks = {c["name"]: c["status"] for c in report["checks"] if c["name"].startswith("hooks:")}
    assert hooks.pop(f"hooks:{harness}") == "ok"
    assert set(hooks.values()) == {"info"}, hooks  # the wrapper made no other one "installed"
    removed = runner.invoke(app, ["hooks", "uninstall", "--harness", harness, "--json"])
    assert removed.exit_code == 0, removed.output
    assert json.loads(removed.stdout)["action"] == "removed"
    again = runner.invoke(app, ["hooks", "uninstall", "--harness", harness, "--json"])
    assert json.loads(again.stdout)["action"] == "absent"
    code, report = run_doctor()
    hooks = {c["name"]: c for c in report["checks"] if c["name"].startswith("hooks:")}
    assert {c["status"] for c in hooks.values()} == {"info"}, hooks
    assert all(c["summary"] == "no mnemo hooks installed" for c in hooks.values())
    assert (data_dir / "hooks" / "mnemo-hook.sh").exists()  # kept, as said above
    assert code == 0 and "gemini-trust" not in by_name(report)
    people = runner.invoke(app, ["doctor"])
    assert "no mnemo hooks installed for claude-code, codex, gemini, cursor, qwen, generic" \
        in people.stdout
    status = json.loads(runner.invoke(app, ["hooks", "status", "--harness", "generic",
                                            "--json"]).stdout)
    assert status["installed"] is False and status["ok"] is False


def test_generic_hooks_whose_wrapper_is_gone_fail(data_dir: Path) -> None:
    assert runner.invoke(app, ["hooks", "install", "--harness", "generic"]).exit_code == 0
    (data_dir / "hooks" / "mnemo-hook.sh").unlink()
    code, report = run_doctor()
    check = by_name(report)["hooks:generic"]
    assert code == ExitCode.PENDING and check["status"] == "fail"
    assert "mnemo-hook.sh is missing" in check["summary"]
    assert "mnemo hooks install --harness generic" in check["fix"]


def test_every_harness_is_inspected_or_reported_unknown() -> None:
    checks = doctor.check_hooks()
    names = [c.name for c in checks]
    assert names == ["hooks"] or names == [f"hooks:{h}" for h in doctor.HARNESSES]
    assert all(c.status in ("ok", "info", "warn", "fail", "unknown") for c in checks)


@pytest.mark.e2e
def test_the_console_script_exits_8_when_action_is_needed(data_dir: Path,
                                                          tmp_path: Path) -> None:
    data_dir.mkdir()
    (data_dir / "identity.json").write_text("not json", encoding="utf-8")
    result = subprocess.run([mnemo_executable(), "doctor"], capture_output=True, text=True,
                            cwd=tmp_path, timeout=60, check=False)
    assert result.returncode == ExitCode.PENDING, result.stderr
    assert "index" in result.stdout and "fix:" in result.stdout
    assert "action needed" in result.stdout
    assert "Traceback" not in result.stderr
