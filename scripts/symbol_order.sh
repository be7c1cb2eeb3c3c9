#!/usr/bin/env bash
# symbol_order.sh — regenerate host/link/symbol-order.txt.gz: the symbols of the release `wasmop`
# binary that start-up and the steady path touch, which host/build.rs hands the linker
# (--symbol-ordering-file) so that they sit together at the start of .text and .rodata.
#
# Usage (root; after `cargo build --release -p wasmop`, with the control plane of
# scripts/setup.sh):  scripts/symbol_order.sh
#
# What it runs: a control plane (scripts/control-plane.sh), the memcached CRD and 50 Memcacheds,
# then `wasmop run` twice per binary on the memcached plugin (the first start compiles it into
# the artifact cache; the second, profiled, loads it from there), each time converging the parents,
# reconciling 10 changed ones and serving /metrics and /readyz. Before each start the binary's
# pages are dropped from the page cache and the disk's read-ahead is set to 0 (restored on
# exit), so the pages resident in the host afterwards are the pages it touched
# (scripts/symbol_order.py lists their symbols).
#
# Symbol names change with dependency versions and build settings (a build script added to the
# host changed half of them), rarely with source edits: regenerate after such changes
# (scripts/bench.sh says how much of the list the binary still has).
#
# Environment: WASMOP_BIN (default $CARGO_TARGET_DIR/release/wasmop, else target/release/wasmop),
# KUBECTL (default kubectl on PATH or in $WASMOP_TOOLS), ALIGNED_BIN: a build of the same code
# with every function on a page of its own, profiled too. A page of WASMOP_BIN holds about ten
# functions, so its touched pages over-count what ran (27,626 symbols, 8.3 MiB, when the list was made); a
# function that ran is on a touched page of both builds, so the list keeps what both profiles
# name (19,377 symbols, 6.0 MiB). Build it with
#   CARGO_TARGET_DIR=DIR WASMOP_NO_SYMBOL_ORDER=1 RUSTFLAGS="-C llvm-args=-align-all-functions=12" \
#     cargo build --release -p wasmop --bin wasmop      # ~10 min on 2 cores, a 270 MB binary
# SYMBOL_ORDER_OUT: where the list goes (default host/link/symbol-order.txt.gz).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${WASMOP_BIN:-${CARGO_TARGET_DIR:-target}/release/wasmop}
KUBECTL=${KUBECTL:-$(command -v kubectl || echo "${WASMOP_TOOLS:-}/kubectl")}
OUT=${SYMBOL_ORDER_OUT:-host/link/symbol-order.txt.gz}
log() { printf '[symbol-order] %s\n' "$*" >&2; }

dev=$(lsblk -no PKNAME "$(df --output=source "$BIN" | tail -1)" 2>/dev/null || true)
dev=${dev:-$(basename "$(df --output=source "$BIN" | tail -1)")}
ra_file=/sys/block/$dev/queue/read_ahead_kb
ra_saved=$(cat "$ra_file")
work=$(mktemp -d)
cleanup() {
  echo "$ra_saved" > "$ra_file"
  [ -n "${host_pid:-}" ] && kill "$host_pid" 2>/dev/null || true
  scripts/control-plane.sh down "$work/cp" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

scripts/control-plane.sh up "$work/cp" >/dev/null
export KUBECONFIG=$work/cp/kubeconfig
"$KUBECTL" apply -f crds/memcached.yaml >/dev/null
"$KUBECTL" wait --for condition=established crd/memcacheds.cache.example.com >/dev/null
for i in $(seq 1 50); do
  printf 'apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: m%s, namespace: default}\nspec: {size: 0}\n---\n' "$i"
done | "$KUBECTL" apply -f - >/dev/null
mkdir -p "$work/plugins"
wasm=$(find "${WASMOP_TEST_PLUGINS_DIR:-target}" -path '*wasm32-wasip2/release/memcached.wasm' | head -1)
[ -n "$wasm" ] || { log "no memcached.wasm built (run the tests once, or cargo build -p memcached --target wasm32-wasip2 --release)"; exit 1; }
cp "$wasm" "$work/plugins/"

profile() {  # $1: binary to run, $2: output file; names are always $BIN's
  python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)" "$1"
  echo 0 > "$ra_file"
  "$1" run --plugins "$work/plugins" --kubeconfig "$KUBECONFIG" --metrics-addr 127.0.0.1:18123 \
    --cache-dir "$work/artifacts-$(basename "$2")" --concurrency 16 >"$work/host.log" 2>&1 &
  host_pid=$!
  for _ in $(seq 1 120); do curl -sf http://127.0.0.1:18123/readyz >/dev/null && break; sleep 0.5; done
  sleep 5
  for i in $(seq 1 10); do "$KUBECTL" patch memcached "m$i" --type merge -p "{\"spec\":{\"size\":$((RANDOM % 3))}}" >/dev/null; done
  sleep 5
  curl -sf http://127.0.0.1:18123/metrics >/dev/null
  if [ "$1" = "$BIN" ]; then
    python3 scripts/symbol_order.py "$host_pid" > "$2"
  else
    python3 scripts/symbol_order.py "$host_pid" "$BIN" > "$2"
  fi
  kill "$host_pid"; wait "$host_pid" || true; host_pid=
  echo "$ra_saved" > "$ra_file"
}
# Each binary is started twice on the same artifact cache and profiled the second time: the
# first start compiles the plugin in a child process (the same binary), whose pages come into
# the page cache, where the host's fault-around would map them too.
profile "$BIN" "$work/page.txt" >/dev/null 2>&1 || true
profile "$BIN" "$work/page.txt"
list=$work/page.txt
if [ -n "${ALIGNED_BIN:-}" ]; then
  profile "$ALIGNED_BIN" "$work/aligned.txt" >/dev/null 2>&1 || true
  profile "$ALIGNED_BIN" "$work/aligned.txt"
  # Executed functions are on a touched page of $BIN and have a touched base in the aligned
  # build: keep what both say, in $BIN's order.
  awk 'NR == FNR { keep[$0] = 1; next } keep[$0]' "$work/aligned.txt" "$work/page.txt" > "$work/both.txt"
  list=$work/both.txt
fi
mkdir -p "$(dirname "$OUT")"
gzip -9n < "$list" > "$OUT"
log "$(wc -l < "$list") symbols in $OUT; rebuild the release binary to use them"
