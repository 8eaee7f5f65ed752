#!/usr/bin/env bash
# JobSet's controller and CRD for the e2e tests (DESIGN.md §15), from the Go
# module proxy alone: the controller is the main package (main.go at the root)
# of the module sigs.k8s.io/jobset at JOBSET_VERSION, built in a throw-away
# wrapper module; its CRD is the module's own config/components/crd/bases file.
# Both end up in a cache folder outside the repository, which is printed as the
# last line on stdout (progress goes to stderr):
#
#     bin=$(scripts/provision-jobset.sh) && KBATCH_JOBSET_ASSETS=$bin pytest tests/e2e/test_jobset.py
#
# The folder holds `jobset-controller` and `jobset.x-k8s.io_jobsets.yaml`.
# The wrapper requires the module and names its root package as a tool; its
# go.mod has no replace directives today, but any it gains are copied into the
# wrapper (a replace in a dependency's go.mod is ignored, so a build without
# them would not be the release's). `go mod tidy` resolves the rest.
#
# Go comes from this machine (GOTOOLCHAIN=local; the release's go.mod says which
# Go it needs: 1.26.0 for v0.12.0), or, with KBATCH_GOTOOLCHAIN=goX.Y.Z, the
# toolchain module the Go proxy serves. Nothing is downloaded from anywhere
# else. A first build takes about 11 minutes on 2 busy cores (less with the
# control plane's Go caches warm: they share client-go and its dependencies);
# the time is logged and kept in the cache folder's BUILD_INFO. A run with the
# files cached only checks them.
#
# The proxy does not list this module's versions (GET .../@v/list answers 403),
# so the newest was found by asking for releases by name: v0.12.0 is served,
# v0.12.1 and v0.13.0 are not.
#
# Environment:
#   KBATCH_CACHE        cache root (default ~/.cache/kbatch)
#   KBATCH_GO           the go command (default: go on PATH)
#   KBATCH_GOTOOLCHAIN  GOTOOLCHAIN for the build (default local)
#   KBATCH_KEEP_WORK=1  keep the work folder (the wrapper module and build log)
set -euo pipefail

readonly MODULE=sigs.k8s.io/jobset
readonly JOBSET_VERSION=v0.12.0 # the newest release the Go module proxy serves, pinned
readonly CONTROLLER=jobset-controller
readonly CRD=jobset.x-k8s.io_jobsets.yaml

cache_root=${KBATCH_CACHE:-$HOME/.cache/kbatch}
home=$cache_root/jobset/$JOBSET_VERSION
bin=$home/bin
work=$cache_root/work/jobset-$JOBSET_VERSION

LOG_NAME=provision-jobset
lock=$home/.lock
have_all() { [[ -x $bin/$CONTROLLER && -s $bin/$CRD ]]; }
# shellcheck source=lib/cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cache.sh"

# ---- Go ---------------------------------------------------------------------
go=${KBATCH_GO:-$(command -v go || true)}
[[ -n $go && -x $go ]] || die "no go command on PATH (set KBATCH_GO): JobSet is built from its Go module"
export GOTOOLCHAIN=${KBATCH_GOTOOLCHAIN:-local}
export GOWORK=off GO111MODULE=on GOFLAGS=-buildvcs=false
unset GOBIN GOOS GOARCH

rm -rf "$work"
mkdir -p "$work"
build_log=$work/build.log
: >"$build_log"

run_go() { # what args...
    local what=$1
    shift
    if ! (cd "$work" && "$go" "$@") >>"$build_log" 2>&1; then
        tail -n 30 "$build_log" >&2
        die "$what failed: go $* (in $work; full log: $build_log)"
    fi
}

step "downloading $MODULE@$JOBSET_VERSION from the Go module proxy"
json=$(cd "$work" && "$go" mod download -json "$MODULE@$JOBSET_VERSION" 2>>"$build_log") || {
    tail -n 10 "$build_log" >&2
    die "go mod download $MODULE@$JOBSET_VERSION failed (is the Go module proxy reachable? GOPROXY=$("$go" env GOPROXY))"
}
field() { sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}\$/\1/p" <<<"$json"; }
gomod=$(field GoMod)
dir=$(field Dir)
[[ -f $gomod && -d $dir ]] || die "go mod download $MODULE@$JOBSET_VERSION gave no go.mod or source folder"
[[ -f $dir/main.go ]] || die "$MODULE@$JOBSET_VERSION has no main.go at its root: the controller's main package moved"
crd_src=$dir/config/components/crd/bases/$CRD
[[ -f $crd_src ]] || die "$MODULE@$JOBSET_VERSION has no $crd_src"

go_version=$("$go" env GOVERSION)
step "$MODULE $JOBSET_VERSION needs $(awk '$1 == "go" { print "go " $2 }' "$gomod"); building with $go_version (GOTOOLCHAIN=$GOTOOLCHAIN)"

# The wrapper: the module's go/godebug lines, the module required, its root
# package as a tool, and the module's own replace directives (single-line and
# block forms), which Go ignores in a dependency's go.mod.
{
    printf 'module kbatch.local/jobset\n\n'
    awk '$1 == "go" || $1 == "godebug" { print }' "$gomod"
    printf '\nrequire %s %s\n\ntool %s\n' "$MODULE" "$JOBSET_VERSION" "$MODULE"
    awk '
        /^replace[ \t]*\(/ { block = 1; print; next }
        block { print; if ($0 ~ /^\)/) block = 0; next }
        /^replace[ \t]/ { print }
    ' "$gomod"
} >"$work/go.mod"
if grep -q '=> *\.' "$work/go.mod"; then
    die "$MODULE@$JOBSET_VERSION's go.mod replaces a module by a local folder: the wrapper does not fit this release"
fi

step "resolving the controller's dependencies (go mod tidy; log: $build_log)"
run_go "resolving JobSet's dependencies" mod tidy
ldflags="-s -w -X $MODULE/pkg/version.GitVersion=$JOBSET_VERSION"
step "building the controller (log: $build_log)"
run_go "building JobSet's controller" build -ldflags "$ldflags" -o "$work/out/$CONTROLLER" "$MODULE"
[[ -x $work/out/$CONTROLLER ]] || die "the build did not produce $work/out/$CONTROLLER"

place "$crd_src" "$CRD" 0644
place "$work/out/$CONTROLLER" "$CONTROLLER" 0755
have_all || die "internal: files missing from $bin"

took=$((SECONDS - started))
{
    printf 'jobset %s (%s)\ngo %s\n' "$JOBSET_VERSION" "$MODULE" "$go_version"
    printf 'built %s in %d s (%d min) on %s cores\n' \
        "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$took" "$(((took + 30) / 60))" "$(nproc 2>/dev/null || echo '?')"
} >"$home/BUILD_INFO"
if [[ -z ${KBATCH_KEEP_WORK:-} ]]; then
    rm -rf "$work"
fi
step "done: JobSet's controller took ${took}s to build ($home/BUILD_INFO)"
echo "$bin"
