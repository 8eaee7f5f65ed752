#!/usr/bin/env bash
# Armada's own scheduling simulator (github.com/armadaproject/armada/cmd/simulator),
# for `kbatch bench --armada-sim`, which runs it beside kbatch's simulator on the same
# workload and cluster files. Built from the Go module proxy alone at a pinned release
# and cached outside the repository; the cache folder is printed as the last line on
# stdout (progress goes to stderr):
#
#     bin=$(scripts/provision-armada-sim.sh) && kbatch bench --armada-sim --armada-bin "$bin/simulator"
#
# `go install .../cmd/simulator@VERSION` refuses the module: its go.mod carries replace
# directives (module to module, e.g. nhooyr.io/websocket to its GitHub home). So it is
# built inside a throw-away wrapper module in the work folder that requires the release,
# repeats those replacements, and names the command as a tool; `go mod tidy` resolves the
# rest and `go build` builds it. Nothing of Armada's lands in the repository.
#
# The proxy answers 403 for the module's version list (@v/list) but serves tagged
# releases by name; ARMADA_VERSION is the newest one it served when this was written.
#
# Go comes from this machine (GOTOOLCHAIN=local; the release's go.mod says which Go it
# needs), or, with KBATCH_GOTOOLCHAIN=goX.Y.Z, the toolchain module the proxy serves. A
# first build takes 10 to 25 minutes on 2 shared cores (kept in BUILD_INFO); a run
# with the binary cached only checks it.
#
# Environment:
#   KBATCH_CACHE        cache root (default ~/.cache/kbatch)
#   KBATCH_GO           the go command (default: go on PATH)
#   KBATCH_GOTOOLCHAIN  GOTOOLCHAIN for the build (default local)
#   KBATCH_KEEP_WORK=1  keep the work folder (the wrapper module and build log)
set -euo pipefail

readonly ARMADA_MODULE=github.com/armadaproject/armada
readonly ARMADA_VERSION=v0.22.7 # pinned: the newest release the Go module proxy serves
readonly COMMAND=$ARMADA_MODULE/cmd/simulator

cache_root=${KBATCH_CACHE:-$HOME/.cache/kbatch}
home=$cache_root/armada/$ARMADA_VERSION
bin=$home/bin
work=$home/work

LOG_NAME=provision-armada-sim
lock=$home/.lock
have_all() { [[ -x $bin/simulator ]]; }
# shellcheck source=lib/cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cache.sh"

go=${KBATCH_GO:-$(command -v go || true)}
[[ -n $go && -x $go ]] || die "no go command on PATH (set KBATCH_GO): Armada's simulator is built from Go modules"
export GOTOOLCHAIN=${KBATCH_GOTOOLCHAIN:-local}
export GOWORK=off GO111MODULE=on GOFLAGS=-buildvcs=false CGO_ENABLED=0
unset GOBIN GOOS GOARCH

rm -rf "$work"
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

step "reading $ARMADA_MODULE@$ARMADA_VERSION's go.mod from the Go module proxy"
json=$(cd "$work" && "$go" mod download -json "$ARMADA_MODULE@$ARMADA_VERSION" 2>>"$build_log") || {
    tail -n 10 "$build_log" >&2
    die "go mod download $ARMADA_MODULE@$ARMADA_VERSION failed (GOPROXY=$("$go" env GOPROXY))"
}
gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
[[ -f $gomod ]] || die "go mod download $ARMADA_MODULE@$ARMADA_VERSION gave no go.mod"

# The release's replace lines, single or in a block; a local-path target cannot be
# repeated outside Armada's tree, so one of those stops the build with its line.
replaces=$(awk '
    /^replace \($/ { block = 1; next }
    block && /^\)$/ { block = 0; next }
    /^replace / { sub(/^replace /, ""); print; next }
    block { print }
' "$gomod" | sed 's,//.*,,; s/^[[:space:]]*//; s/[[:space:]]*$//' | grep -v '^$' || true)
if grep -E '=>[[:space:]]*\.{0,2}/' <<<"$replaces" >&2; then
    die "$ARMADA_MODULE@$ARMADA_VERSION replaces a module by a local folder (above): a wrapper module cannot repeat that"
fi

wrapper=$work/wrapper
mkdir -p "$wrapper"
{
    printf 'module kbatch.local/armada-simulator\n\n'
    awk '$1 == "go" || $1 == "godebug" { print }' "$gomod"
    printf '\nrequire %s %s\n\ntool %s\n' "$ARMADA_MODULE" "$ARMADA_VERSION" "$COMMAND"
    [[ -z $replaces ]] || printf '\nreplace (\n%s\n)\n' "$(sed 's/^/\t/' <<<"$replaces")"
} >"$wrapper/go.mod"
step "Armada $ARMADA_VERSION needs $(awk '$1 == "go" { print "go " $2 }' "$gomod"); building with $("$go" env GOVERSION) (GOTOOLCHAIN=$GOTOOLCHAIN)"
step "resolving the simulator's dependencies (go mod tidy; log: $build_log)"
run_go "$wrapper" "resolving Armada's dependencies" mod tidy
step "building $COMMAND (log: $build_log)"
run_go "$wrapper" "building Armada's simulator" build -ldflags "-s -w" -o "$work/out/simulator" "$COMMAND"
[[ -x $work/out/simulator ]] || die "the build did not produce $work/out/simulator"
"$work/out/simulator" --help >/dev/null 2>&1 || die "$work/out/simulator --help failed: not a working simulator"
place "$work/out/simulator" simulator

took=$((SECONDS - started))
{
    printf 'armada %s (%s)\ngo %s\n' "$ARMADA_VERSION" "$COMMAND" "$("$go" env GOVERSION)"
    printf 'built %s in %d s (%d min) on %s cores\n' \
        "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$took" "$(((took + 30) / 60))" "$(nproc 2>/dev/null || echo '?')"
} >"$home/BUILD_INFO"
[[ -n ${KBATCH_KEEP_WORK:-} ]] || rm -rf "$work"
step "done: Armada's simulator took ${took}s to build ($home/BUILD_INFO)"
echo "$bin"
