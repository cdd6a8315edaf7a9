"""Fixtures for the tests that run the real harness CLIs (marker `real_harness`).

`harness_bin` installs the four CLIs once per test session with
scripts/install_harnesses.sh (a cache outside the test's temporary HOME, so
the install is shared and fast when cached).  Without node or npm, or when the
install fails (offline), every real-harness test is skipped with the reason;
set MNEMO_REQUIRE_HARNESSES=1 (CI) to make that a failure instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real_harness.fake_model import FakeModel

REPO = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO / "scripts" / "install_harnesses.sh"
# The environment as the test run started, before the autouse fixture points
# HOME into a temporary directory: the install cache belongs to the real user.
START_ENV = dict(os.environ)


def _unavailable(reason: str) -> None:
    if START_ENV.get("MNEMO_REQUIRE_HARNESSES") == "1":
        pytest.fail(f"real harnesses required (MNEMO_REQUIRE_HARNESSES=1) but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def harness_bin() -> Path:
    """The node_modules/.bin directory holding claude, codex, gemini and qwen."""
    path = START_ENV.get("PATH", "")
    missing = [tool for tool in ("node", "npm") if shutil.which(tool, path=path) is None]
    if missing:
        _unavailable(f"{' and '.join(missing)} not installed: the real-harness tests need "
                     "Node.js and npm")
    try:
        done = subprocess.run(["bash", str(INSTALL_SCRIPT)], env=START_ENV, text=True,
                              capture_output=True, timeout=900, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        _unavailable("scripts/install_harnesses.sh took more than 15 minutes")
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])
        _unavailable(f"scripts/install_harnesses.sh could not install the harness CLIs "
                     f"(exit {done.returncode}; offline?): {tail}")
    return Path(lines[-1])


@pytest.fixture
def model() -> Iterator[FakeModel]:
    with FakeModel(reply="Noted, thanks.") as server:
        yield server
