#!/usr/bin/env bash
# Sets up .venv from the project's own files and runs kbatch.
# With no arguments: the simulator on the first example (a kube-batch gang job), on the
# examples' cluster.
# Arguments are kbatch's own; relative paths in them are taken from where you are.
# The venv is (re)installed only when pyproject.toml or setup.py changed since.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
stamp="$venv/.kbatch-install-stamp"
wanted=$( (cat "$root/pyproject.toml" "$root/setup.py" 2>/dev/null || true) | sha256sum | cut -d" " -f1)
if [ ! -x "$venv/bin/kbatch" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip setuptools wheel
  "$venv/bin/python" -m pip install -q -e "$root"
  echo "$wanted" >"$stamp"
fi
if [ $# -eq 0 ]; then
  set -- simulate "$root/examples/sim-cluster.yaml" "$root/examples/gang-job.yaml"
fi
exec "$venv/bin/kbatch" "$@"
