#!/usr/bin/env bash
# test.sh — the gates, then every test of wasmop: unit tests, SDK and plugin tests (native),
# runtime tests with plugins built from source for wasm, and end-to-end tests against a real
# control plane.
#
# Gates (each fails the run): the tree is formatted (rustfmt.toml), clippy finds nothing on any
# target of the workspace (warnings are errors), and the public API of the host library, the SDK
# and wasmop-types is documented (their `#![warn(missing_docs)]`, an error under `-D warnings`).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(bash scripts/setup.sh)"
export KUBEBUILDER_ASSETS WASMOP_TOOLS WASMOP_POLYGLOT
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The summary rewrite of scripts/bench.sh (markers kept, the rest of BENCHMARKS.md untouched).
python3 -m unittest discover -s scripts -p bench_summary.py
# The host's container image (a static binary on scratch, built offline), for tests/tests/image.rs.
WASMOP_IMAGE=$(bash scripts/image.sh | tail -n 1)
export WASMOP_IMAGE
# Property tests (host/tests/fuzz.rs) run a fixed, reproducible sequence of cases in CI; set
# PROPTEST_RNG_SEED (or PROPTEST_CASES) to explore others.
export PROPTEST_RNG_SEED=${PROPTEST_RNG_SEED:-20261129}
# The testbed plugin's feature builds (used by the end-to-end tests) have native tests of their
# own, which the default-feature workspace run below does not compile.
cargo test --locked -p testbed --features test-v2,declares-secrets,declares-cluster-role,declares-deployments,finalizer,admission,admits-secrets
# Tests start several control planes and wasm runtimes; two at a time fits a 2-core machine.
exec cargo test --workspace --locked --no-fail-fast -- --test-threads "${WASMOP_TEST_THREADS:-2}" "$@"
