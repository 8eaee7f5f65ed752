#!/usr/bin/env bash
# Sets up .venv from the project's own files and runs kbatch.
# With no arguments: the simulator on the first example (a kube-batch gang job), on the
# examples' cluster.
# Arguments are kbatch's own; relative paths in them are taken from where you are.
# The venv is (re)installed only when pyproject.toml or setup.py changed since. What
# venv, pip and setuptools say goes to .venv/install.log, shown only if the install
# fails: the output is kbatch's alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
stamp="$venv/.kbatch-install-stamp"
install_log="$venv/install.log"
wanted=$( (cat "$root/pyproject.toml" "$root/setup.py" 2>/dev/null || true) | sha256sum | cut -d" " -f1)
# Chained with &&: `set -e` does not apply inside a function called as an `if` test.
install() {
  python3 -m venv "$venv" &&
    "$venv/bin/python" -m pip install --upgrade pip setuptools wheel &&
    "$venv/bin/python" -m pip install -e "$root"
}
if [ ! -x "$venv/bin/kbatch" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  mkdir -p "$venv"
  if ! install >"$install_log" 2>&1; then
    cat "$install_log" >&2
    echo "run.sh: setting up $venv failed (this log is $install_log)" >&2
    exit 1
  fi
  echo "$wanted" >"$stamp"
fi
if [ $# -eq 0 ]; then
  set -- simulate "$root/examples/sim-cluster.yaml" "$root/examples/gang-job.yaml"
fi
exec "$venv/bin/kbatch" "$@"
