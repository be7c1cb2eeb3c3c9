#!/usr/bin/env bash
# test.sh — every test of wasmop: unit tests, SDK and plugin tests (native), runtime tests with
# plugins built from source for wasm, and end-to-end tests against a real control plane.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(bash scripts/setup.sh)"
export KUBEBUILDER_ASSETS
# Tests start several control planes and wasm runtimes; two at a time fits a 2-core machine.
exec cargo test --workspace --locked -- --test-threads "${WASMOP_TEST_THREADS:-2}" "$@"
