#!/usr/bin/env bash
# Set everything up (./.venv, and the harness CLIs from npm when npm is there)
# and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# The real-harness tests run Claude Code, Codex, Gemini CLI and Qwen Code from
# npm (pinned in tests/real_harness/package-lock.json, cached outside the repo).
# Without node/npm they are skipped with the reason (MNEMO_REQUIRE_HARNESSES=1
# makes that a failure, as in CI).
if command -v npm >/dev/null 2>&1; then
  bash scripts/install_harnesses.sh >/dev/null \
    || echo "test.sh: the harness CLIs could not be installed; real-harness tests skip" >&2
fi
export MNEMOSYNE_NO_EMBEDDINGS=1
.venv/bin/ruff check dsh_mnemo scripts bench tests
# Two workers, a test file each at a time: on a 2-core machine the same tree took
# 9:18 this way and 14:35 serially, one run after the other; about 8 minutes since.
exec .venv/bin/python -m pytest -q -n 2 --dist loadfile "$@"
