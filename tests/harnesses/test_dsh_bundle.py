"""The DSH bundle's own tests (`node --test hooks/dsh/test/`), run from pytest.

They run with `MNEMO_BIN` set to the installed console script (next to this
interpreter) and the isolated HOME, data dir and config of `conftest.py`, so
the integration test drives this checkout's mnemo and no real store.  Skipped
when Node.js (20+) is not installed; fails when any node test fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, mnemo_executable

pytestmark = pytest.mark.e2e

ROOT = REPO_ROOT
BUNDLE_TESTS = ROOT / "hooks" / "dsh" / "test"
MIN_NODE = 20


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the DSH bundle's tests (hooks/dsh/test/) need Node.js "
                    f"{MIN_NODE}+")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
    match = re.match(r"v(\d+)\.", version.strip())
    if not match or int(match.group(1)) < MIN_NODE:
        shown = version.strip() or "(unknown version)"
        pytest.skip(f"node {shown} is too old for the DSH bundle's tests: they need Node.js "
                    f"{MIN_NODE}+")
    return node


def test_the_dsh_bundle_node_tests_pass(isolated_env: Path) -> None:
    node = node_or_skip()
    env = dict(os.environ)
    env["MNEMO_BIN"] = mnemo_executable()
    env["MNEMOSYNE_NO_EMBEDDINGS"] = "1"
    env.pop("NODE_OPTIONS", None)
    env.pop("NODE_TEST_CONTEXT", None)  # set when pytest itself runs under `node --test`
    result = subprocess.run([node, "--test", str(BUNDLE_TESTS)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    summary = "\n".join(line for line in result.stdout.splitlines()
                        if re.match(r"^# (tests|pass|fail|cancelled|skipped) ", line))
    assert result.returncode == 0, (
        f"node --test hooks/dsh/test/ failed (exit {result.returncode}):\n{summary}\n\n"
        f"{result.stdout[-12000:]}\n{result.stderr[-4000:]}")
    # The integration test ran against the real mnemo, not skipped.
    assert re.search(r"^# skipped 0$", result.stdout, flags=re.MULTILINE), summary
    assert re.search(r"^# fail 0$", result.stdout, flags=re.MULTILINE), summary
