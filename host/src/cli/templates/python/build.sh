#!/bin/sh
# Build {{name}}.wasm, the plugin component, from app.py and reconcile.py against the WIT in wit/:
# `sh build.sh` writes it beside this file, `sh build.sh OUT.wasm` writes OUT.wasm (relative to
# the current directory). Needs componentize-py 0.25 on PATH (README.md says how to install it).
set -eu
case "${1:-}" in
    "") out="$(cd "$(dirname "$0")" && pwd)/{{name}}.wasm" ;;
    /*) out=$1 ;;
    *) out="$PWD/$1" ;;
esac
cd "$(dirname "$0")"
componentize-py -d wit -w {{world}} componentize app -p . -o "$out"
