#!/usr/bin/env bash
# Set everything up (./.venv) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export MNEMOSYNE_NO_EMBEDDINGS=1
.venv/bin/ruff check dsh_mnemo scripts bench tests
exec .venv/bin/python -m pytest -q "$@"
