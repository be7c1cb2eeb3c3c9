#!/usr/bin/env bash
# cosign.sh — the real cosign, for the signature interoperability tests.
#
# cosign (Go module proxy: github.com/sigstore/cosign/v2/cmd/cosign, pinned below) is built
# once with the machine's Go into the cache ($WASMOP_CACHE, default /var/cache/wasmop), with
# the module and build caches there too. The tests use it offline only: keys made with
# `cosign generate-key-pair`, signatures with `--tlog-upload=false`, verification with
# `--insecure-ignore-tlog`; no Sigstore service is asked.
#
# Idempotent, and safe to run from several processes at once (a lock). Prints the directory
# holding `cosign` as its last line.
set -euo pipefail

COSIGN_VERSION=2.6.5
CACHE_ROOT=${WASMOP_CACHE:-/var/cache/wasmop}
DIR="$CACHE_ROOT/tools/cosign-$COSIGN_VERSION"

log() { printf '[cosign] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ -x "$DIR/cosign" ]]; then
    echo "$DIR"
    exit 0
fi
command -v go >/dev/null || die "go not found: cosign is built from Go modules and needs Go 1.24 or newer on PATH"
mkdir -p "$CACHE_ROOT/tools"
exec 9>"$CACHE_ROOT/tools/.cosign.lock"
flock 9
if [[ ! -x "$DIR/cosign" ]]; then
    log "building cosign $COSIGN_VERSION from the Go module proxy (a few minutes, once)"
    tmp=$(mktemp -d "$CACHE_ROOT/tools/tmp-cosign.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    GOPATH="$CACHE_ROOT/go" GOMODCACHE="$CACHE_ROOT/go/mod" GOCACHE="$CACHE_ROOT/go/build" \
        GOFLAGS="-mod=mod -trimpath" GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$tmp" \
        go install -ldflags "-s -w" "github.com/sigstore/cosign/v2/cmd/cosign@v$COSIGN_VERSION" >&2
    "$tmp/cosign" version >&2
    rm -rf "$DIR"
    mv "$tmp" "$DIR"
    trap - EXIT
    log "cosign in $DIR"
fi
echo "$DIR"
