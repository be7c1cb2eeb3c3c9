#!/usr/bin/env bash
# registry.sh — a real OCI registry and a second OCI client for the registry tests.
#
#   - docker-registry (Debian: CNCF distribution 2.8) and htpasswd (Debian: apache2-utils, for
#     the bcrypt password file of the basic-auth tests). The Debian service is not used: the
#     tests start their own `docker-registry serve CONFIG` on a free loopback port with a
#     temporary storage directory, and a service the package started is stopped and disabled;
#   - oras 1.3.6 (Go module proxy: oras.land/oras/cmd/oras), built once with the machine's Go
#     into the cache ($WASMOP_CACHE, default /var/cache/wasmop), to prove that what
#     `wasmop push` pushes is what other OCI clients read, and the other way round;
#   - cosign (scripts/cosign.sh), to prove the same of signatures.
#
# Idempotent. Prints the directory holding `oras` as its last line.
set -euo pipefail

ORAS_VERSION=1.3.6
CACHE_ROOT=${WASMOP_CACHE:-/var/cache/wasmop}
DIR="$CACHE_ROOT/tools/oras-$ORAS_VERSION"

log() { printf '[registry] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if ! command -v docker-registry >/dev/null || ! command -v htpasswd >/dev/null; then
    log "installing docker-registry and apache2-utils (Debian)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update >&2
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends docker-registry apache2-utils >&2
    # The package's own service (port 5000) is not what the tests use.
    if command -v systemctl >/dev/null && systemctl is-enabled --quiet docker-registry 2>/dev/null; then
        systemctl disable --now docker-registry >&2 || true
    fi
fi

# cosign, for the signature interoperability tests (its own script: built once, cached).
bash "$(dirname "${BASH_SOURCE[0]}")/cosign.sh" >/dev/null

if [[ -x "$DIR/oras" ]]; then
    echo "$DIR"
    exit 0
fi
command -v go >/dev/null || die "go not found: oras is built from Go modules and needs Go 1.24 or newer on PATH"
mkdir -p "$CACHE_ROOT/tools"
exec 9>"$CACHE_ROOT/tools/.install.lock"
flock 9
if [[ ! -x "$DIR/oras" ]]; then
    log "building oras $ORAS_VERSION from the Go module proxy"
    tmp=$(mktemp -d "$CACHE_ROOT/tools/tmp.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    GOPATH="$CACHE_ROOT/go" GOMODCACHE="$CACHE_ROOT/go/mod" GOCACHE="$CACHE_ROOT/go/build" \
        GOFLAGS="-mod=mod -trimpath" GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$tmp" \
        go install -ldflags "-s -w" "oras.land/oras/cmd/oras@v$ORAS_VERSION" >&2
    "$tmp/oras" version >&2
    rm -rf "$DIR"
    mv "$tmp" "$DIR"
    trap - EXIT
    log "oras in $DIR"
fi
echo "$DIR"
