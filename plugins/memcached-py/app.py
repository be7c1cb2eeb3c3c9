"""The Memcached operator as a wasmop plugin written in Python.

The same logic as the Rust example (`plugins/memcached`): for every `Memcached`
(`cache.example.com/v1alpha1`, namespaced) one Deployment of `spec.size` memcached pods, the
pods' names in `status.nodes`, and an `Available` condition; an invalid size is a terminal
failure that also shows `Available=False InvalidSpec` on the Memcached. The test suite checks
that both plugins plan the same actions, and show the same failures, on the same objects.

World `controller` of `wasmop:plugin@0.3.0`. Build (the commands `scripts/polyglot.sh` installs
the tool for):

    componentize-py -d wit/v0.3.0 -w controller componentize app -p plugins/memcached-py -o memcached-py.wasm
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import plugin as p
from wit_world.exports import reconciler as r
from wit_world.imports import log, types

IMAGE = "memcached:1.6.17-alpine"
PORT = 11211
INT32_MAX = 2**31 - 1

MEMCACHED = types.KindRef(group="cache.example.com", version="v1alpha1", kind="Memcached")
DEPLOYMENT = types.KindRef(group="apps", version="v1", kind="Deployment")
POD = types.KindRef(group="", version="v1", kind="Pod")


def terminal(message):
    """A terminal failure for an invalid spec, shown on the Memcached as `Available=False
    InvalidSpec` with the same message (the next valid reconcile replaces it)."""
    shown = r.Condition("Available", r.ConditionStatus.FALSE, "InvalidSpec", message)
    return Err(r.ReconcileError_Terminal(r.Failure(message=message, status=None, conditions=[shown])))


def desired_size(memcached):
    """`spec.size`: required, within 0..=i32::MAX."""
    spec = memcached.get("spec") or {}
    if not isinstance(spec, dict):
        raise terminal("spec must be an object")
    size = spec.get("size")
    if size is None:
        raise terminal("spec.size is required")
    if not isinstance(size, int) or isinstance(size, bool):
        raise terminal(f"spec.size must be an integer, got {json.dumps(size)}")
    if size < 0:
        raise terminal(f"spec.size must be 0 or more, got {size}")
    if size > INT32_MAX:
        raise terminal(f"spec.size must be at most {INT32_MAX}, got {size}")
    return size


def labels(name):
    return {"app": "memcached", "memcached_cr": name}


def deployment(name, namespace, size):
    metadata = {"name": name, "labels": labels(name)}
    if namespace is not None:
        metadata["namespace"] = namespace
    container = {
        "name": "memcached",
        "image": IMAGE,
        "command": ["memcached", "-m=64", "-o", "modern", "-v"],
        "ports": [{"name": "memcached", "containerPort": PORT}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": size,
            "selector": {"matchLabels": labels(name)},
            "template": {"metadata": {"labels": labels(name)}, "spec": {"containers": [container]}},
        },
    }


def available(observed, size):
    """The `Available` condition from the observed Deployment (if any)."""
    if observed is None:
        message = f"0/{size} replicas available: the Deployment does not exist yet"
        return r.Condition("Available", r.ConditionStatus.FALSE, "DeploymentMissing", message)
    ready = (observed.get("status") or {}).get("availableReplicas") or 0
    message = f"{ready}/{size} replicas available"
    if ready >= size:
        return r.Condition("Available", r.ConditionStatus.TRUE, "MinimumReplicasAvailable", message)
    return r.Condition("Available", r.ConditionStatus.FALSE, "Progressing", message)


def is_kind(obj, kind):
    api_version = f"{kind.group}/{kind.version}" if kind.group else kind.version
    return obj.get("apiVersion") == api_version and obj.get("kind") == kind.kind


class Plugin(exports.Plugin):
    def manifest(self):
        return p.PluginManifest(
            name="memcached",
            version="0.1.0",
            description="Runs a memcached Deployment of spec.size pods for each Memcached",
            parent=p.ParentKind(kind=MEMCACHED, scope=types.Scope.NAMESPACED),
            children=[DEPLOYMENT],
            related=[p.RelatedKind(kind=POD, label_selector="app=memcached,memcached_cr=$(parent.name)")],
            finalizer=False,
            prune=True,
            adopt_unowned=False,
            config_schema=None,
            webhooks=[],
        )


class Reconciler(exports.Reconciler):
    def reconcile(self, request):
        parent = json.loads(request.parent)
        size = desired_size(parent)
        name = parent["metadata"]["name"]
        namespace = parent["metadata"].get("namespace")
        log.log(types.Level.DEBUG, f"memcached {namespace or ''}/{name}: want {size} replicas")

        related = (json.loads(o) for o in request.related)
        nodes = sorted(pod["metadata"]["name"] for pod in related if is_kind(pod, POD) and "name" in pod.get("metadata", {}))
        children = (json.loads(o) for o in request.children)
        observed = next((c for c in children if is_kind(c, DEPLOYMENT) and c["metadata"].get("name") == name), None)

        return r.Response(
            children=[json.dumps(deployment(name, namespace, size))],
            delete=[],
            status=json.dumps({"nodes": nodes}),
            conditions=[available(observed, size)],
            events=[],
            requeue_after_ms=None,
            finalized=False,
        )
