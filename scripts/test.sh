#!/usr/bin/env bash
# test.sh [all|unit|runtime|e2e] [ARGS...] — the tests of wasmop, by tier (docs/testing.md).
#
#   unit     unit tests beside the code, the plugins' and SDKs' native tests, the layer and
#            property tests: no wasm build, no cluster (seconds once compiled)
#   runtime  the host's tests with plugins built from source for wasm (Rust, Python, JavaScript,
#            Go), the mock API server included: no cluster
#   e2e      end-to-end tests against a real control plane on Kubernetes 1.37 (the newest
#            supported), then the host's container image
#   all      (the default, what CI runs through .ci/run) the gates, then every tier on 1.37, then
#            the compatibility set below on 1.33 (the floor), then the image
#
# `WASMOP_K8S_VERSION=1.33 scripts/test.sh` runs every tier on 1.33 instead (and no second pass).
# ARGS go to the test binaries of the tiers run (e.g. a name filter).
#
# Tests that need a tool cargo cannot build (helm, componentize-py/-js, the Go toolchain, the
# container image) are `#[ignore = "needs ..."]`, so a plain `cargo test` reports them as not
# run; every tier here installs its tools (scripts/setup.sh) and passes `--include-ignored`, so
# they run, and a tool that is still missing fails its test with how to install it.
#
# Gates (each fails the run): the tree is formatted (rustfmt.toml), clippy finds nothing on any
# target of the workspace (warnings are errors), and the public API of the host library, the SDK
# and wasmop-types is documented (their `#![warn(missing_docs)]`, an error under `-D warnings`).
set -euo pipefail
cd "$(dirname "$0")/.."
tier=all
case "${1:-}" in
    all | unit | runtime | e2e) tier=$1; shift ;;
esac
# The floor's control plane is built in the background below: setup installs the newest only.
eval "$(WASMOP_K8S_VERSION=${WASMOP_K8S_VERSION:-1.37} bash scripts/setup.sh)"
export WASMOP_TOOLS WASMOP_POLYGLOT WASMOP_GO_TOOLCHAIN
# Property tests (host/tests/fuzz.rs) run a fixed, reproducible sequence of cases in CI; set
# PROPTEST_RNG_SEED (or PROPTEST_CASES) to explore others.
export PROPTEST_RNG_SEED=${PROPTEST_RNG_SEED:-20261129}
# Tests start several control planes and wasm runtimes; two at a time fits a 2-core machine.
threads=${WASMOP_TEST_THREADS:-2}
run_args=(--include-ignored --test-threads "$threads" "$@")
status=0

# The host's test targets that need neither a plugin nor a cluster.
unit_tests=(layers fuzz yaml)
# The end-to-end crate's test targets but the image's, which runs last (see `image`).
mapfile -t e2e_tests < <(ls tests/tests/*.rs | xargs -n1 basename | sed 's/\.rs$//' | grep -vx image)
# The host's test targets that start a control plane (they say `ControlPlane`).
mapfile -t host_e2e_tests < <(grep -l 'ControlPlane' host/tests/*.rs | xargs -n1 basename | sed 's/\.rs$//')
# Every other test target of the host: the runtime tier (a new file lands here by default).
runtime_tests=()
for file in host/tests/*.rs; do
    name=$(basename "$file" .rs)
    [[ " ${unit_tests[*]} ${host_e2e_tests[*]} " == *" $name "* ]] || runtime_tests+=("$name")
done
as_flags() { printf -- "--test\n%s\n" "$@"; }

# Every `cargo test` of the run also copies its output to one file, so that the run ends by
# naming what failed (a CI log is often read from its end, far below a failure). `cargo_test
# ARGS...` is `cargo test ARGS...` with its status.
test_output=$(mktemp -t wasmop-test-output.XXXXXX)
cargo_test() {
    cargo test "$@" 2>&1 | tee -a "$test_output"
}
# What failed, from the recorded output of a failed run: each failed test with the start of
# its panic, and the cargo arguments that rerun the binaries that failed. (A panic of a thread
# that is not a test's, printed by a test that passed, is not a failure and not listed.)
report_failures() {
    [[ $status -ne 0 ]] || return 0
    local names name
    mapfile -t names < <(sed -n -E 's/^test (.*) \.\.\. FAILED$/\1/p' "$test_output" | sort -u)
    if ((${#names[@]} == 0)); then
        echo "[test] no Rust test failed: a step outside cargo test did (its output is above)" >&2
        return 0
    fi
    echo "[test] what failed (the output of each is above):" >&2
    for name in "${names[@]}"; do
        echo "  $name" >&2
        grep -F -A 2 "thread '$name' " "$test_output" | grep -v -E '^(test |--$)' | head -n 6 | sed 's/^/      /' >&2 || true
    done
    echo "[test] to rerun:" >&2
    grep -E -A 20 '^error: ([0-9]+ targets? failed|test failed)' "$test_output" |
        sed -n -E 's/^error: test failed, to rerun pass `(.*)`$/  cargo test \1/p; s/^ +`(.*)`$/  cargo test \1/p' | sort -u >&2 || true
}

# Builds that only the last tests need — the host's container image and, in a full run, the
# floor's control plane — start at once in the background at the lowest priority (nice 19), one
# after the other, and the tests that need them run last: on a fresh machine they take the CPU
# the tests leave idle (an end-to-end test spends much of its time waiting on a control plane)
# instead of adding their own time to the run. Both are cached, so on a warm machine they return
# at once. `start_build NAME AFTER CMD...` starts CMD once the process AFTER (if any) has ended;
# `built NAME` waits for it (in this shell: `wait` knows only its own children) and sets
# `build_output` to the last line of its output.
declare -A build_pid build_dir
start_build() {
    local name=$1 after=$2
    shift 2
    build_dir[$name]=$(mktemp -d -t "wasmop-build-$name.XXXXXX")
    nice -n 19 bash -c 'while [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null; do sleep 2; done; shift; exec "$@"' \
        _ "$after" "$@" >"${build_dir[$name]}/out" 2>"${build_dir[$name]}/err" &
    build_pid[$name]=$!
    echo "[test] building the $name in the background (its log: ${build_dir[$name]}/err)" >&2
}
built() {
    local name=$1 start=$SECONDS
    if ! wait "${build_pid[$name]}"; then
        echo "[test] building the $name failed:" >&2
        cat "${build_dir[$name]}/err" >&2
        return 1
    fi
    echo "[test] the $name is built (waited $((SECONDS - start)) s for it)" >&2
    build_output=$(tail -n 1 "${build_dir[$name]}/out")
}
stop_builds() {
    local pid
    for pid in "${build_pid[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap 'stop_builds; rm -f "$test_output"' EXIT

gates() {
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets --locked -- -D warnings
}

unit() {
    echo "[test] unit tier" >&2
    # Every crate but the host and the end-to-end crate: all of their tests (and doc tests).
    cargo_test --locked --workspace --exclude wasmop --exclude wasmop-e2e --no-fail-fast -- "${run_args[@]}" || status=$?
    mapfile -t flags < <(as_flags "${unit_tests[@]}")
    cargo_test --locked -p wasmop --lib --bins "${flags[@]}" --no-fail-fast -- "${run_args[@]}" || status=$?
    cargo_test --locked -p wasmop -p wasmop-e2e --doc --no-fail-fast || status=$?
    # The testbed plugin's feature builds (used by the runtime and end-to-end tiers) have native
    # tests of their own, which the default-feature run above does not compile.
    cargo_test --locked -p testbed --no-fail-fast \
        --features test-v2,declares-secrets,declares-cluster-role,declares-deployments,declares-resource-claims,finalizer,admission,admits-secrets ||
        status=$?
    # The Go SDK and the Go examples: formatted, vetted, their unit tests (native).
    for module in sdk-go plugins/memcached-go plugins/sidecarset-go examples/webapp/go; do
        unformatted=$(gofmt -l "$module")
        [[ -z "$unformatted" ]] || { echo "[test] gofmt: $unformatted" >&2; status=1; }
        (cd "$module" && go vet ./... && go test ./...) || status=$?
    done
    # The Rust WebApp example, outside the workspace: its own unit tests (runtime builds it).
    (cd examples/webapp/rust && cargo test --locked --offline --quiet) || status=$?
    # The Python and JavaScript SDK modules (shipped by `wasmop new --lang python|js`) against
    # the shared vectors, which the Rust SDK's tests read too (guest-sdk/vectors): plain python3
    # and node (scripts/polyglot.sh installs them with the toolchains), no build.
    (cd guest-sdk/python && python3 -m unittest --quiet) || status=$?
    (cd guest-sdk/js && node --test) || status=$?
    # The summary rewrite of scripts/bench.sh (markers kept, the rest of BENCHMARKS.md untouched).
    python3 -m unittest discover -s scripts -p bench_summary.py || status=$?
}

runtime() {
    echo "[test] runtime tier" >&2
    mapfile -t flags < <(as_flags "${runtime_tests[@]}")
    cargo_test --locked -p wasmop "${flags[@]}" --no-fail-fast -- "${run_args[@]}" || status=$?
}

e2e() {
    local version=${WASMOP_K8S_VERSION:-1.37}
    echo "[test] end-to-end tier on Kubernetes $version" >&2
    mapfile -t flags < <(as_flags "${e2e_tests[@]}")
    WASMOP_K8S_VERSION=$version cargo_test --locked -p wasmop-e2e --lib "${flags[@]}" --no-fail-fast -- "${run_args[@]}" || status=$?
    mapfile -t flags < <(as_flags "${host_e2e_tests[@]}")
    WASMOP_K8S_VERSION=$version cargo_test --locked -p wasmop "${flags[@]}" --no-fail-fast -- "${run_args[@]}" || status=$?
}

# The host's container image (a static binary on scratch, built offline): tests/tests/image.rs.
image() {
    echo "[test] the host's container image" >&2
    if built image; then
        export WASMOP_IMAGE=$build_output
    else
        status=1
    fi
    cargo_test --locked -p wasmop-e2e --test image --no-fail-fast -- "${run_args[@]}" || status=$?
}

# The compatibility set on the floor: every end-to-end test of an API whose behaviour changed
# between 1.33 and 1.37 or that the host depends on by version — server-side apply of children
# and status, CRDs with the status subresource, events.k8s.io/v1, Leases (leader election,
# sharding), admission registration and webhooks over TLS, finalizers, the host under the RBAC
# it prints, namespaced installs, and the chart and kustomize base against the server.
compatibility() {
    echo "[test] the compatibility set on Kubernetes 1.33" >&2
    built floor || status=1
    WASMOP_K8S_VERSION=1.33 cargo_test --locked --no-fail-fast -p wasmop-e2e \
        --test control_plane --test controller --test admission --test cluster_scope --test lifecycle \
        --test namespaced --test rbac --test deploy --test helm --test sidecarset --test database --test served_kinds \
        -- --include-ignored --test-threads "$threads" || status=$?
    WASMOP_K8S_VERSION=1.33 cargo_test --locked --no-fail-fast -p wasmop --test run --test sharding \
        -- --include-ignored --test-threads "$threads" || status=$?
}

case "$tier" in
    unit) unit ;;
    runtime) runtime ;;
    e2e)
        start_build image "" bash scripts/image.sh
        e2e
        image
        ;;
    all)
        # A version named: every tier on it. Otherwise every tier on the newest, then the
        # compatibility set on the floor, whose control plane builds in the background first.
        image_after=""
        if [[ -n "${WASMOP_K8S_VERSION:-}" ]]; then
            echo "[test] every tier on Kubernetes $WASMOP_K8S_VERSION" >&2
        else
            start_build floor "" env WASMOP_K8S_VERSION=1.33 bash scripts/control-plane.sh install
            image_after=${build_pid[floor]}
        fi
        start_build image "$image_after" bash scripts/image.sh
        gates
        unit
        runtime
        e2e
        [[ -n "${WASMOP_K8S_VERSION:-}" ]] || compatibility
        image
        ;;
esac
report_failures
exit "$status"
