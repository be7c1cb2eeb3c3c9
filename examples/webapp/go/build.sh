#!/bin/sh
# Build the plugin component, against the WIT in wit/ (world `operator`: the build reads it
# from the registered plugin, `operator` once its manifest declares webhooks), into OUT
# (`sh build.sh [OUT]`, default webapp.wasm beside this script).
# Needs Go 1.24 or newer and, in $WASMOP_GO_TOOLCHAIN, the tools README.md lists; the build
# itself is the SDK's (build/component.sh in the module github.com/wasmop/wasmop/sdk-go).
set -eu
# OUT, when given, is relative to the directory the build was started from.
out=$(realpath -m "${1:-$(dirname "$0")/webapp.wasm}")
cd "$(dirname "$0")"
# The SDK module's directory (`go list -m -f` with the .Dir field).
sdk=$(go list -m -f '{''{.Dir}}' github.com/wasmop/wasmop/sdk-go)
bash "$sdk/build/component.sh" . "$out" wit
