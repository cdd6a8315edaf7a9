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
