#!/usr/bin/env bash
# go-toolchain.sh — the tools that turn a Go plugin into a component, beside the machine's Go.
#
#   - wit-bindgen (crates.io `wit-bindgen-cli`, pinned below, only its `go` generator): Go
#     bindings for a world of wit/, targeting mainline Go's `//go:wasmexport` (no TinyGo);
#   - wasm-tools (crates.io, pinned below, only what `component embed` and `component new`
#     need, plus `validate` and `component wit` to look at the result);
#   - go-pkg/: the Go runtime package the generated bindings import
#     (`go.bytecodealliance.org/pkg`, which the Go module proxy does not serve), copied from the
#     sources of crates.io's `wit-bindgen-go` of the same release, where it ships;
#   - the WASI preview-1 reactor adapter, written out of crates.io's
#     `wasi-preview1-component-adapter-provider` at the version the host links (wasmtime's),
#     by a tiny Rust program built here: no release page is downloaded;
#   - wizer (npm `@bytecodealliance/wizer`, pinned below, a prebuilt binary, ~10 s): runs the Go
#     runtime's `_initialize` once at build time and writes the initialized module, so that an
#     instance restores memory instead of starting the Go runtime on every call.
#
# Go itself (1.24 or newer, for `//go:wasmexport` and `-buildmode=c-shared` on wasip1) comes
# from the machine. Everything goes into the cache ($WASMOP_CACHE, default /var/cache/wasmop),
# once; the last line printed is a directory holding `wit-bindgen`, `wasm-tools`,
# `wasi_snapshot_preview1.reactor.wasm`, `go-pkg/` and `wizer`. Idempotent, and safe to run from several
# processes at once (a lock).
set -euo pipefail

WIT_BINDGEN_VERSION=0.63.0
WASM_TOOLS_VERSION=1.262.0
ADAPTER_VERSION=48.0.8
WIZER_VERSION=10.0.0
CACHE_ROOT=${WASMOP_CACHE:-/var/cache/wasmop}
DIR="$CACHE_ROOT/tools/go-wit-bindgen-$WIT_BINDGEN_VERSION-wasm-tools-$WASM_TOOLS_VERSION-adapter-$ADAPTER_VERSION"

log() { printf '[go-toolchain] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
# go-pkg/ carries a marker of the one change made to it (below).
ready() { [[ -f "$DIR/.complete" && -f "$DIR/bin/go-pkg/.sizes-rounded" && -x "$DIR/bin/wizer" ]]; }

if ready; then
    echo "$DIR/bin"
    exit 0
fi
command -v cargo >/dev/null || die "cargo not found: wit-bindgen and wasm-tools are installed from crates.io"
mkdir -p "$CACHE_ROOT/tools"
exec 9>"$CACHE_ROOT/tools/.go-toolchain.lock"
flock 9
if ready; then
    echo "$DIR/bin"
    exit 0
fi
mkdir -p "$DIR/bin"
# Builds share nothing with a checkout's target directory.
export CARGO_TARGET_DIR="$DIR/build"
if [[ ! -x "$DIR/bin/wit-bindgen" ]]; then
    log "installing wit-bindgen-cli $WIT_BINDGEN_VERSION (crates.io, the go generator only)"
    cargo install --quiet --locked --root "$DIR" --version "=$WIT_BINDGEN_VERSION" \
        --no-default-features --features go wit-bindgen-cli >&2
fi
if [[ ! -x "$DIR/bin/wasm-tools" ]]; then
    log "installing wasm-tools $WASM_TOOLS_VERSION (crates.io: component, validate, print)"
    cargo install --quiet --locked --root "$DIR" --version "=$WASM_TOOLS_VERSION" \
        --no-default-features --features component,validate,print,parse,metadata wasm-tools >&2
fi
if [[ ! -f "$DIR/bin/go-pkg/.sizes-rounded" ]]; then
    registry="${CARGO_HOME:-$HOME/.cargo}/registry/src"
    pkg=$(ls -d "$registry"/*/"wit-bindgen-go-$WIT_BINDGEN_VERSION/src/pkg" 2>/dev/null | head -n 1)
    [[ -n "$pkg" && -f "$pkg/go.mod" ]] || die "no wit-bindgen-go-$WIT_BINDGEN_VERSION sources under $registry"
    log "copying the bindings' Go runtime (go.bytecodealliance.org/pkg) from wit-bindgen-go $WIT_BINDGEN_VERSION"
    rm -rf "$DIR/bin/go-pkg.tmp"
    mkdir -p "$DIR/bin/go-pkg.tmp"
    cp -r "$pkg/go.mod" "$pkg/wit" "$pkg/LICENSE" "$DIR/bin/go-pkg.tmp/"
    # Its go.mod names the toolchain its repository develops with; the sync bindings need
    # nothing past Go 1.24 (`//go:wasmexport`).
    sed -i 's/^go .*/go 1.24/' "$DIR/bin/go-pkg.tmp/go.mod"
    # Its `cabi_realloc` panics on a size that is not a multiple of the alignment ("size 92 is
    # not compatible with alignment 8"), which the canonical ABI allows and the reactor adapter
    # asks for when the Go runtime starts: round the size up instead, as its other branch does.
    runtime="$DIR/bin/go-pkg.tmp/wit/runtime/runtime.go"
    grep -q '^	if size%align != 0 {$' "$runtime" || die "$runtime: the size check to round up is not there"
    sed -i '/^	if size%align != 0 {$/,/^	}$/c\	size += (align - size%align) % align' "$runtime"
    touch "$DIR/bin/go-pkg.tmp/.sizes-rounded"
    rm -rf "$DIR/bin/go-pkg"
    mv "$DIR/bin/go-pkg.tmp" "$DIR/bin/go-pkg"
fi
if [[ ! -f "$DIR/bin/wasi_snapshot_preview1.reactor.wasm" ]]; then
    log "writing the WASI preview-1 reactor adapter (wasi-preview1-component-adapter-provider $ADAPTER_VERSION)"
    src="$DIR/adapter-writer"
    mkdir -p "$src/src"
    cat >"$src/Cargo.toml" <<TOML
[package]
name = "adapter-writer"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
wasi-preview1-component-adapter-provider = "=$ADAPTER_VERSION"

[workspace]
TOML
    cat >"$src/src/main.rs" <<'RUST'
//! Writes the WASI preview-1 reactor adapter to the path given as the only argument.
fn main() {
    let path = std::env::args().nth(1).expect("usage: adapter-writer PATH");
    std::fs::write(&path, wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER)
        .unwrap_or_else(|e| panic!("writing {path}: {e}"));
}
RUST
    cargo run --quiet --manifest-path "$src/Cargo.toml" -- "$DIR/bin/wasi_snapshot_preview1.reactor.wasm.tmp" >&2
    mv "$DIR/bin/wasi_snapshot_preview1.reactor.wasm.tmp" "$DIR/bin/wasi_snapshot_preview1.reactor.wasm"
fi
if [[ ! -x "$DIR/bin/wizer" ]]; then
    if ! command -v npm >/dev/null; then
        log "installing npm (Debian)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get -o DPkg::Lock::Timeout=600 update >&2
        apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends npm >&2
    fi
    log "installing wizer $WIZER_VERSION (npm @bytecodealliance/wizer, a prebuilt binary)"
    rm -rf "$DIR/wizer"
    mkdir -p "$DIR/wizer"
    (cd "$DIR/wizer" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund -E "@bytecodealliance/wizer@$WIZER_VERSION" >&2)
    binary=$(ls "$DIR"/wizer/node_modules/@bytecodealliance/wizer-*/wizer 2>/dev/null | head -n 1)
    [[ -n "$binary" && -x "$binary" ]] || die "npm installed no wizer binary for this platform under $DIR/wizer"
    ln -sf "$binary" "$DIR/bin/wizer"
fi
rm -rf "$DIR/build"
"$DIR/bin/wizer" --version >&2
"$DIR/bin/wit-bindgen" --version >&2
"$DIR/bin/wasm-tools" --version >&2
touch "$DIR/.complete"
log "wit-bindgen, wasm-tools, the reactor adapter and wizer in $DIR/bin"
echo "$DIR/bin"
