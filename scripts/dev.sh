#!/usr/bin/env bash
# dev.sh — the local demo: installs what is missing, then `wasmop dev` starts a control plane,
# builds the example plugins, runs the host on them and applies the samples. Ctrl-C stops all.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(bash scripts/setup.sh)"
export KUBEBUILDER_ASSETS
exec cargo run --release --locked -p wasmop -- dev "$@"
