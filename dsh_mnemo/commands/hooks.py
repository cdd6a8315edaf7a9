"""`hooks install|uninstall|status|test`: mnemo's entries in a harness's config, as reports."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ExitCode
from ..harnesses import install as installer
from ..report import Report

if TYPE_CHECKING:  # pragma: no cover
    from ..harnesses.probe import HookTest


def install(harness: str, project: Path | None = None, trust: bool = False) -> Report:
    result = installer.install(harness, project, trust=trust)
    report = Report("hooks-install", result)
    if result.config_dir_env:
        report.note(f"{result.config_dir_env} is set: wrote {result.config_path}, where "
                    f"{harness} reads its config while that variable is set.")
    return report


def uninstall(harness: str, project: Path | None = None) -> Report:
    return Report("hooks-uninstall", installer.uninstall(harness, project))


def status(harness: str, project: Path | None = None) -> Report:
    """Exits 8 (action needed, as `hooks test`) when mnemo's hooks are there but will
    not run or not work: untrusted, in an untrusted folder, incomplete or broken; or
    when the harness's config file is there but cannot be read or parsed."""
    from ..fsutil import unreadable

    result = installer.harness_status(harness, project)
    report = Report("hooks-status", result)
    for problem in result.problems:
        report.warn(problem)
    folder = result.folder_trust
    blocked = folder is not None and not folder["trusted"]
    if blocked:
        from ..harnesses.gemini import trust_fix

        report.warn(f"Gemini CLI runs no hooks at all in {folder['path']} "
                    f"({folder['detail']}): {trust_fix(folder['path'])}")
    if ((result.installed or result.commands) and (not result.ok or blocked)) \
            or unreadable(result.config_path, result.config_exists):
        report.exit_code = ExitCode.PENDING
    return report


def test(harness: str, project: Path | None = None, prompt: str | None = None) -> Report:
    """Run the installed prompt hook with a sample event here; never leaves a memory."""
    from ..harnesses import probe

    result = probe.run(harness, project, prompt=prompt)
    _forget_test_turn(result)
    report = Report("hooks-test", result)
    if not result.would_run:
        report.exit_code = ExitCode.PENDING
    return report


def _forget_test_turn(result: HookTest) -> None:
    """Drop the pending turn the test prompt left in the spool (it is no memory)."""
    import contextlib

    from ..hook.spool import Spool

    spool = Spool(Path(result.data_dir), result.harness, result.session_id, result.cwd)
    if not spool.path.exists():
        return
    # The session id is this test's own (TEST_SESSION_PREFIX + a fresh uuid):
    # nothing else shares the file, so it goes whole, under its lock.
    from ..fsutil import file_lock

    with contextlib.suppress(Exception), file_lock(spool.lock_path, timeout=2.0,
                                                   what="hook spool lock"):
        spool.path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        spool.lock_path.unlink()
