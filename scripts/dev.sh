#!/usr/bin/env bash
# dev.sh — the local demo: installs what is missing, then `wasmop dev` starts a control plane,
# builds the example plugins, runs the host on them and applies the samples. Ctrl-C stops all.
# The demo runs on Kubernetes 1.37 (WASMOP_K8S_VERSION=1.33 for the floor): only that control
# plane is built on a fresh machine, not the second one the tests use.
set -euo pipefail
cd "$(dirname "$0")/.."
export WASMOP_K8S_VERSION=${WASMOP_K8S_VERSION:-1.37}
eval "$(bash scripts/setup.sh)"
exec cargo run --release --locked -p wasmop -- dev "$@"
