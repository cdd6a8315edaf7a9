#!/usr/bin/env bash
# Create ./.venv (if needed) with mnemo and its test tools installed.
# Needs only python3; used by scripts/demo.sh and .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]' 2>&1 \
  | grep -v "^WARNING: Location" || true
.venv/bin/mnemo --version >/dev/null
