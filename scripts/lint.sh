#!/usr/bin/env bash
# Lint and type check (docs/testing.md, "Lint and types"); scripts/test.sh runs it before pytest.
#   scripts/lint.sh          # ruff check, ruff format --check, mypy
# Fails when ruff finds a problem or mypy reports any error (there is no baseline of tolerated ones).
set -euo pipefail
cd "$(dirname "$0")/.."
paths=(ai_scientist tests bench scripts)
rc=0
echo "[lint] ruff check"
.venv/bin/ruff check "${paths[@]}" || rc=1
echo "[lint] ruff format --check"
.venv/bin/ruff format --check "${paths[@]}" || rc=1
echo "[lint] mypy (settings: pyproject [tool.mypy])"
.venv/bin/mypy || rc=1
exit "$rc"
