#!/usr/bin/env bash
# Sets up .venv from the project's own files and runs kbatch.
# With no arguments: the simulator on the first example (a kube-batch gang job).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip setuptools wheel
.venv/bin/python -m pip install -q -e .
if [ $# -eq 0 ]; then
  set -- simulate examples/gang-job.yaml
fi
exec .venv/bin/kbatch "$@"
