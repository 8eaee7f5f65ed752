#!/usr/bin/env bash
# The oldest supported control plane, Kubernetes 1.20, for the e2e tests (DESIGN.md §9),
# from Debian's packages alone: etcd, kube-apiserver and kube-controller-manager
# end up in a cache folder outside the repository, which is printed as the last
# line on stdout (progress goes to stderr). Run it through
#
#     bin=$(scripts/provision-control-plane.sh --version 1.20) && KUBEBUILDER_ASSETS=$bin pytest tests/e2e
#
# Steps (each skipped when already done; a run with the binaries cached only
# checks for them):
#   1. etcd: copied from an installed etcd (Debian's etcd-server, installed with
#      apt-get when missing and we are root; otherwise unpacked from its .deb).
#   2. A private apt configuration in the work folder (the system's sources are
#      not touched) with the Debian mirror read from this machine's own apt
#      sources: deb-src for bookworm, deb for bookworm and bullseye.
#   3. Debian bookworm's source package `kubernetes` (the Kubernetes 1.20 tree
#      with its vendored dependencies), unpacked.
#   4. Go 1.15 (bullseye's golang-1.15-go and golang-1.15-src .debs) unpacked
#      into the work folder; never installed. bookworm's Go 1.19 builds an
#      apiserver that crashes.
#   5. `make WHAT="cmd/kube-apiserver cmd/kube-controller-manager"` in the tree
#      (generates the OpenAPI definitions, then builds; ~6 minutes on 2 cores).
#   6. The binaries are moved into the cache; the work folder is removed.
#
# Environment:
#   KBATCH_CACHE            cache root (default ~/.cache/kbatch)
#   KBATCH_DEBIAN_MIRROR    Debian mirror to use instead of the one in apt's sources
#   KBATCH_BULLSEYE_MIRROR  mirror for bullseye if the main one no longer carries it
#   KBATCH_KEEP_WORK=1      keep the work folder (sources, Go, build cache)
set -euo pipefail

readonly K8S_LINE=1.20
readonly CODENAME=bookworm # the release whose source package carries Kubernetes 1.20
readonly GO_SUITE=bullseye # the release with Go 1.15
readonly GO_PKGS=(golang-1.15-go golang-1.15-src)
readonly BINARIES=(etcd kube-apiserver kube-controller-manager)

cache_root=${KBATCH_CACHE:-$HOME/.cache/kbatch}
plane=$cache_root/control-plane/v$K8S_LINE
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

is_root() { [[ $(id -u) -eq 0 ]]; }

# ---- private apt ----------------------------------------------------------
apt_dir=$work/apt
APT_OPTS=()

# Print "uri<TAB>suites<TAB>components<TAB>signed-by" for every `deb`/`deb-src`
# entry of the machine's apt sources (one-line and deb822 formats).
apt_entries() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -r $f ]] || continue
        awk '
            { sub(/#.*/, "") }
            $1 != "deb" && $1 != "deb-src" { next }
            {
                i = 2; signed = ""
                if ($2 ~ /^\[/) {
                    opts = ""
                    for (; i <= NF; i++) { opts = opts " " $i; if ($i ~ /\]$/) { i++; break } }
                    if (match(opts, /signed-by=[^] ]+/)) signed = substr(opts, RSTART + 10, RLENGTH - 10)
                }
                uri = $i; suite = $(i + 1); comps = ""
                for (j = i + 2; j <= NF; j++) comps = comps (comps == "" ? "" : " ") $j
                printf "%s\t%s\t%s\t%s\n", uri, suite, comps, signed
            }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -r $f ]] || continue
        awk '
            function flush() {
                if (types ~ /(^| )deb(-src)?( |$)/ && enabled != "no")
                    for (k = 1; k <= nu; k++) printf "%s\t%s\t%s\t%s\n", u[k], suites, comps, signed
                types = suites = comps = signed = enabled = ""; nu = 0
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            /^[ \t]/ { next } # continuation lines (an inline Signed-By key)
            {
                key = $0; sub(/[ \t]*:.*/, "", key); key = tolower(key)
                val = $0; sub(/^[^:]*:[ \t]*/, "", val)
                if (key == "types") types = val
                else if (key == "uris") nu = split(val, u, /[ \t]+/)
                else if (key == "suites") suites = val
                else if (key == "components") comps = val
                else if (key == "enabled") enabled = tolower(val)
                else if (key == "signed-by" && val ~ /^\//) signed = val
            }
            END { flush() }' "$f"
    done
}

# Debian mirrors carrying $1 (a suite) with component main, best first.
mirrors_for() {
    apt_entries | awk -F '\t' -v want="$1" '
        { n = split($2, s, / /); ok = 0
          for (k = 1; k <= n; k++) if (s[k] == want) ok = 1
          if (ok && $3 ~ /(^| )main( |$)/ && $1 !~ /^cdrom:/) print $1 "\t" $4 }' |
        awk -F '\t' '!seen[$1]++'
}

# Write the private sources list and update its indexes. Args: mirror signed-by
setup_apt() {
    local mirror=${1%/} signed=$2 go_mirror=${KBATCH_BULLSEYE_MIRROR:-$1}
    go_mirror=${go_mirror%/}
    local opt=""
    [[ -n $signed ]] && opt="[signed-by=$signed] "
    mkdir -p "$apt_dir"/{lists/partial,cache/archives/partial,etc/sources.list.d,etc/preferences.d}
    cat >"$apt_dir/etc/sources.list" <<EOF
deb-src $opt$mirror $CODENAME main
deb $opt$mirror $CODENAME main
deb $opt$go_mirror $GO_SUITE main
EOF
    APT_OPTS=(
        -o "Dir::Etc::SourceList=$apt_dir/etc/sources.list"
        -o "Dir::Etc::SourceParts=$apt_dir/etc/sources.list.d"
        -o "Dir::Etc::Preferences=$apt_dir/etc/preferences"
        -o "Dir::Etc::PreferencesParts=$apt_dir/etc/preferences.d"
        -o "Dir::State::Lists=$apt_dir/lists"
        -o "Dir::Cache=$apt_dir/cache"
        -o "APT::Get::List-Cleanup=false"
    )
    # As root, apt drops to _apt for downloads, which cannot write into our folders.
    is_root && APT_OPTS+=(-o "APT::Sandbox::User=root")
    # Judge by what was fetched, not by update's status: one unreachable suite fails it.
    apt-get "${APT_OPTS[@]}" -q update >"$apt_dir/update.log" 2>&1 || true
    if ! apt-cache "${APT_OPTS[@]}" showsrc kubernetes 2>/dev/null | grep -q '^Version:'; then
        log "$mirror: no source package kubernetes in $CODENAME"
        grep -E '^(W|E):' "$apt_dir/update.log" | head -n 5 >&2 || true
        return 1
    fi
    if ! apt-cache "${APT_OPTS[@]}" show "${GO_PKGS[0]}" >/dev/null 2>&1; then
        log "$go_mirror: no $GO_SUITE package ${GO_PKGS[0]}"
        grep -E '^(W|E):' "$apt_dir/update.log" | head -n 5 >&2 || true
        return 2
    fi
}

private_apt() {
    [[ ${#APT_OPTS[@]} -gt 0 ]] && return 0
    command -v apt-get >/dev/null || die "apt-get not found: this script needs Debian's apt"
    local candidates mirror signed rc=1
    if [[ -n ${KBATCH_DEBIAN_MIRROR:-} ]]; then
        candidates=$KBATCH_DEBIAN_MIRROR$'\t'
    else
        candidates=$(mirrors_for "$CODENAME")
    fi
    [[ -n $candidates ]] || die "no Debian mirror for '$CODENAME main' in /etc/apt/sources.list or /etc/apt/sources.list.d/; set KBATCH_DEBIAN_MIRROR"
    while IFS=$'\t' read -r mirror signed; do
        [[ -n $mirror ]] || continue
        [[ -n $signed && ! -r $signed ]] && signed=""
        step "private apt sources from mirror $mirror"
        rc=0
        setup_apt "$mirror" "$signed" || rc=$?
        [[ $rc -eq 0 ]] && return 0
    done <<<"$candidates"
    APT_OPTS=()
    if [[ $rc -eq 2 ]]; then
        die "$GO_SUITE (for Go 1.15) is not on the mirror; set KBATCH_BULLSEYE_MIRROR to a mirror that carries it (e.g. Debian's archive mirror)"
    fi
    die "could not read '$CODENAME' sources from the mirror(s) above (log: $apt_dir/update.log); check the network or set KBATCH_DEBIAN_MIRROR to a reachable Debian mirror"
}

# Unpack .debs of the given packages (from the private sources) into $1.
unpack_debs() { # dest pkg...
    local dest=$1
    shift
    local dl=$work/debs
    mkdir -p "$dl" "$dest"
    (cd "$dl" && apt-get "${APT_OPTS[@]}" -q download "$@" >&2) ||
        die "apt-get download $* failed"
    local p debs deb
    for p in "$@"; do
        debs=("$dl/${p}_"*.deb)
        [[ -f ${debs[-1]} ]] || die "no .deb downloaded for $p"
        deb=${debs[-1]}
        dpkg-deb -x "$deb" "$dest"
    done
}

# A build tool: from PATH, else unpacked privately from its bookworm .deb.
tools=$work/tools
need_tool() { # command package
    command -v "$1" >/dev/null && return 0
    if [[ ! -x $tools/usr/bin/$1 ]]; then
        private_apt
        step "unpacking $2 (for $1) into the work folder"
        unpack_debs "$tools" "$2"
    fi
    [[ -x $tools/usr/bin/$1 ]] || die "$2 did not provide $1"
    PATH=$tools/usr/bin:$PATH
}

# ---- 1. etcd ----------------------------------------------------------------
if [[ ! -x $bin/etcd ]]; then
    etcd=$(command -v etcd || true)
    if [[ -z $etcd ]] && is_root; then
        step "installing etcd-server with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        if ! apt-cache policy etcd-server 2>/dev/null | grep -q 'Candidate: [0-9]'; then
            apt-get -q update >&2 || log "apt-get update reported errors; trying the install anyway"
        fi
        apt-get -q install -y --no-install-recommends etcd-server >&2 ||
            die "apt-get install etcd-server failed"
        etcd=$(command -v etcd || true)
    elif [[ -z $etcd ]]; then
        private_apt
        step "not root: unpacking etcd-server into the work folder"
        unpack_debs "$work/etcd" etcd-server
        etcd=$work/etcd/usr/bin/etcd
    fi
    [[ -n $etcd && -x $etcd ]] || die "no etcd binary after installing etcd-server"
    "$etcd" --version >/dev/null 2>&1 || die "$etcd does not run"
    place "$etcd" etcd
    step "etcd: $("$bin/etcd" --version | head -n 1)"
fi

# ---- 2-5. kube-apiserver and kube-controller-manager -------------------------
if [[ ! -x $bin/kube-apiserver || ! -x $bin/kube-controller-manager ]]; then
    mkdir -p "$work"

    # 3. the source package
    src=$work/src/kubernetes
    if [[ ! -f $work/.src-ok ]]; then
        private_apt
        rm -rf "$work/src"
        mkdir -p "$work/src/dl"
        step "downloading Debian $CODENAME's source package kubernetes"
        (cd "$work/src/dl" && apt-get "${APT_OPTS[@]}" -q source --download-only kubernetes >&2) ||
            die "apt-get source kubernetes failed"
        files=("$work/src/dl"/kubernetes_*)
        dsc=$(printf '%s\n' "${files[@]}" | grep '\.dsc$' | tail -n 1) || die "no .dsc downloaded"
        version=$(awk '$1 == "Version:" { print $2 }' "$dsc")
        [[ $version == *"really$K8S_LINE."* || $version == "$K8S_LINE."* ]] ||
            die "$CODENAME's kubernetes source is $version, not $K8S_LINE.x"
        step "unpacking kubernetes $version"
        if command -v dpkg-source >/dev/null; then
            dpkg-source -x "$dsc" "$src" >"$work/src/unpack.log" 2>&1 ||
                die "dpkg-source -x failed: $(tail -n 5 "$work/src/unpack.log")"
        else
            # Debian's patches only touch kubectl's printers; the servers build without them.
            mkdir -p "$src"
            for f in "${files[@]}"; do
                case $f in
                *.orig.tar.*) tar -xf "$f" -C "$src" --strip-components=1 ;;
                *.debian.tar.*) tar -xf "$f" -C "$src" ;;
                esac
            done
            if command -v patch >/dev/null && [[ -f $src/debian/patches/series ]]; then
                while read -r p _; do
                    [[ -z $p || $p == \#* ]] && continue
                    patch -d "$src" -p1 --batch --forward -s <"$src/debian/patches/$p"
                done <"$src/debian/patches/series"
            fi
        fi
        rm -rf "$work/src/dl"
        touch "$work/.src-ok"
    fi

    # 4. Go 1.15, unpacked privately
    goroot=$work/go/usr/lib/go-1.15
    if [[ ! -f $work/.go-ok ]]; then
        private_apt
        rm -rf "$work/go"
        step "unpacking Go 1.15 ($GO_SUITE: ${GO_PKGS[*]}) into the work folder"
        unpack_debs "$work/go" "${GO_PKGS[@]}"
        rm -rf "$work/debs"
        touch "$work/.go-ok"
    fi
    # Go 1.15 refuses settings newer Go takes (GOFLAGS=-buildvcs=false), from the
    # environment or from the user's go env file: it reads neither.
    unset GOFLAGS GOTOOLCHAIN GOWORK
    export GOENV=off
    [[ $("$goroot/bin/go" version) == *go1.15* ]] || die "$goroot/bin/go is not Go 1.15"

    # 5. build
    need_tool make make
    if ! command -v rsync >/dev/null; then
        # hack/lib/golang.sh places binaries with `rsync -pc SRC DEST`; cp -p does that.
        mkdir -p "$work/shim"
        cat >"$work/shim/rsync" <<'EOF'
#!/usr/bin/env bash
files=()
for a in "$@"; do [[ $a == -* ]] || files+=("$a"); done
exec cp -p "${files[@]}"
EOF
        chmod +x "$work/shim/rsync"
        PATH=$work/shim:$PATH
    fi
    platform=$("$goroot/bin/go" env GOOS)/$("$goroot/bin/go" env GOARCH)
    step "building kube-apiserver and kube-controller-manager for $platform with $("$goroot/bin/go" version | cut -d' ' -f3) (log: $work/build.log; ~6 min)"
    (
        cd "$src"
        unset GOFLAGS GOPATH GO111MODULE GOROOT GOBIN
        export PATH=$goroot/bin:$PATH
        export GOCACHE=$work/gocache GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0
        export KUBE_BUILD_PLATFORMS=$platform
        make WHAT="cmd/kube-apiserver cmd/kube-controller-manager"
    ) >"$work/build.log" 2>&1 || {
        tail -n 30 "$work/build.log" >&2
        die "the build failed (full log: $work/build.log)"
    }
    out=$src/_output/bin
    for b in kube-apiserver kube-controller-manager; do
        [[ -x $out/$b ]] || die "the build did not produce $out/$b"
        [[ $("$out/$b" --version) == *v$K8S_LINE.* ]] || die "$out/$b is not version $K8S_LINE"
    done
    # the controller manager last: its presence marks a complete cache
    place "$out/kube-apiserver" kube-apiserver
    place "$out/kube-controller-manager" kube-controller-manager
    step "built $("$bin/kube-apiserver" --version)"
fi

have_all || die "internal: binaries missing from $bin"
if [[ -z ${KBATCH_KEEP_WORK:-} && -d $work ]]; then
    chmod -R u+w "$work" 2>/dev/null || true # the Go build cache is read-only
    rm -rf "$work"
fi
step "done"
echo "$bin"
