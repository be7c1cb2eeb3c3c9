#!/usr/bin/env bash
# control-plane.sh — a real Kubernetes control plane (etcd + kube-apiserver +
# kube-controller-manager 1.20.2) on loopback, for wasmop's end-to-end tests.
#
# Usage:
#   scripts/control-plane.sh install     provision binaries (idempotent); prints the bin dir
#   scripts/control-plane.sh up DIR      start the control plane with state in DIR;
#                                        prints `export KUBECONFIG=DIR/kubeconfig`
#   scripts/control-plane.sh down DIR    stop the processes recorded in DIR/pids
#
# Environment:
#   KUBEBUILDER_ASSETS   if set and it holds etcd, kube-apiserver and kube-controller-manager,
#                        it is used as is and nothing is installed.
#   WASMOP_CACHE         cache root (default /var/cache/wasmop); binaries go to
#                        $WASMOP_CACHE/k8s-1.20.2/bin.
#
# See /work/shared/CONTROL-PLANE.md for the recipe this follows.
#
# Measured on the 2-core / 23 GB Debian bookworm dev machine (2026-11):
#   - first `install` on a fresh machine: 8 min 52 s wall, of which ~1 min apt (etcd-server,
#     golang-go 1.19, rsync, reflect2 source) + source download (34 MB), and the Go build
#     ~7 min (user 7m10s). A rebuild with the packages already present: 7 min 09 s. There is
#     no reusable Go build cache (the Makefile keeps its own under _output/, deleted with
#     the temp dir), so every cache miss costs the full build. Cache: 214 MB (apiserver
#     110 MB + controller-manager 104 MB, static, CGO_ENABLED=0). Cached `install`: ~10 ms.
#   - `up`: ready (/readyz ok, kubeconfig written) in ~5.3-6 s; the Rust harness reaches
#     readyz in 4-5.6 s, and an apiserver restart on the same etcd is ready again in ~4 s.
#   - `down`: ~1.5 s. Caveat: a 1.20 apiserver sent SIGTERM while clients hold watches open
#     waits its full 60 s shutdown timeout; `down` stops kube-controller-manager first, so
#     the apiserver's watches are gone and it exits at once.
#   - RSS after start-up: etcd ~47 MB, kube-apiserver ~300-340 MB, kube-controller-manager
#     ~88 MB.
set -euo pipefail

K8S_VERSION=1.20.2
CACHE_ROOT=${WASMOP_CACHE:-/var/cache/wasmop}
CACHE_BIN="$CACHE_ROOT/k8s-$K8S_VERSION/bin"
export DEBIAN_FRONTEND=noninteractive

log() { printf '[control-plane] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# has_binaries DIR: true when DIR holds all three executables.
has_binaries() {
    local dir=$1 b
    for b in etcd kube-apiserver kube-controller-manager; do
        [[ -x "$dir/$b" ]] || return 1
    done
}

# apt_get ARGS...: apt-get that waits for the dpkg/apt locks instead of failing
# (another process on the machine may be running apt at the same time).
apt_get() {
    local tries=0
    while true; do
        if apt-get -o DPkg::Lock::Timeout=600 "$@" >&2; then
            return 0
        fi
        tries=$((tries + 1))
        if ((tries >= 5)); then
            die "apt-get $* failed $tries times"
        fi
        log "apt-get $* failed (lock held?); retrying in 15 s"
        sleep 15
    done
}

# install_packages PKG...: install Debian packages, running `apt-get update` first
# once per invocation of this script.
APT_UPDATED=0
install_packages() {
    if ((APT_UPDATED == 0)); then
        apt_get update
        APT_UPDATED=1
    fi
    apt_get install -y --no-install-recommends "$@"
}

# ensure_etcd: etcd must be installed even when the k8s binaries come from a restored
# cache (the cache only holds a symlink to /usr/bin/etcd).
ensure_etcd() {
    if [[ ! -x /usr/bin/etcd ]]; then
        log "installing etcd-server"
        install_packages etcd-server
    fi
}

# add_deb_src: add a deb822 deb-src entry for bookworm main, with the same URI(s)
# and keyring as the existing debian.sources stanza(s) that serve `bookworm`.
add_deb_src() {
    local src=/etc/apt/sources.list.d/wasmop-deb-src.sources
    [[ -f "$src" ]] && return 0
    local uris signed
    uris=$(awk '
        /^[[:space:]]*$/ { if (suite && uri != "") print uri; suite = 0; uri = ""; next }
        /^URIs:/ { uri = $0; sub(/^URIs:[[:space:]]*/, "", uri) }
        /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") suite = 1 }
        END { if (suite && uri != "") print uri }
    ' /etc/apt/sources.list.d/debian.sources 2>/dev/null | tr '\n' ' ' | sed 's/ *$//')
    [[ -n "$uris" ]] || uris=http://deb.debian.org/debian
    signed=/usr/share/keyrings/debian-archive-keyring.gpg
    log "adding $src (URIs: $uris)"
    cat >"$src" <<SRC
Types: deb-src
URIs: $uris
Suites: bookworm
Components: main
Signed-By: $signed
SRC
    APT_UPDATED=0
}

cmd_install() {
    # 1. An explicit asset dir wins: use it and touch nothing.
    if [[ -n "${KUBEBUILDER_ASSETS:-}" ]] && has_binaries "$KUBEBUILDER_ASSETS"; then
        log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
        echo "$KUBEBUILDER_ASSETS"
        return 0
    fi

    # Serialize concurrent installs (e.g. two test binaries on a fresh machine): the
    # second waits for the first build and then finds the cache.
    mkdir -p "$CACHE_ROOT"
    exec 9>"$CACHE_ROOT/.install.lock"
    if ! flock -n 9; then
        log "waiting for another install (lock $CACHE_ROOT/.install.lock)"
        flock 9
    fi

    # 2. Cached build: only make sure the etcd package behind the symlink exists.
    if has_binaries "$CACHE_BIN" || { [[ -x "$CACHE_BIN/kube-apiserver" && -x "$CACHE_BIN/kube-controller-manager" ]]; }; then
        ensure_etcd
        ln -sf /usr/bin/etcd "$CACHE_BIN/etcd"
        has_binaries "$CACHE_BIN" || die "cache $CACHE_BIN is incomplete"
        log "using cached binaries in $CACHE_BIN"
        echo "$CACHE_BIN"
        return 0
    fi

    # 3. Build from Debian's kubernetes source package.
    local start=$SECONDS
    add_deb_src
    local need=()
    [[ -x /usr/bin/etcd ]] || need+=(etcd-server)
    command -v go >/dev/null || need+=(golang-go)
    command -v rsync >/dev/null || need+=(rsync)
    command -v openssl >/dev/null || need+=(openssl)
    [[ -d /usr/share/gocode/src/github.com/modern-go/reflect2 ]] || need+=(golang-github-modern-go-reflect2-dev)
    # The kubernetes Makefile needs `make` too (absent from minimal images).
    command -v make >/dev/null || need+=(make)
    if ((${#need[@]} > 0)); then
        log "installing: ${need[*]}"
        install_packages "${need[@]}"
    elif ! apt-cache showsrc kubernetes 2>/dev/null | grep -q '^Version: 1\.20'; then
        # Everything is installed, but the deb-src entry has no index yet.
        apt_get update
        APT_UPDATED=1
    fi

    local work
    work=$(mktemp -d "${TMPDIR:-/tmp}/wasmop-k8s-build.XXXXXX")
    # shellcheck disable=SC2064 # expand $work now
    trap "rm -rf '$work'" EXIT

    # Fetch the source package (orig tarball with vendor/) without unpacking via dpkg-source.
    log "downloading kubernetes/bookworm source into $work"
    (cd "$work" && apt-get source --download-only kubernetes/bookworm >&2)
    local orig
    orig=$(find "$work" -maxdepth 1 -name 'kubernetes_*.orig.tar.*' | head -n1)
    [[ -n "$orig" ]] || die "no kubernetes orig tarball downloaded"
    mkdir -p "$work/src"
    tar -xf "$orig" -C "$work/src" --strip-components=1

    # Required fix: vendored reflect2 v1.0.1 crashes under Go >= 1.18 (`fatal error: fault`
    # in mapiterinit on the first CRD write); replace it with Debian's v1.0.2, minus go.mod.
    local vend="$work/src/vendor/github.com/modern-go/reflect2"
    [[ -d "$vend" ]] || die "unexpected source layout: $vend missing"
    rm -rf "$vend"
    mkdir -p "$vend"
    cp -a /usr/share/gocode/src/github.com/modern-go/reflect2/. "$vend/"
    rm -f "$vend/go.mod" "$vend/go.sum"

    # Build the two binaries, statically (no cgo).
    log "building kube-apiserver and kube-controller-manager (takes ~5+ minutes)"
    (cd "$work/src" && CGO_ENABLED=0 make WHAT="cmd/kube-apiserver cmd/kube-controller-manager" >&2)

    # Install into the cache via a temp dir and rename, so an interrupted copy never
    # looks like a complete cache.
    mkdir -p "$(dirname "$CACHE_BIN")"
    local tmpbin
    tmpbin=$(mktemp -d "$(dirname "$CACHE_BIN")/bin.tmp.XXXXXX")
    cp "$work/src/_output/local/bin/linux/amd64/kube-apiserver" \
        "$work/src/_output/local/bin/linux/amd64/kube-controller-manager" "$tmpbin/"
    ln -sf /usr/bin/etcd "$tmpbin/etcd"
    chmod 0755 "$tmpbin"
    rm -rf "$CACHE_BIN"
    mv "$tmpbin" "$CACHE_BIN"
    log "built in $((SECONDS - start)) s; binaries in $CACHE_BIN"
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

cmd_down() {
    local dir=${1:?usage: $0 down DIR}
    dir=$(cd "$dir" && pwd)
    [[ -f "$dir/pids" ]] || { log "no $dir/pids; nothing to stop"; return 0; }
    # Stop in reverse start order: controller-manager, apiserver, etcd.
    local name pid
    while read -r name pid; do
        log "stopping $name ($pid)"
        stop_pid "$dir" "$pid"
    done < <(tac "$dir/pids")
    rm -f "$dir/pids"
}

cmd_up() {
    local dir=${1:?usage: $0 up DIR}
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [[ -s "$dir/pids" ]]; then
        die "$dir/pids exists: a control plane may already run there (run \`$0 down $dir\` first)"
    fi

    # Binaries: installed/cached by `install` (its last stdout line is the bin dir).
    local bin
    bin=$(cmd_install | tail -n1)
    has_binaries "$bin" || die "no binaries in $bin"
    command -v openssl >/dev/null || install_packages openssl

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
        --secure-port "$api_port" \
        --cert-dir "$dir/certs" \
        --token-auth-file "$dir/tokens.csv" \
        --authorization-mode RBAC \
        --service-account-issuer https://kubernetes.default.svc \
        --service-account-key-file "$dir/sa.key" \
        --service-account-signing-key-file "$dir/sa.key" \
        --service-cluster-ip-range 10.0.0.0/24 \
        --disable-admission-plugins ServiceAccount

    # 3. Wait for /readyz (etcd start + apiserver bootstrap, ~2 s when warm).
    local url="https://127.0.0.1:$api_port" deadline=$((SECONDS + 60))
    local api_pid
    api_pid=$(awk '$1 == "kube-apiserver" {print $2}' "$dir/pids")
    until http_ok "$url/readyz" "$token"; do
        if ! kill -0 "$api_pid" 2>/dev/null || ((SECONDS >= deadline)); then
            log "kube-apiserver not ready at $url/readyz (exited, or 60 s passed); last lines of its log:"
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
    #    service-account tokens); no ports of its own.
    start_bg "$dir" kube-controller-manager "$bin/kube-controller-manager" \
        --kubeconfig "$dir/kubeconfig" \
        --leader-elect=false --port 0 --secure-port 0 \
        --service-account-private-key-file "$dir/sa.key" \
        --root-ca-file "$ca"

    trap - EXIT
    log "control plane ready at $url (state in $dir)"
    echo "export KUBECONFIG=$dir/kubeconfig"
}

case "${1:-}" in
install) cmd_install ;;
up) cmd_up "${2:-}" ;;
down) cmd_down "${2:-}" ;;
*) die "usage: $0 install | up DIR | down DIR" ;;
esac
