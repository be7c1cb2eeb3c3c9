"""The Memcached operator as a wasmop plugin written in Python, on the SDK module
(`wasmop_sdk.py`, a link to `guest-sdk/python/wasmop_sdk.py`).

The same logic as the Rust example (`plugins/memcached`): for every `Memcached`
(`cache.example.com/v1alpha1`, namespaced) one Deployment of `spec.size` memcached pods, the
pods' names in `status.nodes`, and an `Available` condition; an invalid size is a terminal
failure that also shows `Available=False InvalidSpec` on the Memcached. The test suite checks
that both plugins plan the same actions, and show the same failures, on the same objects.

World `controller` of `wasmop:plugin@0.3.0`. Build (the commands `scripts/polyglot.sh` installs
the tool for):

    componentize-py -d wit/v0.3.0 -w controller componentize app -p plugins/memcached-py -p guest-sdk/python -o memcached-py.wasm
"""

import json

from wasmop_sdk import Failure, Request, Response, Terminal, false_, field, kind, true_
from wit_world import exports
from wit_world.exports import plugin as p
from wit_world.imports import log, types

IMAGE = "memcached:1.6.17-alpine"
PORT = 11211
INT32_MAX = 2**31 - 1

MEMCACHED = kind("cache.example.com", "v1alpha1", "Memcached")
DEPLOYMENT = kind("apps", "v1", "Deployment")
POD = kind("", "v1", "Pod")


def invalid(message):
    """A terminal failure for an invalid spec, shown on the Memcached as `Available=False
    InvalidSpec` with the same message (the next valid reconcile replaces it)."""
    return Terminal(message).with_condition(false_("Available", "InvalidSpec", message))


def desired_size(memcached):
    """`spec.size`: required, within 0..=i32::MAX."""
    spec = memcached.get("spec") or {}
    if not isinstance(spec, dict):
        raise invalid("spec must be an object")
    size = spec.get("size")
    if size is None:
        raise invalid("spec.size is required")
    if not isinstance(size, int) or isinstance(size, bool):
        raise invalid(f"spec.size must be an integer, got {json.dumps(size)}")
    if size < 0:
        raise invalid(f"spec.size must be 0 or more, got {size}")
    if size > INT32_MAX:
        raise invalid(f"spec.size must be at most {INT32_MAX}, got {size}")
    return size


def available(observed, size):
    """The `Available` condition from the observed Deployment (if any)."""
    if observed is None:
        return false_("Available", "DeploymentMissing", f"0/{size} replicas available: the Deployment does not exist yet")
    ready = field(observed, "status", "availableReplicas", default=0)
    message = f"{ready}/{size} replicas available"
    if ready >= size:
        return true_("Available", "MinimumReplicasAvailable", message)
    return false_("Available", "Progressing", message)


def reconcile(req):
    size = desired_size(req.parent)
    log.log(types.Level.DEBUG, f"memcached {req.namespace or ''}/{req.name}: want {size} replicas")
    labels = {"app": "memcached", "memcached_cr": req.name}
    container = {
        "name": "memcached",
        "image": IMAGE,
        "command": ["memcached", "-m=64", "-o", "modern", "-v"],
        "ports": [{"name": "memcached", "containerPort": PORT}],
    }
    spec = {
        "replicas": size,
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
    }
    nodes = sorted(pod["metadata"]["name"] for pod in req.related_of(POD) if field(pod, "metadata", "name") is not None)
    return (
        Response()
        .apply(req.new_child(DEPLOYMENT, req.name, {"metadata": {"labels": labels}, "spec": spec}))
        .status({"nodes": nodes})
        .condition(available(req.child(DEPLOYMENT, req.name), size))
    )


def kind_ref(k):
    return types.KindRef(group=k["group"], version=k["version"], kind=k["kind"])


class Plugin(exports.Plugin):
    def manifest(self):
        return p.PluginManifest(
            name="memcached",
            version="0.1.0",
            description="Runs a memcached Deployment of spec.size pods for each Memcached",
            parent=p.ParentKind(kind=kind_ref(MEMCACHED), scope=types.Scope.NAMESPACED),
            children=[kind_ref(DEPLOYMENT)],
            related=[p.RelatedKind(kind=kind_ref(POD), label_selector="app=memcached,memcached_cr=$(parent.name)")],
            finalizer=False,
            prune=True,
            adopt_unowned=False,
            config_schema=None,
            webhooks=[],
        )


class Reconciler(exports.Reconciler):
    def reconcile(self, request):
        try:
            return reconcile(Request.from_contract(request)).to_contract()
        except Failure as error:
            raise error.to_contract() from None
