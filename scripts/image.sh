#!/usr/bin/env bash
# image.sh — build the host's container image offline: a static musl binary on `scratch`
# (deploy/Dockerfile), with buildah, saved as an OCI archive.
#
#   scripts/image.sh [ARCHIVE]    # default $WASMOP_CACHE/image/wasmop.oci.tar
#
# Installs what is missing (the x86_64-unknown-linux-musl Rust target; Debian's musl-tools
# for the C parts of `ring`; buildah and umoci). The binary builds in its own target directory
# ($WASMOP_CACHE/image-target) so it never waits on, or for, the test build. Prints the
# archive's path as its last line; `podman load -i ARCHIVE` or `skopeo copy
# oci-archive:ARCHIVE docker://REGISTRY/wasmop:TAG` take it from there.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE_ROOT=${WASMOP_CACHE:-/var/cache/wasmop}
ARCHIVE=${1:-$CACHE_ROOT/image/wasmop.oci.tar}
TARGET=x86_64-unknown-linux-musl
TAG=localhost/wasmop:dev

log() { printf '[image] %s\n' "$*" >&2; }

if ! rustup target list --installed | grep -qx "$TARGET"; then
    log "adding Rust target $TARGET"
    rustup target add "$TARGET" >&2
fi
missing=()
command -v musl-gcc >/dev/null || missing+=(musl-tools)
command -v buildah >/dev/null || missing+=(buildah)
command -v umoci >/dev/null || missing+=(umoci)
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update >&2
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}" >&2
fi

log "building the static host binary (release, $TARGET)"
CARGO_TARGET_DIR="$CACHE_ROOT/image-target" CARGO_INCREMENTAL=0 \
    cargo build --release --locked --quiet -p wasmop --target "$TARGET" >&2
bin="$CACHE_ROOT/image-target/$TARGET/release/wasmop"

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp "$bin" "$context/wasmop"
mkdir -p "$(dirname "$ARCHIVE")"
rm -f "$ARCHIVE"
# vfs storage: no overlay or fuse needed; the image is one small layer.
log "buildah bud -f deploy/Dockerfile (FROM scratch, offline)"
buildah --storage-driver vfs bud --quiet --pull-never -f deploy/Dockerfile -t "$TAG" "$context" >&2
buildah --storage-driver vfs push --quiet "$TAG" "oci-archive:$ARCHIVE:$TAG" >&2
buildah --storage-driver vfs rmi "$TAG" >/dev/null 2>&1 || true
log "image $TAG saved to $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1))"
echo "$ARCHIVE"
