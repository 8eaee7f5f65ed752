#!/usr/bin/env bash
# The newest supported control plane for the e2e tests (DESIGN.md §9), built from
# the Go module proxy alone: kube-apiserver, kube-controller-manager and
# kube-scheduler from the module k8s.io/kubernetes at K8S_VERSION, and etcd from
# go.etcd.io/etcd/server/v3 at the version that release's go.mod names. They end
# up in a cache folder outside the repository, which is printed as the last line
# on stdout (progress goes to stderr). Run it through
#
#     bin=$(scripts/provision-control-plane.sh) && KUBEBUILDER_ASSETS=$bin pytest tests/e2e
#
# `go install MODULE/cmd/X@VERSION` refuses both modules: their go.mod files
# carry replace directives (Kubernetes points its k8s.io/* libraries at its own
# ./staging folders). So each is built inside a throw-away wrapper module in the
# work folder that requires it and, for Kubernetes, replaces every staging
# library by its published release (k8s.io/X v0.MINOR.PATCH, which is what
# staging holds at that tag); `go mod tidy` resolves the rest, `go build -o`
# builds the commands the wrapper names as tools.
#
# Go comes from this machine (GOTOOLCHAIN=local; the release's go.mod says which
# Go it needs), or, with KBATCH_GOTOOLCHAIN=goX.Y.Z, the toolchain module the Go
# proxy serves. Nothing is downloaded from anywhere else. The module cache and
# the build cache are Go's own (GOMODCACHE, GOCACHE): a second build, or one
# after another checkout's, mostly links.
#
# A first build takes about 12 minutes on 2 cores (logged at the end, and kept in
# the cache folder's BUILD_INFO); a run with the binaries cached only checks them.
#
# Environment:
#   KBATCH_CACHE        cache root (default ~/.cache/kbatch)
#   KBATCH_GO           the go command (default: go on PATH)
#   KBATCH_GOTOOLCHAIN  GOTOOLCHAIN for the build (default local)
#   KBATCH_KEEP_WORK=1  keep the work folder (the wrapper modules and build log)
set -euo pipefail

readonly K8S_MODULE=k8s.io/kubernetes
readonly K8S_VERSION=v1.37.2 # the newest release the Go module proxy serves, pinned
readonly ETCD_MODULE=go.etcd.io/etcd/server/v3
readonly COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler)
readonly BINARIES=(etcd "${COMMANDS[@]}")

k8s_line=${K8S_VERSION#v}
k8s_line=${k8s_line%.*}        # 1.37
staging_version=v0.${K8S_VERSION#v1.} # v0.37.2: the staging libraries' tag for this release

cache_root=${KBATCH_CACHE:-$HOME/.cache/kbatch}
plane=$cache_root/control-plane/v$k8s_line
bin=$plane/bin
work=$plane/work

LOG_NAME=provision
lock=$plane/.lock
have_all() {
    local b
    for b in "${BINARIES[@]}"; do [[ -x $bin/$b ]] || return 1; done
}
# shellcheck source=lib/cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cache.sh"

# ---- Go ---------------------------------------------------------------------
go=${KBATCH_GO:-$(command -v go || true)}
[[ -n $go && -x $go ]] || die "no go command on PATH (set KBATCH_GO): the control plane is built from Go modules"
export GOTOOLCHAIN=${KBATCH_GOTOOLCHAIN:-local}
export GOWORK=off GO111MODULE=on GOFLAGS=-buildvcs=false
unset GOBIN GOOS GOARCH

mkdir -p "$work"
build_log=$work/build.log
: >"$build_log"

# Run go in a folder, its output into the build log; on failure show the log's tail.
run_go() { # dir what args...
    local dir=$1 what=$2
    shift 2
    if ! (cd "$dir" && "$go" "$@") >>"$build_log" 2>&1; then
        tail -n 30 "$build_log" >&2
        die "$what failed: go $* (in $dir; full log: $build_log)"
    fi
}

# The path of a module's go.mod in the module cache, downloading the module.
module_gomod() { # module@version
    local json
    json=$(cd "$work" && "$go" mod download -json "$1" 2>>"$build_log") || {
        tail -n 10 "$build_log" >&2
        die "go mod download $1 failed (is the Go module proxy reachable? GOPROXY=$("$go" env GOPROXY))"
    }
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$json"
}

# The `go` and `godebug` lines of a go.mod, for a wrapper that builds its commands
# as the module itself would be built.
go_lines() { awk '$1 == "go" || $1 == "godebug" { print }' "$1"; }

step "reading $K8S_MODULE@$K8S_VERSION's go.mod from the Go module proxy"
k8s_gomod=$(module_gomod "$K8S_MODULE@$K8S_VERSION")
[[ -f $k8s_gomod ]] || die "go mod download $K8S_MODULE@$K8S_VERSION gave no go.mod"
etcd_version=$(awk -v m="$ETCD_MODULE" '$1 == m { print $2; exit }' "$k8s_gomod")
[[ -n $etcd_version ]] || die "$K8S_MODULE@$K8S_VERSION's go.mod names no $ETCD_MODULE"
go_version=$("$go" env GOVERSION)
step "$K8S_MODULE $K8S_VERSION needs $(awk '$1 == "go" { print "go " $2 }' "$k8s_gomod"); building with $go_version (GOTOOLCHAIN=$GOTOOLCHAIN); etcd $etcd_version"

# The wrapper modules. Args: folder module requirement go.mod-lines tools...
write_wrapper() {
    local dir=$1 module=$2 require=$3 lines=$4
    shift 4
    rm -rf "$dir"
    mkdir -p "$dir"
    {
        printf 'module %s\n\n%s\n\nrequire %s\n\ntool (\n' "$module" "$lines" "$require"
        printf '\t%s\n' "$@"
        printf ')\n'
    } >"$dir/go.mod"
}

# ---- kube-apiserver, kube-controller-manager, kube-scheduler -------------------
if [[ ! -x $bin/kube-apiserver || ! -x $bin/kube-controller-manager || ! -x $bin/kube-scheduler ]]; then
    k8s_work=$work/kubernetes
    tools=()
    for c in "${COMMANDS[@]}"; do tools+=("$K8S_MODULE/cmd/$c"); done
    write_wrapper "$k8s_work" kbatch.local/control-plane "$K8S_MODULE $K8S_VERSION" \
        "$(go_lines "$k8s_gomod")" "${tools[@]}"
    # Every `k8s.io/X => ./staging/...` of the release becomes `k8s.io/X => k8s.io/X v0.N.P`.
    replaces=$(awk -v v="$staging_version" '
        /=> *\.\/staging\// { for (i = 1; i < NF; i++) if ($(i + 1) == "=>") print "\t" $i " => " $i " " v }
    ' "$k8s_gomod")
    [[ -n $replaces ]] || die "$K8S_MODULE@$K8S_VERSION's go.mod replaces no ./staging library: the wrapper does not fit this release"
    printf '\nreplace (\n%s\n)\n' "$replaces" >>"$k8s_work/go.mod"
    step "resolving the dependencies of ${COMMANDS[*]} (go mod tidy; log: $build_log)"
    run_go "$k8s_work" "resolving Kubernetes' dependencies" mod tidy
    # What hack/lib/version.sh stamps into a release build: /version and --version
    # answer the release, not v0.0.0-master.
    release_date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "${k8s_gomod%.mod}.info" 2>/dev/null || true)
    minor=${K8S_VERSION#v1.}
    minor=${minor%%.*}
    ldflags="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
        ldflags+=" -X $pkg.gitTreeState=clean${release_date:+ -X $pkg.buildDate=$release_date}"
    done
    step "building ${COMMANDS[*]} (log: $build_log; about 12 minutes on 2 cores with cold Go caches)"
    run_go "$k8s_work" "building Kubernetes" build -ldflags "$ldflags" -o "$work/out/" "${tools[@]}"
    for c in "${COMMANDS[@]}"; do
        [[ -x $work/out/$c ]] || die "the build did not produce $work/out/$c"
        [[ $("$work/out/$c" --version) == *"$K8S_VERSION"* ]] ||
            die "$work/out/$c says $("$work/out/$c" --version), not $K8S_VERSION"
    done
    for c in "${COMMANDS[@]}"; do place "$work/out/$c" "$c"; done
    step "built $("$bin/kube-apiserver" --version)"
fi

# ---- etcd -----------------------------------------------------------------------
if [[ ! -x $bin/etcd ]]; then
    etcd_gomod=$(module_gomod "$ETCD_MODULE@$etcd_version")
    [[ -f $etcd_gomod ]] || die "go mod download $ETCD_MODULE@$etcd_version gave no go.mod"
    # The server module's root package is etcd's main (a wrapper of etcdmain).
    etcd_work=$work/etcd
    write_wrapper "$etcd_work" kbatch.local/etcd "$ETCD_MODULE $etcd_version" \
        "$(go_lines "$etcd_gomod")" "$ETCD_MODULE"
    step "resolving etcd $etcd_version's dependencies (go mod tidy)"
    run_go "$etcd_work" "resolving etcd's dependencies" mod tidy
    step "building etcd $etcd_version"
    run_go "$etcd_work" "building etcd" build -ldflags "-s -w" -o "$work/out/etcd" "$ETCD_MODULE"
    [[ $("$work/out/etcd" --version) == *"etcd Version: ${etcd_version#v}"* ]] ||
        die "$work/out/etcd is not etcd $etcd_version: $("$work/out/etcd" --version | head -n 1)"
    place "$work/out/etcd" etcd
    step "etcd: $("$bin/etcd" --version | head -n 1)"
fi

have_all || die "internal: binaries missing from $bin"
took=$((SECONDS - started))
{
    printf 'kubernetes %s (%s)\netcd %s (%s)\ngo %s\n' \
        "$K8S_VERSION" "$K8S_MODULE" "$etcd_version" "$ETCD_MODULE" "$go_version"
    printf 'built %s in %d s (%d min) on %s cores\n' \
        "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$took" "$(((took + 30) / 60))" "$(nproc 2>/dev/null || echo '?')"
} >"$plane/BUILD_INFO"
if [[ -z ${KBATCH_KEEP_WORK:-} ]]; then
    rm -rf "$work"
fi
step "done: the control plane took ${took}s to build (${plane}/BUILD_INFO)"
echo "$bin"
