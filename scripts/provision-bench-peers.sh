#!/usr/bin/env bash
# Build the live benchmark's peers (`kbatch bench --live`) from the Go module proxy and
# cache them outside the repository; print the cache folder as the last line on stdout
# (progress goes to stderr):
#
#     scripts/provision-bench-peers.sh     # then: kbatch bench --live
#
# Each peer lands in ${KBATCH_CACHE:-~/.cache/kbatch}/<name>/<version>/bin and is skipped
# when already there. The control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler of the same release) is built elsewhere; this script only checks it.
#
#   kwok          sigs.k8s.io/kwok's cmd/kwok (the controller that fakes nodes and pods)
#   vc-scheduler  volcano.sh/volcano's cmd/scheduler, plus the module's CRDs for its
#                 PodGroups and Queues (config/crd), copied as data beside the binary
#
# A module whose go.mod carries replace directives cannot be `go install`ed by version;
# such a peer is built in a throw-away wrapper module under <cache>/work that requires it
# and repeats its replacements. A peer that cannot be built is reported (the command and
# its last lines) and the others still are; the exit status is then 1.
#
# Environment:
#   KBATCH_CACHE   cache root (default ~/.cache/kbatch)
set -euo pipefail

# name|module|package|version|binary
readonly PEERS=(
    "kwok|sigs.k8s.io/kwok|cmd/kwok|v0.8.0|kwok"
    "volcano|volcano.sh/volcano|cmd/scheduler|v1.14.0|vc-scheduler"
)
readonly CONTROL_PLANE=v1.37

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
    if [[ $name == volcano ]]; then # its CRDs, as data for the benchmark to apply
        local src
        src=$(go mod download -json "$module@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
        mkdir -p "$cache/$name/$version/crd"
        find "$src/config/crd" \( -name '*_podgroups.yaml' -o -name '*_queues.yaml' \) \
            -exec cp {} "$cache/$name/$version/crd/" \;
    fi
    log "$name $version: built in $((SECONDS - started)) s"
}

failed=0
for peer in "${PEERS[@]}"; do
    IFS='|' read -r name module pkg version binary <<<"$peer"
    build "$name" "$module" "$pkg" "$version" "$binary" || failed=1
done
echo "$cache"
exit "$failed"
