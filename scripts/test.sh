#!/usr/bin/env bash
# test.sh — the gates, then every test of wasmop: unit tests, SDK and plugin tests (native),
# runtime tests with plugins built from source for wasm, and end-to-end tests against a real
# control plane: the whole suite on Kubernetes 1.37 (the newest supported), then the
# compatibility set below on 1.33 (the floor). `WASMOP_K8S_VERSION=1.33 scripts/test.sh` runs
# the whole suite on 1.33 instead (and no second pass); extra arguments go to the first pass.
#
# Gates (each fails the run): the tree is formatted (rustfmt.toml), clippy finds nothing on any
# target of the workspace (warnings are errors), and the public API of the host library, the SDK
# and wasmop-types is documented (their `#![warn(missing_docs)]`, an error under `-D warnings`).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(bash scripts/setup.sh)"
export WASMOP_TOOLS WASMOP_POLYGLOT WASMOP_GO_TOOLCHAIN
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The Go SDK and the Go example: formatted, vetted, their unit tests (native).
for module in sdk-go plugins/memcached-go plugins/sidecarset-go; do
    unformatted=$(gofmt -l "$module")
    [[ -z "$unformatted" ]] || { echo "[test] gofmt: $unformatted" >&2; exit 1; }
    (cd "$module" && go vet ./... && go test ./...)
done
# The Python and JavaScript SDK modules (shipped by `wasmop new --lang python|js`) against the
# shared vectors, which the Rust SDK's tests read too (guest-sdk/vectors): plain python3 and
# node (scripts/polyglot.sh installs them with the toolchains), no build.
(cd guest-sdk/python && python3 -m unittest --quiet)
(cd guest-sdk/js && node --test)
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
cargo test --locked -p testbed --features test-v2,declares-secrets,declares-cluster-role,declares-deployments,declares-resource-claims,finalizer,admission,admits-secrets
# Tests start several control planes and wasm runtimes; two at a time fits a 2-core machine.
threads=${WASMOP_TEST_THREADS:-2}
if [[ -n "${WASMOP_K8S_VERSION:-}" ]]; then
    echo "[test] the whole suite on Kubernetes $WASMOP_K8S_VERSION" >&2
    exec cargo test --workspace --locked --no-fail-fast -- --test-threads "$threads" "$@"
fi
echo "[test] the whole suite on Kubernetes 1.37" >&2
status=0
WASMOP_K8S_VERSION=1.37 cargo test --workspace --locked --no-fail-fast -- --test-threads "$threads" "$@" || status=$?
# The compatibility set on the floor: every end-to-end test of an API whose behaviour changed
# between 1.33 and 1.37 or that the host depends on by version — server-side apply of children
# and status, CRDs with the status subresource, events.k8s.io/v1, Leases (leader election,
# sharding), admission registration and webhooks over TLS, finalizers, the host under the RBAC
# it prints, namespaced installs, and the chart and kustomize base against the server.
echo "[test] the compatibility set on Kubernetes 1.33" >&2
WASMOP_K8S_VERSION=1.33 cargo test --locked --no-fail-fast -p wasmop-e2e \
    --test control_plane --test controller --test admission --test cluster_scope --test lifecycle \
    --test namespaced --test rbac --test deploy --test helm --test sidecarset --test database --test served_kinds \
    -- --test-threads "$threads" || status=$?
WASMOP_K8S_VERSION=1.33 cargo test --locked --no-fail-fast -p wasmop --test run --test sharding \
    -- --test-threads "$threads" || status=$?
exit "$status"
