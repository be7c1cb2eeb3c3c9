#!/usr/bin/env bash
# polyglot.sh — the toolchains that build wasmop plugins written in Python and JavaScript.
#
#   - componentize-py (PyPI, pinned below) in a virtualenv;
#   - componentize-js (npm, pinned below; it brings its StarlingMonkey engine, wizer and jco).
#
# Both go into the cache ($WASMOP_CACHE, default /var/cache/wasmop), once; the last line printed
# is a directory holding `componentize-py` and `componentize-js`. Idempotent, and safe to run
# from several processes at once (a lock).
set -euo pipefail

PY_VERSION=0.25.0
JS_VERSION=0.23.0
CACHE_ROOT=${WASMOP_CACHE:-/var/cache/wasmop}
DIR="$CACHE_ROOT/polyglot/py-$PY_VERSION-js-$JS_VERSION"

log() { printf '[polyglot] %s\n' "$*" >&2; }
ready() { [[ -f "$DIR/.complete" ]]; }

if ready; then
    echo "$DIR/bin"
    exit 0
fi
if ! command -v npm >/dev/null || ! command -v python3 >/dev/null || ! python3 -c 'import venv' 2>/dev/null; then
    log "installing npm and python3 (Debian)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update >&2
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends npm python3 python3-venv >&2
fi
mkdir -p "$CACHE_ROOT/polyglot"
exec 9>"$CACHE_ROOT/polyglot/.install.lock"
flock 9
if ready; then
    echo "$DIR/bin"
    exit 0
fi
# A virtualenv and node_modules hold absolute paths: build in place, and mark it complete last.
rm -rf "$DIR"
mkdir -p "$DIR/bin" "$DIR/js"
log "installing componentize-py $PY_VERSION (PyPI)"
python3 -m venv "$DIR/py" >&2
"$DIR/py/bin/pip" install --quiet --disable-pip-version-check "componentize-py==$PY_VERSION" >&2
log "installing @bytecodealliance/componentize-js $JS_VERSION (npm)"
(cd "$DIR/js" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund "@bytecodealliance/componentize-js@$JS_VERSION" >&2)
ln -s "$DIR/py/bin/componentize-py" "$DIR/bin/componentize-py"
ln -s "$DIR/js/node_modules/.bin/componentize-js" "$DIR/bin/componentize-js"
"$DIR/bin/componentize-py" --version >&2
"$DIR/bin/componentize-js" --version >&2
touch "$DIR/.complete"
log "componentize-py and componentize-js in $DIR/bin"
echo "$DIR/bin"
