"""Everything under the data dir is private to its user: 0700 directories, 0600 files.

Banks, WAL files, backups, journals and the index used to be 0644 (and
directories 0755) under the default umask, readable by every local user.
The processes here run with umask 022, the usual default.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from dsh_mnemo import fsutil, paths
from tests.conftest import mnemo_executable

pytestmark = pytest.mark.e2e


def mnemo(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([mnemo_executable(), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ),
                          preexec_fn=lambda: os.umask(0o022))
    if check:
        assert done.returncode == 0, done.stderr
    return done


def modes(root: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(root.lstat().st_mode)}
    for path in root.rglob("*"):
        if not path.is_symlink():
            found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def exposed(root: Path) -> dict[str, str]:
    return {name: oct(mode) for name, mode in modes(root).items() if mode & 0o077}


def test_a_new_install_is_private_from_the_first_file(make_repo, data_dir: Path) -> None:
    from tests.migrate.conftest import write_rows

    repo = make_repo("app")
    mnemo("bind", cwd=repo)
    mnemo("remember", "We deploy with make release", cwd=repo)
    mnemo("hooks", "install", "--harness", "generic", cwd=repo)
    # Legacy rows, so that a migration writes snapshots and a journal.
    write_rows(data_dir / "mnemosyne.db", "dsh_s1", "legacy", count=2, scratch=False)
    for written in data_dir.glob("mnemosyne.db*"):  # by the test, not by mnemo
        os.chmod(written, 0o600)
    mnemo("migrate", "run", "--legacy-dsh", "--yes", cwd=repo)
    mnemo("backups", "prune", "--dry-run", cwd=repo)
    (data_dir / "identity.json").write_text("corrupt")  # a recovery: aside copy, notices
    mnemo("status", cwd=repo)
    found = modes(data_dir)
    names = set(found)
    for expected in ("identity.json", "identity.json.last-good", "identity.json.lock",
                     "notices.json", "locks/migrate.lock", "hooks/mnemo-hook.sh",
                     "migrations", "backups"):
        assert expected in names, expected
    assert any(n.startswith("identity.json.corrupt-") for n in names)
    assert any(n.startswith("banks/ws-") and n.endswith("mnemosyne.db") for n in names)
    assert any(n.startswith("backups/") and n.endswith(".db") for n in names)
    assert any(n.startswith("migrations/") and n.endswith(".rows.json") for n in names)
    assert exposed(data_dir) == {}
    assert paths.data_dir_owner(data_dir) == (True, [])  # every name there is mnemo's
    assert found["."] == 0o700 and found["hooks/mnemo-hook.sh"] == 0o700
    assert found["identity.json"] == 0o600


def test_an_existing_install_is_made_private_on_its_first_run(make_repo,
                                                              data_dir: Path) -> None:
    repo = make_repo("app")
    mnemo("bind", cwd=repo)
    mnemo("remember", "We deploy with make release", cwd=repo)
    # As an earlier mnemo left it: world-readable, no stamp.
    os.unlink(paths.privacy_stamp(data_dir))
    for path in [data_dir, *data_dir.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    assert exposed(data_dir)
    # doctor only reports (and fixes nothing) ...
    doctor = mnemo("doctor", "--json", cwd=repo, check=False)
    check = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["privacy"]
    assert check["status"] == "warn" and "chmod -R go-rwx" in check["fix"]
    assert doctor.returncode == 8
    assert exposed(data_dir) and not paths.privacy_stamp(data_dir).exists()
    # ... the first other command fixes everything, once.
    mnemo("status", cwd=repo)
    assert exposed(data_dir) == {}
    assert paths.privacy_stamp(data_dir).exists()
    doctor = mnemo("doctor", "--json", cwd=repo, check=False)
    check = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["privacy"]
    assert check["status"] == "ok", check


def test_the_first_run_fix_keeps_the_owners_execute_bit_and_leaves_symlinks(
        tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    (root / "script.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "script.sh", 0o755)
    (root / "sub" / "file").write_text("x")
    os.chmod(root / "sub" / "file", 0o666)
    outside = tmp_path / "outside.txt"
    outside.write_text("not ours")
    os.chmod(outside, 0o644)
    (root / "link").symlink_to(outside)
    os.chmod(root / "sub", 0o777)
    assert fsutil.make_private(root) == []
    assert modes(root) == {".": 0o700, "script.sh": 0o700, "sub": 0o700, "sub/file": 0o600}
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644  # the link was not followed


def test_private_writes_whatever_the_umask(tmp_path: Path) -> None:
    where = tmp_path / "files"
    previous = os.umask(0)
    try:
        fsutil.atomic_write_text(where / "a.json", "{}")
        with fsutil.file_lock(where / "x.lock"):
            pass
        fd = fsutil.try_lock(where / "y.lock")
        assert fd is not None
        fsutil.release_lock(fd)
    finally:
        os.umask(previous)
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in where.iterdir()} == {
        "a.json": 0o600, "x.lock": 0o600, "y.lock": 0o600}


def test_secure_process_never_raises_and_skips_a_missing_data_dir(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        assert fsutil.secure_process(tmp_path / "nowhere") is False
        assert os.umask(0o022) == fsutil.PRIVATE_UMASK
        assert not (tmp_path / "nowhere").exists()
        a_file = tmp_path / "a-file"
        a_file.write_text("x")
        assert fsutil.secure_process(a_file) is False  # not a directory: nothing to do
    finally:
        os.umask(previous)


def test_a_directory_of_the_users_given_as_data_dir_keeps_every_mode(
        tmp_path: Path, make_repo) -> None:
    # `--data-dir ~` (or a project) used to chmod the whole tree 0700/0600 on the
    # first command, a read-only one included, and to leave a stamp there.
    home = tmp_path / "me"  # a home, as the tester's `--data-dir ~`
    site = home / "public_html"
    site.mkdir(parents=True)
    (site / "index.html").write_text("hi")
    (home / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(home / "run.sh", 0o755)
    os.chmod(site / "index.html", 0o644)
    for folder in (home, site):
        os.chmod(folder, 0o755)
    before = modes(home)
    repo = make_repo("app")
    mnemo("--data-dir", str(home), "config", "path", cwd=repo)
    assert modes(home) == before
    assert not paths.privacy_stamp(home).exists()
    # A write puts mnemo's files there, private; the user's keep their modes.
    mnemo("--data-dir", str(home), "remember", "--scope", "global", "We use tabs", cwd=repo)
    after = modes(home)
    assert {name: after[name] for name in before} == before
    assert after["banks"] == 0o700 and not exposed(home / "banks")
    assert not paths.privacy_stamp(home).exists()
    doctor = mnemo("--data-dir", str(home), "doctor", "--json", cwd=repo, check=False)
    check = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["privacy"]
    assert check["status"] == "warn" and "public_html" in check["details"]["foreign"]
    assert "chmod" not in check["fix"]
    # The same through MNEMO_DATA_DIR=. in a repository.
    (repo / "build.sh").write_text("#!/bin/sh\n")
    for path in (repo, repo / ".git", repo / "build.sh"):
        os.chmod(path, 0o755)
    done = subprocess.run([mnemo_executable(), "status"], cwd=repo, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "MNEMO_DATA_DIR": "."},
                          preexec_fn=lambda: os.umask(0o022))
    assert done.returncode == 0, done.stderr
    for path in (repo, repo / ".git", repo / "build.sh"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o755, path


def test_an_empty_data_dir_is_a_usage_error(make_repo) -> None:
    repo = make_repo("app")
    before = sorted(p.name for p in repo.iterdir())
    for args in (("--data-dir", "", "config", "path"),
                 ("--data-dir", "", "remember", "--scope", "global", "x"),
                 ("--data-dir=", "status", "--json")):
        done = mnemo(*args, cwd=repo, check=False)
        assert done.returncode == 2, (args, done.stderr)
        assert "--data-dir" in done.stderr and "empty" in done.stderr
    assert sorted(p.name for p in repo.iterdir()) == before


def test_only_a_directory_that_holds_mnemos_data_alone_is_mnemos(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    assert paths.data_dir_owner(data) == (False, [])  # empty: nothing to fix yet
    for name in ("identity.json", "identity.json.corrupt-20250101T000000-001", "banks",
                 "mnemosyne.db-wal", ".identity.json.abc123.tmp", "logs", "config.yaml"):
        (data / name).mkdir() if name in ("banks", "logs") else (data / name).write_text("")
    assert paths.data_dir_owner(data) == (True, [])
    (data / "notes.txt").write_text("mine")
    assert paths.data_dir_owner(data) == (False, ["notes.txt"])
    generic = tmp_path / "app"  # a project's own logs/ and config.yaml are not mnemo's
    (generic / "logs").mkdir(parents=True)
    (generic / "config.yaml").write_text("")
    assert paths.data_dir_owner(generic) == (False, [])


def test_a_hook_that_fails_before_anything_else_logs_into_a_private_folder(
        tmp_path: Path, data_dir: Path) -> None:
    # A hook with a bad argument logs before it has set the private umask: the
    # log's folder (and the data dir it may create) must still be 0700.
    done = mnemo("hook", "prompt", "--harness", "no-such-harness", cwd=tmp_path, check=False)
    assert done.returncode == 0 and done.stdout == ""
    log = data_dir / "logs" / "hook.log"
    assert "no-such-harness" in log.read_text()
    assert exposed(data_dir) == {}
