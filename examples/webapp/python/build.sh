#!/bin/sh
# Build webapp.wasm, the plugin component, from app.py and reconcile.py against the WIT in wit/.
# Needs componentize-py 0.25 on PATH (README.md says how to install it).
set -eu
out=$(realpath -m "${1:-webapp.wasm}")
cd "$(dirname "$0")"
componentize-py -d wit -w operator componentize app -p . -o "$out"
