#!/usr/bin/env bash
# go-plugin.sh — build a wasmop plugin written in Go into a component, with this checkout's Go
# SDK (sdk-go/build/component.sh) and the toolchain scripts/go-toolchain.sh installs (once).
#
#   scripts/go-plugin.sh PLUGIN_DIR OUT.wasm [WIT_VERSION [WORLD]]
#
# WIT_VERSION is a directory of wit/ (default v0.3.0, the newest); WORLD (`controller`,
# `operator` or `webhook`) defaults to what the plugin serves (component.sh reads it). Go's module and build caches default to the ones scripts/control-plane.sh
# uses, under $WASMOP_CACHE (default /var/cache/wasmop).
#
#   scripts/go-plugin.sh plugins/memcached-go memcached-go.wasm
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [[ $# -lt 2 || $# -gt 4 ]]; then
    echo "usage: scripts/go-plugin.sh PLUGIN_DIR OUT.wasm [WIT_VERSION [WORLD]]" >&2
    exit 1
fi
cache=${WASMOP_CACHE:-/var/cache/wasmop}
export GOMODCACHE=${GOMODCACHE:-$cache/go/mod} GOCACHE=${GOCACHE:-$cache/go/build}
if [[ -z "${WASMOP_GO_TOOLCHAIN:-}" ]]; then
    WASMOP_GO_TOOLCHAIN=$(bash "$root/scripts/go-toolchain.sh" | tail -n 1)
    export WASMOP_GO_TOOLCHAIN
fi
exec bash "$root/sdk-go/build/component.sh" "$1" "$2" "$root/wit/${3:-v0.3.0}" ${4:+"$4"}
