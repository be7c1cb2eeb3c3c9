#!/usr/bin/env bash
# control-plane.sh — a real Kubernetes control plane on loopback, for wasmop's demo and its
# end-to-end tests: etcd, kube-apiserver, kube-controller-manager and kube-scheduler, with
# Nodes simulated by kwok (fake kubelets: Pods are scheduled, marked Running and Ready, and no
# container runs), so Deployments become Available and StatefulSets Ready.
#
# Usage:
#   scripts/control-plane.sh install     build the binaries once (cached); prints the bin dir
#   scripts/control-plane.sh up DIR      start the control plane with state in DIR;
#                                        prints `export KUBECONFIG=DIR/kubeconfig`
#   scripts/control-plane.sh down DIR    stop the processes recorded in DIR/pids
#   scripts/control-plane.sh versions    the Kubernetes versions this script knows
#
# Environment:
#   WASMOP_K8S_VERSION   the Kubernetes version: `1.37` (the newest, default), `1.33` (the
#                        floor: kube-rs's minimum supported version), or an exact `1.3x.y`.
#   KUBEBUILDER_ASSETS   if set and it holds etcd, kube-apiserver and kube-controller-manager,
#                        it is used as is and nothing is built (kube-scheduler and kwok there
#                        are used when present; without them Pods stay Pending).
#   WASMOP_CACHE         cache root (default /var/cache/wasmop). Binaries go to
#                        $WASMOP_CACHE/k8s-<version>/bin; Go's module and build caches to
#                        $WASMOP_CACHE/go.
#   WASMOP_NODES         how many simulated Nodes `up` registers (default 2).
#
# Everything is built from Go modules served by the Go module proxy, with the machine's Go
# (1.24 or newer). `k8s.io/kubernetes` cannot be `go install`ed (its go.mod replaces the staging
# modules `k8s.io/api`, `k8s.io/apiserver`, ... with local paths), so a small wrapper module
# requires it and replaces every staging module with its published v0.<minor>.<patch>; etcd's
# server module is wrapped the same way; kwok installs as is.
set -euo pipefail

CACHE_ROOT=${WASMOP_CACHE:-/var/cache/wasmop}
ETCD_VERSION=3.6.16
KWOK_VERSION=0.8.0
# Binaries the tests need from a version's bin dir, and the ones that make Nodes.
REQUIRED=(etcd kube-apiserver kube-controller-manager)
NODES=(kube-scheduler kwok)

log() { printf '[control-plane] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# k8s_version: the exact Kubernetes version WASMOP_K8S_VERSION names.
k8s_version() {
    local want=${WASMOP_K8S_VERSION:-1.37}
    case "$want" in
    1.37 | newest) echo 1.37.2 ;;
    1.33 | floor) echo 1.33.13 ;;
    1.3[3-9].* | 1.[4-9][0-9].*) echo "$want" ;;
    *) die "WASMOP_K8S_VERSION=$want: expected 1.37, 1.33 or an exact 1.3x.y (see \`$0 versions\`)" ;;
    esac
}

K8S_VERSION=$(k8s_version)
CACHE_BIN="$CACHE_ROOT/k8s-$K8S_VERSION/bin"

# has_binaries DIR NAME...: true when DIR holds every named executable.
has_binaries() {
    local dir=$1 b
    shift
    for b in "$@"; do
        [[ -x "$dir/$b" ]] || return 1
    done
}

# go_env: Go's caches outside any checkout, static binaries, no toolchain downloads.
go_env() {
    command -v go >/dev/null || die "go not found: Kubernetes is built from Go modules and needs Go 1.24 or newer on PATH"
    local v
    v=$(go env GOVERSION)
    [[ "$v" =~ ^go1\.(2[4-9]|[3-9][0-9]) ]] || die "$v is too old to build Kubernetes 1.33+ (needs Go 1.24 or newer)"
    export GOPATH="$CACHE_ROOT/go" GOMODCACHE="$CACHE_ROOT/go/mod" GOCACHE="$CACHE_ROOT/go/build"
    export GOFLAGS="-mod=mod -trimpath" GOTOOLCHAIN=local CGO_ENABLED=0
}

# timed LABEL CMD...: run CMD, logging LABEL and how long it took.
timed() {
    local label=$1 start=$SECONDS
    shift
    log "$label ..."
    "$@" >&2 || die "$label failed"
    log "$label: done in $((SECONDS - start)) s"
}

# k8s_wrapper DIR VERSION: a Go module in DIR that builds Kubernetes VERSION's commands.
k8s_wrapper() {
    local dir=$1 version=$2 minor=${2#1.}
    mkdir -p "$dir"
    local mod
    mod=$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    [[ -f "$mod" ]] || die "the Go module proxy did not serve k8s.io/kubernetes@v$version"
    {
        printf 'module wasmop.invalid/k8s-%s\n\ngo 1.24\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$version" "$version"
        # Every `k8s.io/<staging> => ./staging/src/...` line becomes the published v0.<minor>.
        awk -v v="v0.$minor" '$2 == "=>" && $3 ~ /^\.\/staging\/src\// { printf "\t%s => %s %s\n", $1, $1, v }' "$mod"
        printf ')\n'
    } >"$dir/go.mod"
    cat >"$dir/tools.go" <<'GO'
//go:build tools

// Package tools names the commands this wrapper module builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
    (cd "$dir" && go mod tidy)
}

# k8s_ldflags VERSION: the version stamps Kubernetes' own build sets (hack/lib/version.sh), so
# the servers report VERSION at /version.
k8s_ldflags() {
    local version=$1 minor flags="-s -w" kv pkg
    minor=$(cut -d. -f2 <<<"$version")
    for kv in "gitVersion=v$version" gitMajor=1 "gitMinor=$minor" gitTreeState=clean buildDate=1970-01-01T00:00:00Z; do
        for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
            flags+=" -X $pkg.$kv"
        done
    done
    echo "$flags"
}

# build_all OUT: build every binary of K8S_VERSION into OUT (a fresh directory).
build_all() {
    local out=$1 src="$CACHE_ROOT/src/k8s-$K8S_VERSION" etcd_src="$CACHE_ROOT/src/etcd-$ETCD_VERSION" cmd
    timed "fetching Kubernetes $K8S_VERSION's modules" k8s_wrapper "$src" "$K8S_VERSION"
    local ldflags
    ldflags=$(k8s_ldflags "$K8S_VERSION")
    for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
        timed "building $cmd $K8S_VERSION" \
            bash -c 'cd "$1" && go build -ldflags "$2" -o "$3/$4" "k8s.io/kubernetes/cmd/$4"' _ "$src" "$ldflags" "$out" "$cmd"
    done
    # etcd: one build serves every Kubernetes version (3.6 is what 1.33-1.37 are tested with).
    local etcd_bin="$CACHE_ROOT/etcd-$ETCD_VERSION/etcd"
    if [[ ! -x "$etcd_bin" ]]; then
        mkdir -p "$etcd_src" "$(dirname "$etcd_bin")"
        printf 'module wasmop.invalid/etcd-%s\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 v%s\n\nreplace (\n' \
            "$ETCD_VERSION" "$ETCD_VERSION" >"$etcd_src/go.mod"
        local m
        for m in api/v3 client/pkg/v3 client/v3 pkg/v3; do
            printf '\tgo.etcd.io/etcd/%s => go.etcd.io/etcd/%s v%s\n' "$m" "$m" "$ETCD_VERSION" >>"$etcd_src/go.mod"
        done
        printf ')\n' >>"$etcd_src/go.mod"
        printf '//go:build tools\n\n// Package tools names the command this wrapper module builds.\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$etcd_src/tools.go"
        timed "fetching etcd $ETCD_VERSION's modules" bash -c 'cd "$1" && go mod tidy' _ "$etcd_src"
        timed "building etcd $ETCD_VERSION" bash -c 'cd "$1" && go build -ldflags "-s -w" -o "$2.tmp" go.etcd.io/etcd/server/v3 && mv "$2.tmp" "$2"' _ "$etcd_src" "$etcd_bin"
    fi
    cp "$etcd_bin" "$out/etcd"
    # kwok: no replace directives, so `go install` builds it as published.
    local kwok_dir="$CACHE_ROOT/kwok-$KWOK_VERSION"
    if [[ ! -x "$kwok_dir/kwok" ]]; then
        mkdir -p "$kwok_dir"
        timed "building kwok $KWOK_VERSION" env GOBIN="$kwok_dir" go install -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
    fi
    cp "$kwok_dir/kwok" "$out/kwok"
    # kwok's stages (what happens to a Node and a Pod, and when), from its own module: Nodes
    # initialize and keep a heartbeat Lease; Pods become Ready, complete, and go when deleted.
    local stages="$GOMODCACHE/sigs.k8s.io/kwok@v$KWOK_VERSION/kustomize/stage" f
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
        pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
        [[ -f "$stages/$f" ]] || die "kwok $KWOK_VERSION has no stage $f"
        printf -- '---\n' >>"$out/kwok-stages.yaml"
        cat "$stages/$f" >>"$out/kwok-stages.yaml"
    done
}

cmd_install() {
    # 1. An explicit asset dir wins: use it and touch nothing.
    if [[ -n "${KUBEBUILDER_ASSETS:-}" ]] && has_binaries "$KUBEBUILDER_ASSETS" "${REQUIRED[@]}"; then
        log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
        echo "$KUBEBUILDER_ASSETS"
        return 0
    fi

    # 2. Cached build (complete bin dirs only ever appear by rename).
    if has_binaries "$CACHE_BIN" "${REQUIRED[@]}" "${NODES[@]}" kubectl; then
        log "using cached Kubernetes $K8S_VERSION binaries in $CACHE_BIN"
        echo "$CACHE_BIN"
        return 0
    fi

    # Serialize concurrent installs of one version (e.g. two test binaries on a fresh machine):
    # the second waits for the first build and then finds the cache.
    mkdir -p "$CACHE_ROOT"
    exec 9>"$CACHE_ROOT/.install-$K8S_VERSION.lock"
    if ! flock -n 9; then
        log "waiting for another install of $K8S_VERSION (lock $CACHE_ROOT/.install-$K8S_VERSION.lock)"
        flock 9
    fi
    if has_binaries "$CACHE_BIN" "${REQUIRED[@]}" "${NODES[@]}" kubectl; then
        log "using cached Kubernetes $K8S_VERSION binaries in $CACHE_BIN"
        echo "$CACHE_BIN"
        return 0
    fi

    # 3. Build from Go modules, into a temp dir renamed into place, so an interrupted build
    #    never looks like a complete cache.
    go_env
    local start=$SECONDS
    log "building Kubernetes $K8S_VERSION from Go modules, once (several minutes on 2 cores; cached in $CACHE_BIN)"
    mkdir -p "$(dirname "$CACHE_BIN")"
    local tmpbin
    tmpbin=$(mktemp -d "$(dirname "$CACHE_BIN")/bin.tmp.XXXXXX")
    # shellcheck disable=SC2064 # expand $tmpbin now
    trap "rm -rf '$tmpbin'" EXIT
    build_all "$tmpbin"
    chmod 0755 "$tmpbin"
    rm -rf "$CACHE_BIN"
    mv "$tmpbin" "$CACHE_BIN"
    trap - EXIT
    log "Kubernetes $K8S_VERSION built in $((SECONDS - start)) s; binaries in $CACHE_BIN"
    echo "$CACHE_BIN"
}

# free_ports N: print N distinct free loopback TCP ports, one per line. All sockets are
# held open until every port is chosen, so the N ports are distinct; another process
# could still grab one before we bind it, which the callers accept (tiny window).
free_ports() {
    local n=$1
    if command -v python3 >/dev/null; then
        python3 - "$n" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
PY
    else
        # Fallback without python3: random high ports nobody accepts connections on.
        local picked=() p
        while ((${#picked[@]} < n)); do
            p=$((20000 + RANDOM % 40000))
            [[ " ${picked[*]} " == *" $p "* ]] && continue
            if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
                picked+=("$p")
            fi
        done
        printf '%s\n' "${picked[@]}"
    fi
}

# http_ok URL [TOKEN]: true when URL answers 200 with body `ok` (TLS not verified:
# this only probes readiness; the kubeconfig below does verify).
http_ok() {
    local url=$1 token=${2:-} body
    if command -v curl >/dev/null; then
        body=$(curl -ksf --max-time 2 ${token:+-H "Authorization: Bearer $token"} "$url" 2>/dev/null) || return 1
    else
        body=$(wget -qO- --no-check-certificate --timeout=2 ${token:+--header="Authorization: Bearer $token"} "$url" 2>/dev/null) || return 1
    fi
    [[ "$body" == ok* || "$body" == *'"health":"true"'* ]]
}

# start_bg DIR NAME CMD...: start CMD in its own session (so `down` can kill its whole
# process group), detached from our stdin/stdout, logging to DIR/logs/NAME.log, and
# append "NAME PID" to DIR/pids.
start_bg() {
    local dir=$1 name=$2
    shift 2
    # Non-interactive bash puts background jobs in our process group, so setsid(1)
    # does not need to fork and $! is the server's own PID (= its process group id).
    setsid "$@" </dev/null >"$dir/logs/$name.log" 2>&1 &
    echo "$name $!" >>"$dir/pids"
}

# stop_pid DIR PID: TERM the process group of PID, KILL after 5 s. Only touches PIDs whose
# command line mentions DIR, so a recycled PID of an unrelated process is never killed.
stop_pid() {
    local dir=$1 pid=$2 i
    [[ -r "/proc/$pid/cmdline" ]] || return 0
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir" || return 0
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        # A zombie (child of this shell) counts as gone.
        [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" == Z ]] && return 0
        sleep 0.1
    done
    log "pid $pid did not exit on TERM; sending KILL"
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
}

# node_yaml NAME: a Node that kwok manages (its annotation), with room for many Pods.
node_yaml() {
    cat <<NODE
---
apiVersion: v1
kind: Node
metadata:
  name: $1
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: $1
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
status:
  allocatable: {cpu: "64", memory: 256Gi, pods: "5000"}
  capacity: {cpu: "64", memory: 256Gi, pods: "5000"}
NODE
}

cmd_up() {
    local dir=${1:?usage: $0 up DIR}
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [[ -s "$dir/pids" ]]; then
        die "$dir/pids exists: a control plane may already run there (run \`$0 down $dir\` first)"
    fi

    # Binaries: built/cached by `install` (its last stdout line is the bin dir).
    local bin
    bin=$(cmd_install | tail -n1)
    has_binaries "$bin" "${REQUIRED[@]}" || die "no binaries in $bin"
    command -v openssl >/dev/null || die "openssl not found (it makes the service-account key; scripts/setup.sh installs it)"

    # State layout.
    mkdir -p "$dir/certs" "$dir/etcd" "$dir/logs"
    chmod 0700 "$dir/etcd"
    local token=admin-token
    echo "$token,admin,admin,system:masters" >"$dir/tokens.csv"
    # Service-account signing key, shared by apiserver (verify/sign) and controller-manager.
    [[ -f "$dir/sa.key" ]] || openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null

    # Free loopback ports: etcd client, etcd peer, apiserver.
    local ports etcd_port peer_port api_port
    mapfile -t ports < <(free_ports 3)
    etcd_port=${ports[0]} peer_port=${ports[1]} api_port=${ports[2]}

    # If anything below fails (set -e, die), stop whatever was started.
    # shellcheck disable=SC2064 # expand $dir now
    trap "cmd_down '$dir' >/dev/null 2>&1 || true" EXIT

    # 1. etcd, loopback only.
    start_bg "$dir" etcd "$bin/etcd" \
        --name wasmop --data-dir "$dir/etcd" \
        --listen-client-urls "http://127.0.0.1:$etcd_port" \
        --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-cluster "wasmop=http://127.0.0.1:$peer_port"

    # 2. kube-apiserver on 127.0.0.1 with a self-signed serving cert in DIR/certs,
    #    static-token auth and RBAC.
    start_bg "$dir" kube-apiserver "$bin/kube-apiserver" \
        --etcd-servers "http://127.0.0.1:$etcd_port" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
        --endpoint-reconciler-type none \
        --secure-port "$api_port" \
        --cert-dir "$dir/certs" \
        --token-auth-file "$dir/tokens.csv" \
        --authorization-mode RBAC \
        --service-account-issuer https://kubernetes.default.svc \
        --service-account-key-file "$dir/sa.key" \
        --service-account-signing-key-file "$dir/sa.key" \
        --service-cluster-ip-range 10.0.0.0/24 \
        --disable-admission-plugins ServiceAccount

    # 3. Wait for /readyz.
    local url="https://127.0.0.1:$api_port" deadline=$((SECONDS + 90))
    local api_pid
    api_pid=$(awk '$1 == "kube-apiserver" {print $2}' "$dir/pids")
    until http_ok "$url/readyz" "$token"; do
        if ! kill -0 "$api_pid" 2>/dev/null || ((SECONDS >= deadline)); then
            log "kube-apiserver not ready at $url/readyz (exited, or 90 s passed); last lines of its log:"
            tail -n 40 "$dir/logs/kube-apiserver.log" >&2 || true
            log "last lines of the etcd log:"
            tail -n 10 "$dir/logs/etcd.log" >&2 || true
            cmd_down "$dir" >/dev/null 2>&1 || true
            die "control plane did not become ready"
        fi
        sleep 0.2
    done

    # 4. kubeconfig. DIR/certs/apiserver.crt is the apiserver's self-generated serving cert
    #    followed by its self-signed CA; the cert's SANs include 127.0.0.1 (the advertise
    #    address), so it verifies as `certificate-authority` - checked here with openssl.
    local ca="$dir/certs/apiserver.crt" tls
    if openssl verify -CAfile "$ca" "$ca" >/dev/null 2>&1 &&
        openssl x509 -in "$ca" -noout -checkip 127.0.0.1 2>/dev/null | grep -q 'does match'; then
        tls="certificate-authority: $ca"
    else
        # Fallback for a cert that does not verify for 127.0.0.1: loopback test cluster only.
        log "warning: $ca does not verify for 127.0.0.1; using insecure-skip-tls-verify"
        tls="insecure-skip-tls-verify: true"
    fi
    cat >"$dir/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: wasmop
  cluster:
    server: $url
    $tls
users:
- name: admin
  user:
    token: $token
contexts:
- name: wasmop
  context:
    cluster: wasmop
    user: admin
current-context: wasmop
KC
    chmod 0600 "$dir/kubeconfig"

    # 5. kube-controller-manager (Deployment -> ReplicaSet -> Pods, garbage collection,
    #    service-account tokens, node lifecycle); serves nothing.
    start_bg "$dir" kube-controller-manager "$bin/kube-controller-manager" \
        --kubeconfig "$dir/kubeconfig" \
        --leader-elect=false --secure-port 0 \
        --service-account-private-key-file "$dir/sa.key" \
        --root-ca-file "$ca"

    # 6. Nodes that run Pods: kube-scheduler binds them, kwok plays every Node's kubelet. Its
    # heartbeats are Leases in kube-node-lease (renewed every 10 s): without them
    # kube-controller-manager marks the Nodes NotReady after its grace period, and their Pods
    # unready, until kwok's next status heartbeat minutes later.
    if has_binaries "$bin" "${NODES[@]}"; then
        start_bg "$dir" kube-scheduler "$bin/kube-scheduler" \
            --kubeconfig "$dir/kubeconfig" --leader-elect=false --secure-port 0
        start_bg "$dir" kwok "$bin/kwok" \
            --kubeconfig "$dir/kubeconfig" --config "$bin/kwok-stages.yaml" \
            --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
            --cidr 10.244.0.0/16 --node-ip 127.0.0.1 --node-lease-duration-seconds 40
        local i nodes=${WASMOP_NODES:-2}
        for ((i = 0; i < nodes; i++)); do
            node_yaml "node-$i"
        done | "$bin/kubectl" --kubeconfig "$dir/kubeconfig" apply -f - >&2
        deadline=$((SECONDS + 60))
        until "$bin/kubectl" --kubeconfig "$dir/kubeconfig" wait --for=condition=Ready nodes --all --timeout=5s >/dev/null 2>&1; do
            ((SECONDS < deadline)) || { tail -n 20 "$dir/logs/kwok.log" >&2; die "the simulated Nodes did not become Ready in 60 s"; }
        done
        log "$nodes simulated Nodes Ready (kwok $KWOK_VERSION)"
    else
        log "warning: no kube-scheduler and kwok in $bin: Pods will stay Pending"
    fi

    trap - EXIT
    log "Kubernetes $K8S_VERSION control plane ready at $url (state in $dir)"
    echo "export KUBECONFIG=$dir/kubeconfig"
}

cmd_down() {
    local dir=${1:?usage: $0 down DIR}
    dir=$(cd "$dir" && pwd)
    [[ -f "$dir/pids" ]] || { log "no $dir/pids; nothing to stop"; return 0; }
    # Stop in reverse start order: node simulator and scheduler, controller-manager,
    # apiserver, etcd.
    local name pid
    while read -r name pid; do
        log "stopping $name ($pid)"
        stop_pid "$dir" "$pid"
    done < <(tac "$dir/pids")
    rm -f "$dir/pids"
}

cmd_versions() {
    echo "newest 1.37 = 1.37.2 (default)"
    echo "floor  1.33 = 1.33.13 (kube-rs's minimum supported Kubernetes version)"
    echo "etcd $ETCD_VERSION, kwok $KWOK_VERSION"
}

case "${1:-}" in
install) cmd_install ;;
up) cmd_up "${2:-}" ;;
down) cmd_down "${2:-}" ;;
versions) cmd_versions ;;
*) die "usage: $0 install | up DIR | down DIR | versions" ;;
esac
