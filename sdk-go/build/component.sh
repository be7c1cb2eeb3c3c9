#!/usr/bin/env bash
# component.sh — build a wasmop plugin written in Go into a WebAssembly component.
#
#   bash component.sh PLUGIN_DIR OUT.wasm WIT_DIR [WORLD]
#
# PLUGIN_DIR is a Go module whose root package calls wasmop.Register from an init function;
# WIT_DIR holds the contract (`wasmop:plugin@X.Y.Z`). WORLD is what the registered plugin
# serves, read from it by default (the plugin's package runs natively once, in `go run`):
# `controller` (reconcile), `operator` (reconcile and the webhooks its manifest declares) or
# `webhook` (webhooks only, no Reconcile). A WORLD given that does not fit the plugin (a
# `controller` for a plugin declaring webhooks, say) is refused. The steps, in a temporary
# directory:
#
#   0. the world, from the registered plugin;
#   1. `wit-bindgen go` writes the bindings of WORLD and a `main` package exporting it
#      (`//go:wasmexport`, mainline Go, no TinyGo);
#   2. the entry of this SDK for that contract version (_entry/vX.Y.Z/) and what every version's
#      entry has (_entry_common/) are added beside them: they implement the exports with the
#      registered plugin, and import PLUGIN_DIR's package;
#   3. `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared` (a reactor: no main loop) in a
#      Go workspace of the entry, the plugin, this SDK and the bindings' runtime package;
#   4. `wizer` runs the module's `_initialize` (the Go runtime's start-up and the packages'
#      init functions, the plugin's Register among them) once, here, and writes the
#      initialized memory and globals as the module's data, without `_initialize`: every
#      instance then starts initialized, a copy of that memory, instead of starting the Go
#      runtime on every call. Nothing of the build machine is kept but what `_initialize`
#      reads through WASI preview 1 under wizer: no arguments, no environment, no directory,
#      the clock and random bytes (the runtime's hash seeds, the same in every instance of
#      one build). `WASMOP_GO_PREINIT=0` skips it (the runtime then starts per instance);
#   5. `wasm-tools component embed` (the world's type) and `wasm-tools component new` with the
#      WASI preview-1 reactor adapter.
#
# Needs Go 1.24 or newer on PATH and, in $WASMOP_GO_TOOLCHAIN (the directory
# scripts/go-toolchain.sh prints): wit-bindgen, wasm-tools, wasi_snapshot_preview1.reactor.wasm,
# go-pkg/ (the runtime package the bindings import, from the same wit-bindgen release) and wizer.
set -euo pipefail

log() { printf '[go-plugin] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $# -ge 3 && $# -le 4 ]] || die "usage: component.sh PLUGIN_DIR OUT.wasm WIT_DIR [WORLD]"
sdk=$(cd "$(dirname "$0")/.." && pwd)
[[ -d "$1" ]] || die "$1 is not a directory"
plugin=$(cd "$1" && pwd)
out=$2
[[ -f "$3/world.wit" ]] || die "$3 holds no world.wit: give the contract's directory (wit/v0.3.0)"
wit=$(cd "$3" && pwd)
world=${4:-}
[[ -z "$world" || "$world" =~ ^(controller|operator|webhook)$ ]] || die "world $world is not controller, operator or webhook"
tools=${WASMOP_GO_TOOLCHAIN:-}
[[ -n "$tools" ]] || die "WASMOP_GO_TOOLCHAIN is not set: run scripts/go-toolchain.sh (it prints the directory)"
preinit=${WASMOP_GO_PREINIT:-1}
[[ "$preinit" =~ ^[01]$ ]] || die "WASMOP_GO_PREINIT is $preinit: 1 (snapshot the initialized runtime, the default) or 0"
for tool in wit-bindgen wasm-tools wasi_snapshot_preview1.reactor.wasm go-pkg/go.mod $([[ $preinit == 1 ]] && echo wizer); do
    [[ -e "$tools/$tool" ]] || die "$tools has no $tool: run scripts/go-toolchain.sh"
done
command -v go >/dev/null || die "go not found: a Go plugin needs Go 1.24 or newer on PATH"
goversion=$(go env GOVERSION)
[[ "$goversion" =~ ^go1\.(2[4-9]|[3-9][0-9]) ]] || die "$goversion is too old: //go:wasmexport needs Go 1.24 or newer"

version=$(sed -n 's/^package wasmop:plugin@\([0-9][0-9.]*\);$/\1/p' "$wit/world.wit" | head -n 1)
[[ -n "$version" ]] || die "$wit/world.wit declares no wasmop:plugin package"
entry="$sdk/build/_entry/v$version"
[[ -d "$entry" ]] || die "this SDK has no entry for wasmop:plugin@$version (it has: $(ls "$sdk/build/_entry" | tr '\n' ' '))"
module=$(cd "$plugin" && GOWORK=off go list -m) || die "$plugin is not a Go module"

work=$(mktemp -d "${TMPDIR:-/tmp}/wasmop-go-plugin.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The world the registered plugin serves: its package, run natively once.
mkdir -p "$work/probe"
cat >"$work/probe/go.mod" <<GO
module wasmop.dev/probe

go 1.24
GO
cat >"$work/probe/main.go" <<GO
package main

import (
	"fmt"

	wasmop "github.com/wasmop/wasmop/sdk-go"
	_ "$module"
)

func main() {
	p := wasmop.Registered()
	if p == nil {
		fmt.Println("none")
		return
	}
	fmt.Println(len(p.Manifest.Webhooks) > 0, p.Reconcile != nil, p.Admit != nil)
}
GO
cat >"$work/probe.work" <<GO
go ${goversion#go}

use (
	./probe
	$plugin
	$sdk
)
GO
served=$(cd "$work/probe" && env -u GOOS -u GOARCH GOWORK="$work/probe.work" GOTOOLCHAIN=local go run . 2>"$work/probe.log") \
    || die "the plugin's package does not run natively to say what it serves (go run): $(cat "$work/probe.log")"
case "$served" in
    none) die "$module registers no plugin: call wasmop.Register from an init function of its root package" ;;
    "true true true") wants=operator ;;
    "true false true") wants=webhook ;;
    "false true "*) wants=controller ;;
    "true "*" false") die "$module declares webhooks in its manifest but registers no Admit" ;;
    *) die "$module registers neither Reconcile nor webhooks" ;;
esac
if [[ -z "$world" ]]; then
    world=$wants
elif [[ "$world" != "$wants" ]]; then
    die "world $world does not fit $module: it serves world $wants (its manifest's webhooks, its Reconcile); drop the WORLD argument"
fi
gen="$work/entry"
"$tools/wit-bindgen" go --world "$world" --out-dir "$gen" "$wit" >"$work/wit-bindgen.log" 2>&1 \
    || die "wit-bindgen go failed for world $world of $wit: $(cat "$work/wit-bindgen.log")"
# The entry implements every export of the world: the admission one only in `operator`.
for dir in "$entry"/*/; do
    name=$(basename "$dir")
    if grep -q "\"wit_component/$name\"" "$gen/wit_exports.go"; then
        mkdir -p "$gen/$name"
        cp "$dir"*.go "$gen/$name/"
    fi
done
cp "$entry"/*.go "$gen/"
# What every contract version's entry has: the WASI adapter's allocator.
cp "$sdk/build/_entry_common"/*.go "$gen/"
cat >"$gen/plugin.go" <<GO
package main

// The plugin's package: its init registers the plugin.
import _ "$module"
GO
# The workspace's go line is the running Go's: any module of it may ask for up to that.
cat >"$work/go.work" <<GO
go ${goversion#go}

use (
	./entry
	$plugin
	$sdk
	$tools/go-pkg
)
GO
# The generated go.mod names the runtime's release; the workspace serves it from go-pkg/.
# `-checklinkname=0`: that runtime's `cabi_realloc` may run before the Go runtime is
# initialized and then allocates with `runtime.sbrk`, a `//go:linkname` reference that the
# linker refuses by default since Go 1.23.
sed -i 's/^go .*/go 1.24/' "$gen/go.mod"
(
    cd "$gen"
    GOWORK="$work/go.work" GOOS=wasip1 GOARCH=wasm GOTOOLCHAIN=local \
        go build -buildmode=c-shared -trimpath -ldflags=-checklinkname=0 -o "$work/core.wasm" .
) || die "go build failed (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared) for $plugin"
if [[ $preinit == 1 ]]; then
    # WASI preview 1 only (wizer has no component imports): `_initialize` calls none of the
    # plugin's imports, and a call to one would fail the build here, not a call later.
    "$tools/wizer" --allow-wasi --inherit-env false --inherit-stdio true --init-func _initialize \
        -o "$work/initialized.wasm" "$work/core.wasm" >"$work/wizer.log" 2>&1 \
        || die "wizer could not pre-initialize the Go runtime (_initialize): $(cat "$work/wizer.log")"
    mv "$work/initialized.wasm" "$work/core.wasm"
fi
"$tools/wasm-tools" component embed --world "$world" "$wit" "$work/core.wasm" -o "$work/embedded.wasm" \
    || die "wasm-tools component embed failed"
"$tools/wasm-tools" component new "$work/embedded.wasm" \
    --adapt "wasi_snapshot_preview1=$tools/wasi_snapshot_preview1.reactor.wasm" -o "$work/component.wasm" \
    || die "wasm-tools component new failed"
mv "$work/component.wasm" "$out"
log "built $out ($(wc -c <"$out") bytes) from $module, wasmop:plugin@$version world $world$([[ $preinit == 1 ]] && echo ', runtime pre-initialized')"
