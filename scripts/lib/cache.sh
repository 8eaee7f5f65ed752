# Sourced by the provisioning scripts: a cache folder that one run at a time fills
# once. Before sourcing it the caller sets LOG_NAME (its messages' prefix), bin (the
# folder it fills and prints as its last line on stdout), lock (the lock file) and
# defines have_all (whether everything is in $bin). Sourcing it prints $bin and exits
# when everything is there already; otherwise it takes the lock (waiting while another
# run holds it), looks again, and gives the caller log, die, step and place.

log() { printf '%s: %s\n' "$LOG_NAME" "$*" >&2; }
die() {
    printf '%s: error: %s\n' "$LOG_NAME" "$*" >&2
    exit 1
}

# ---- warm path: nothing to do ---------------------------------------------
if have_all; then
    echo "$bin"
    exit 0
fi

mkdir -p "$bin" || die "cannot create $bin"
exec 9>"$lock"
if ! flock -n 9; then
    log "another provisioning run holds $lock; waiting"
    flock 9
fi
if have_all; then # the other run finished the job
    echo "$bin"
    exit 0
fi

started=$SECONDS
step() { log "[$((SECONDS - started))s] $*"; }

# Install a file atomically into the cache (mode 0755 unless given).
place() { # src name [mode]
    cp "$1" "$bin/.$2.tmp" && chmod "${3:-0755}" "$bin/.$2.tmp" && mv -f "$bin/.$2.tmp" "$bin/$2"
}
