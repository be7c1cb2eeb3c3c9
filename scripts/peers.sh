#!/usr/bin/env bash
# peers.sh — build the operators the convergence bench measures wasmop against, once, cached
# outside the checkout under $WASMOP_CACHE/peers (default /var/cache/wasmop/peers), keyed by
# what they are built from:
#
#   controller-runtime  tests/peers/controller-runtime: a Kubebuilder-layout Go operator
#                       (controller-runtime from the Go module proxy, its go.mod/go.sum pinned)
#   kopf                tests/peers/kopf: the same operator in Python with kopf (PyPI, pinned in
#                       its requirements.txt), in a virtualenv of its own
#
# Prints one line per peer for `eval`: WASMOP_PEER_CONTROLLER_RUNTIME=<binary> and
# WASMOP_PEER_KOPF=<kopf executable> (the operator file is tests/peers/kopf/memcached_operator.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${WASMOP_CACHE:-/var/cache/wasmop}
log() { printf '[peers] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

key() { cat "$@" | sha256sum | cut -c1-12; }

# controller-runtime
command -v go >/dev/null || die "go not found: the controller-runtime peer is built with Go 1.24 or newer"
cr_src=$root/tests/peers/controller-runtime
cr_bin=$cache/peers/controller-runtime-$(key "$cr_src/go.mod" "$cr_src/go.sum" $(find "$cr_src" -name '*.go' | sort))/memcached-operator
if [[ ! -x "$cr_bin" ]]; then
    log "building the controller-runtime peer (Go modules, once) ..."
    start=$SECONDS
    mkdir -p "$(dirname "$cr_bin")"
    (cd "$cr_src" &&
        GOPATH="$cache/go" GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOTOOLCHAIN=local CGO_ENABLED=0 \
            go build -mod=readonly -trimpath -o "$cr_bin.tmp" ./cmd) || die "building the controller-runtime peer failed"
    mv "$cr_bin.tmp" "$cr_bin"
    log "controller-runtime peer built in $((SECONDS - start)) s"
fi

# kopf
kopf_src=$root/tests/peers/kopf
venv=$cache/peers/kopf-$(key "$kopf_src/requirements.txt")
if [[ ! -f "$venv/installed" ]]; then
    log "installing kopf into $venv (PyPI, once) ..."
    rm -rf "$venv"
    python3 -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$kopf_src/requirements.txt" ||
        die "pip install of kopf failed"
    touch "$venv/installed"
fi

echo "WASMOP_PEER_CONTROLLER_RUNTIME=$cr_bin"
echo "WASMOP_PEER_KOPF=$venv/bin/kopf"
