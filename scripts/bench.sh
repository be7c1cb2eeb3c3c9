#!/usr/bin/env bash
# bench.sh — every benchmark of wasmop in one command: build once in release, run each bench,
# collect its figures and rewrite the summary table at the top of BENCHMARKS.md.
#
#   scripts/bench.sh                 the full sizes (converge at N = 1,000 and 10,000, 1,000
#                                    parents and 1/10/50 plugins for memory, …): an hour or more
#   BENCH_QUICK=1 scripts/bench.sh   small sizes, same figures (~15 min on 2 cores)
#
# Other environment:
#   BENCH_ONLY=memory,converge  run only these benches; the others keep their rows from the
#                               summary's earlier runs (each row names its run), so a full
#                               table can be filled bench by bench;
#   BENCH_OUT=DIR               where each bench's output goes (default
#                               $CARGO_TARGET_DIR/bench-results, else target/bench-results):
#                               <bench>.out (stdout, with its figure lines), .err, .cmd, .rc;
#   BENCH_NO_REWRITE=1          leave BENCHMARKS.md alone (results only in BENCH_OUT);
#   BENCH_KNOBS='NAME=KNOBS;…'  other sizes for some benches, e.g.
#                               BENCH_KNOBS='converge-rollout=N=300 SIZE=3 ROLLOUT=4 LAT=0 RUNS=AKLPPLKA':
#                               the summary's command column shows them and its run says so.
#
# Each bench prints one JSON line per figure on stdout ({"bench", "metric", "value", "baseline",
# "ratio", "unit", "target", "pass"}) besides its human output; the host's reconcile bench prints
# a table, which scripts/bench_summary.py reads. A bench that fails does not stop the others; its
# row says so. The e2e benches run on the control plane of scripts/control-plane.sh: Kubernetes
# 1.37 unless WASMOP_K8S_VERSION (or KUBEBUILDER_ASSETS) says otherwise; the summary names it.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[bench] %s\n' "$*" >&2; }

quick=${BENCH_QUICK:-}
mode=full
[ -n "$quick" ] && [ "$quick" != 0 ] && mode=quick
out=${BENCH_OUT:-${CARGO_TARGET_DIR:-target}/bench-results}
rm -rf "$out"
mkdir -p "$out"

eval "$(bash scripts/setup.sh)"
export WASMOP_TOOLS
# The peers the convergence bench runs beside the host (controller-runtime, kopf), built once.
eval "$(bash scripts/peers.sh)"
export WASMOP_PEER_CONTROLLER_RUNTIME WASMOP_PEER_KOPF
# The server the e2e benches start (the harness picks the same directory).
server_bin=${KUBEBUILDER_ASSETS:-$(bash scripts/control-plane.sh install | tail -n 1)}
server=$("$server_bin/kube-apiserver" --version 2>/dev/null | awk '{print $2}')

# The order of the table.
benches=(reconcile languages containment memory converge converge-10k converge-pods converge-rollout converge-idle admission reload pull churn sharding sharding-scale cpu_share)

wanted() {
    [ -z "${BENCH_ONLY:-}" ] && return 0
    case ",$BENCH_ONLY," in *",$1,"*) return 0 ;; esac
    return 1
}

# The knobs BENCH_KNOBS sets for bench $1, if any.
knobs_set() {
    local entry
    local IFS=';'
    for entry in ${BENCH_KNOBS:-}; do
        [ "${entry%%=*}" = "$1" ] && { echo "${entry#*=}"; return 0; }
    done
    return 1
}

# Knobs per bench: quick, then full.
knobs() {
    knobs_set "$1" && return 0
    case "$mode:$1" in
    quick:languages) echo "N=100" ;;
    full:languages) echo "N=300" ;;
    quick:memory) echo "N=200 PLUGINS=1,10 FOREIGN=500" ;;
    full:memory) echo "N=1000 PLUGINS=1,10,50 FOREIGN=5000" ;;
    quick:converge) echo "N=200 LAT=0 QUIET=3 RUNS=ACDEHKLPZ" ;;
    full:converge) echo "N=1000 LAT=0 RUNS=ACDEHKLPZZPLKHEDCA" ;;
    quick:converge-10k) echo "" ;;
    quick:converge-pods) echo "N=100 SIZE=3 LAT=0 QUIET=3 RUNS=AHKLPZ" ;;
    full:converge-pods) echo "N=1000 SIZE=3 LAT=0 RUNS=AHKLPZZPLKHA WASMOP_KCM_QPS=200 WASMOP_KCM_SYNCS=50" ;;
    full:converge-10k) echo "N=10000 LAT=0 RUNS=ACDEHKLPZZPLKHEDCA" ;;
    quick:converge-rollout) echo "N=100 SIZE=3 ROLLOUT=4 LAT=0 QUIET=3 RUNS=AHKLPZ" ;;
    full:converge-rollout) echo "N=1000 SIZE=3 ROLLOUT=4 LAT=0 RUNS=AHKLPZZPLKHA WASMOP_KCM_QPS=200 WASMOP_KCM_SYNCS=50" ;;
    quick:converge-idle) echo "N=500 IDLE=30 LAT=0 QUIET=3 WARMUP=0 RUNS=AHKLP" ;;
    full:converge-idle) echo "N=10000 IDLE=300 LAT=0 WARMUP=0 RUNS=AHKLPPLKHA WASMOP_KCM_QPS=200 WASMOP_KCM_SYNCS=50" ;;
    quick:admission) echo "N=50" ;;
    full:admission) echo "N=1000" ;;
    quick:reload) echo "RELOADS=5 RUN_RELOADS=3" ;;
    full:reload) echo "RELOADS=20 RUN_RELOADS=10" ;;
    quick:pull) echo "PUSHES=4" ;;
    full:pull) echo "PUSHES=10" ;;
    quick:churn) echo "N=300 ROUNDS=2" ;;
    full:churn) echo "N=2000 ROUNDS=3" ;;
    quick:sharding) echo "N=300 REPLICAS=1,2,3" ;;
    full:sharding) echo "N=3000 REPLICAS=1,2,3 WASMOP_KCM_QPS=200 WASMOP_KCM_SYNCS=50" ;;
    quick:sharding-scale) echo "N=1000 REPLICAS=1,3 WASMOP_KCM_DISABLE=deployment-controller" ;;
    full:sharding-scale) echo "N=100000 REPLICAS=1,3 WASMOP_KCM_DISABLE=deployment-controller" ;;
    quick:cpu_share) echo "N=100 WINDOW=20" ;;
    full:cpu_share) echo "N=1000" ;;
    *) echo "" ;;
    esac
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
load_before=$(loadavg)
# The commit the benches are built from, read before the build: commits made while a long run
# goes on do not rename what it measured.
commit=$(git rev-parse --short HEAD)
[ -n "$(git status --porcelain --untracked-files=no)" ] && commit="$commit (with uncommitted changes)"

# One build of every bench; cargo builds the package's binaries with it, so the release `wasmop`
# the memory bench runs is there too (a separate `cargo build -p wasmop` would unify other
# features and rebuild half the graph).
log "building every bench and the wasmop binary in release (once)"
cargo bench --locked -p wasmop -p wasmop-e2e --bench '*' --no-run
# How much of the link order list (host/build.rs) the binary still has: symbol names change with
# dependency versions and build settings, and a stale list gives back resident pages.
bin="${CARGO_TARGET_DIR:-target}/release/wasmop"
if [ -f host/link/symbol-order.txt.gz ] && [ -x "$bin" ]; then
    listed=$(zcat host/link/symbol-order.txt.gz | sort -u | wc -l)
    present=$(comm -12 <(zcat host/link/symbol-order.txt.gz | sort -u) <(nm --defined-only "$bin" | awk '{print $3}' | sort -u) | wc -l)
    log "link order: $present of $listed listed symbols are in $bin (regenerate with scripts/symbol_order.sh when far below)"
fi

run() {
    local name=$1 bench=$2
    local knobs
    knobs=$(knobs "$name")
    # Both packages on every command, as in the build: cargo resolves features per package set,
    # and `-p wasmop-e2e` alone would rebuild kube and the host with other features.
    local cmd="${knobs:+$knobs }cargo bench -p wasmop -p wasmop-e2e --bench $bench"
    echo "$cmd" >"$out/$name.cmd"
    log "$name: $cmd"
    local started=$SECONDS rc
    set +e
    # shellcheck disable=SC2086 # the knobs are VAR=value words
    env $knobs cargo bench --quiet --locked -p wasmop -p wasmop-e2e --bench "$bench" 2> >(tee "$out/$name.err" >&2) | tee "$out/$name.out"
    rc=${PIPESTATUS[0]}
    set -e
    echo "$rc" >"$out/$name.rc"
    log "$name: exit status $rc after $((SECONDS - started)) s"
}

for name in "${benches[@]}"; do
    wanted "$name" || continue
    case "$name" in
    converge-10k) [ "$mode" = full ] && run "$name" converge ;;
    converge-pods | converge-rollout | converge-idle) run "$name" converge ;;
    sharding-scale) run "$name" sharding ;;
    *) run "$name" "$name" ;;
    esac
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
memory=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)
python3 - "$out/meta.json" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$commit" "$load_before" "$(loadavg)" \
    "$(nproc) cores ($cpu), $memory, Linux $(uname -r)" "Kubernetes ${server:-?} (kube-apiserver, kwok nodes)" <<'EOF'
import json, sys
path, date, commit, before, after, machine, server = sys.argv[1:]
json.dump({"date": date, "commit": commit, "load_before": before, "load_after": after, "machine": machine,
           "server": server}, open(path, "w"))
EOF

if [ -n "${BENCH_KNOBS:-}" ]; then
    mode="$mode, with sizes set by BENCH_KNOBS for $(IFS=';'; for e in $BENCH_KNOBS; do printf '%s ' "${e%%=*}"; done | sed 's/ $//; s/ /, /g')"
fi
if [ -z "${BENCH_NO_REWRITE:-}" ]; then
    python3 scripts/bench_summary.py --results "$out" --benchmarks BENCHMARKS.md --mode "$mode" \
        --benches "$(IFS=,; echo "${benches[*]}")"
    log "BENCHMARKS.md summary rewritten (mode $mode); results in $out"
else
    log "results in $out (BENCHMARKS.md untouched)"
fi
