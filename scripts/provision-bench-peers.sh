#!/usr/bin/env bash
# Build the live benchmark's peers (`kbatch bench --live`) and cache them outside the
# repository; print the cache folder as the last line on stdout
# (progress goes to stderr):
#
#     scripts/provision-bench-peers.sh     # then: kbatch bench --live
#
# Each peer lands in ${KBATCH_CACHE:-~/.cache/kbatch}/<name>/<version>/bin and is skipped
# when already there. The control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler of the same release) is built elsewhere; this script only checks it.
#
#   kwok          sigs.k8s.io/kwok's cmd/kwok (the controller that fakes nodes and pods),
#                 from the Go module proxy
#   vc-scheduler  Volcano's cmd/scheduler at its release tag, from a git repository of
#                 volcano-sh/volcano on this machine, plus its CRDs for PodGroups, Queues,
#                 HyperNodes and Numatopologies (config/crd/volcano/bases; the scheduler
#                 waits for its watches of all four), copied as data beside the binary
#                 (<version>/crd)
#   vc-controller-manager
#                 Volcano's cmd/controller-manager from the same tree, for the e2e test of
#                 Volcano's Job controller under kbatch (tests/e2e/test_volcano_controllers.py),
#                 plus the further CRDs its job controller waits for: batch.volcano.sh Jobs
#                 and bus.volcano.sh Commands (<version>/controller-crd; it watches
#                 PodGroups and Queues too, from crd/), and the scheduler conf Volcano's
#                 chart installs (<version>/conf/volcano-scheduler.conf), which the test
#                 runs kbatch with
#
# Volcano comes from a git repository because the Go module proxy this project reaches
# refuses volcano.sh/volcano (403); the default is a snapshot of the public repository
# fetched onto this machine. The release's tree is exported (`git archive`) into
# <cache>/work/volcano-<version> and built there: its go.mod replaces volcano.sh/apis with
# its own staging folder, and every other dependency comes from the proxy.
#
# A module whose go.mod carries replace directives cannot be `go install`ed by version;
# such a peer is built in a throw-away wrapper module under <cache>/work that requires it
# and repeats its replacements. A peer that cannot be built is reported (the command and
# its last lines) and the others still are; the exit status is then 1. Where there is no
# repository of Volcano to build it from (a clean clone in CI), that is said and the exit
# status is 3 if all else was built: `kbatch bench --live` then reports Volcano's runs as
# errors ("volcano: not built") and runs the others.
#
# Environment:
#   KBATCH_CACHE            cache root (default ~/.cache/kbatch)
#   KBATCH_VOLCANO_GIT_DIR  a git directory (bare or not) of volcano-sh/volcano holding the
#                           release tag (default /work/.mirror/volcano-sh+volcano/repo)
set -euo pipefail

# name|module|package|version|binary, from the Go module proxy
readonly PEERS=(
    "kwok|sigs.k8s.io/kwok|cmd/kwok|v0.8.0|kwok"
)
readonly VOLCANO_VERSION=v1.15.1
readonly VOLCANO_CRDS=(scheduling.volcano.sh_podgroups scheduling.volcano.sh_queues
    topology.volcano.sh_hypernodes nodeinfo.volcano.sh_numatopologies)
readonly VOLCANO_CONTROLLER_CRDS=(batch.volcano.sh_jobs bus.volcano.sh_commands)
readonly VOLCANO_CONF=installer/helm/chart/volcano/config/volcano-scheduler.conf
# binary|package in Volcano's tree
readonly VOLCANO_BINARIES=("vc-scheduler|cmd/scheduler" "vc-controller-manager|cmd/controller-manager")
readonly CONTROL_PLANE=v1.37
volcano_git=${KBATCH_VOLCANO_GIT_DIR:-/work/.mirror/volcano-sh+volcano/repo}

cache=${KBATCH_CACHE:-$HOME/.cache/kbatch}
work=$cache/work
log() { printf 'provision-bench-peers: %s\n' "$*" >&2; }

command -v go >/dev/null || {
    log "error: no go command (Go 1.26 or newer is needed)"
    exit 1
}

plane=$cache/control-plane/$CONTROL_PLANE/bin
for b in etcd kube-apiserver kube-controller-manager kube-scheduler; do
    [[ -x $plane/$b ]] || log "warning: no $plane/$b (the control plane is built by its own script)"
done

# The module's go.mod `replace` lines, as `go mod edit -replace` arguments.
replacements() { # module version
    go mod download -json "$1@$2" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p' | xargs -r cat |
        awk '
            /^replace \($/ { block = 1; next }
            block && /^\)$/ { block = 0; next }
            /^replace / { sub(/^replace /, ""); print_it($0); next }
            block { print_it($0) }
            function print_it(line) {
                gsub(/\/\/.*/, "", line); n = split(line, f, /[ \t]+/); out = ""
                for (i = 1; i <= n; i++) if (f[i] != "") out = out (out == "" ? "" : " ") f[i]
                if (out == "") return
                split(out, p, / => /)
                if (p[2] ~ /^\.|^\//) return   # a local path: nothing a wrapper can repeat
                gsub(/ /, "@", p[1]); gsub(/ /, "@", p[2]); print p[1] "=" p[2]
            }'
}

build() { # name module package version binary
    local name=$1 module=$2 pkg=$3 version=$4 binary=$5
    local dest=$cache/$name/$version/bin
    if [[ -x $dest/$binary ]]; then
        log "$name $version: cached in $dest"
        return 0
    fi
    mkdir -p "$dest" "$work"
    local started=$SECONDS buildlog=$work/$name-$version.log
    log "$name $version: building $module/$pkg (log: $buildlog)"
    if ! go mod download -json "$module@$version" >"$buildlog" 2>&1; then
        log "$name $version: FAILED: go mod download $module@$version:"
        grep -E '"Error"|forbidden|Forbidden|not available' "$buildlog" | head -n 3 >&2 || tail -n 5 "$buildlog" >&2
        return 1
    fi
    local reps
    reps=$(replacements "$module" "$version")
    if [[ -z $reps ]]; then
        GOBIN=$dest CGO_ENABLED=0 go install "$module/$pkg@$version" >>"$buildlog" 2>&1 || {
            log "$name $version: FAILED: go install $module/$pkg@$version:"
            tail -n 10 "$buildlog" >&2
            return 1
        }
    else
        local wrap=$work/$name-$version
        rm -rf "$wrap" && mkdir -p "$wrap"
        (
            cd "$wrap"
            go mod init "kbatch-bench-peer/$name" >/dev/null 2>&1
            local r
            while read -r r; do go mod edit -replace "$r"; done <<<"$reps"
            go mod edit -require "$module@$version"
            printf '//go:build tools\n\npackage tools\n\nimport _ "%s/%s"\n' "$module" "$pkg" >tools.go
            go mod tidy && GOBIN=$dest CGO_ENABLED=0 go install "$module/$pkg"
        ) >>"$buildlog" 2>&1 || {
            log "$name $version: FAILED: go install in the wrapper module $wrap:"
            tail -n 10 "$buildlog" >&2
            return 1
        }
    fi
    local built=$dest/${pkg##*/} # go install names it after its folder
    [[ $built == "$dest/$binary" ]] || mv -f "$built" "$dest/$binary"
    log "$name $version: built in $((SECONDS - started)) s"
}

# Volcano's scheduler, controller-manager and CRDs at $VOLCANO_VERSION, from the git
# repository $volcano_git.
volcano_cached() { # dest
    local crd entry
    for crd in "${VOLCANO_CRDS[@]}"; do [[ -f $1/crd/$crd.yaml ]] || return 1; done
    for crd in "${VOLCANO_CONTROLLER_CRDS[@]}"; do [[ -f $1/controller-crd/$crd.yaml ]] || return 1; done
    for entry in "${VOLCANO_BINARIES[@]}"; do [[ -x $1/bin/${entry%%|*} ]] || return 1; done
    [[ -f $1/conf/${VOLCANO_CONF##*/} ]]
}

build_volcano() {
    local version=$VOLCANO_VERSION dest=$cache/volcano/$VOLCANO_VERSION
    if volcano_cached "$dest"; then
        log "volcano $version: cached in $dest"
        return 0
    fi
    if ! git --git-dir="$volcano_git" rev-parse -q --verify "refs/tags/$version" >/dev/null 2>&1; then
        log "volcano $version: not built: no tag $version in KBATCH_VOLCANO_GIT_DIR=$volcano_git" \
            "(a git directory of volcano-sh/volcano; the Go module proxy refuses its module)"
        return 3
    fi
    local src=$work/volcano-$version buildlog=$work/volcano-$version.log started=$SECONDS
    local crd entry binary pkg
    rm -rf "$src" && mkdir -p "$src" "$dest/bin" "$dest/crd" "$dest/controller-crd" "$dest/conf"
    : >"$buildlog"
    git --git-dir="$volcano_git" archive "$version" | tar -x -C "$src"
    for entry in "${VOLCANO_BINARIES[@]}"; do
        binary=${entry%%|*} pkg=${entry#*|}
        log "volcano $version: building $pkg from $volcano_git (log: $buildlog)"
        # go.mod asks for go 1.25 or newer: the local toolchain, never a downloaded one
        if ! (cd "$src" && GOTOOLCHAIN=local CGO_ENABLED=0 go build -o "$dest/bin/$binary" \
            "./$pkg") >>"$buildlog" 2>&1; then
            log "volcano $version: FAILED: (cd $src && GOTOOLCHAIN=local CGO_ENABLED=0 go build" \
                "-o $dest/bin/$binary ./$pkg):"
            tail -n 10 "$buildlog" >&2
            return 1
        fi
    done
    for crd in "${VOLCANO_CRDS[@]}"; do # as data: the benchmark applies these
        cp "$src/config/crd/volcano/bases/$crd.yaml" "$dest/crd/"
    done
    for crd in "${VOLCANO_CONTROLLER_CRDS[@]}"; do # and the controllers' e2e test these too
        cp "$src/config/crd/volcano/bases/$crd.yaml" "$dest/controller-crd/"
    done
    cp "$src/$VOLCANO_CONF" "$dest/conf/"
    log "volcano $version: built in $((SECONDS - started)) s"
}

failed=0
for peer in "${PEERS[@]}"; do
    IFS='|' read -r name module pkg version binary <<<"$peer"
    build "$name" "$module" "$pkg" "$version" "$binary" || failed=1
done
volcano=0
build_volcano || volcano=$?
[[ $volcano == 0 || $failed == 1 ]] || failed=$((volcano == 3 ? 3 : 1))
echo "$cache"
exit "$failed"
