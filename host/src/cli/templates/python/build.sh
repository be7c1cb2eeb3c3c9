#!/bin/sh
# Build {{name}}.wasm, the plugin component, from app.py and reconcile.py against the WIT in wit/.
# Needs componentize-py 0.25 on PATH (README.md says how to install it).
set -eu
cd "$(dirname "$0")"
componentize-py -d wit -w {{world}} componentize app -p . -o {{name}}.wasm
