#!/usr/bin/env bash
# Sets up .venv from the project's own files and runs every check CI runs:
# ruff, mypy, the import-linter contracts, and the whole pytest suite.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip setuptools wheel
# strict editable mode lays the package out as it installs (kbatch.operators from
# operators/), so mypy and import-linter see the one importable root.
.venv/bin/python -m pip install -q -e '.[test]' --config-settings editable_mode=strict
.venv/bin/ruff check .
# mypy and lint-imports run outside the checkout so that ./kbatch does not shadow the
# installed layout.
(cd "$(mktemp -d)" && "$root/.venv/bin/mypy" --config-file "$root/pyproject.toml" -p kbatch)
(cd "$(mktemp -d)" && "$root/.venv/bin/lint-imports" --config "$root/.importlinter")
.venv/bin/pytest "$@"
