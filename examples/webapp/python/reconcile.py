"""What the webapp wasmop plugin wants for one WebApp (demo.example.com/v1).

Plain Python without the component's bindings: `python3 -m unittest` tests it as it is, and
`app.py` (the component's entry) hands the host what it returns. `wasmop_sdk.py` holds the
SDK's checks in plain Python (quantities, conditions, failures with status, responses, a lookup
fixture), with the Rust SDK's semantics and messages. Every call starts from a fresh instance:
nothing kept in a global survives to the next reconcile.
"""

import json

from wasmop_sdk import Request, Retryable, Terminal, false_, field, true_

__all__ = ["Retryable", "Terminal", "reconcile"]

NAME = "webapp"
VERSION = "0.1.0"

# The kind this plugin reconciles (namespaced), and the kinds it creates for each parent: one
# object of each, named like the parent.
PARENT = {"group": "demo.example.com", "version": "v1", "kind": "WebApp"}
CHILDREN = [
    {"group": "", "version": "v1", "kind": "ServiceAccount"},
    {"group": "", "version": "v1", "kind": "ConfigMap"},
    {"group": "apps", "version": "v1", "kind": "Deployment"},
    {"group": "", "version": "v1", "kind": "Service"},
    {"group": "policy", "version": "v1", "kind": "PodDisruptionBudget"},
]

# The admission webhooks, each on the parent's CREATE and UPDATE (app.py declares them).
WEBHOOKS = [
    {"name": "validate", "type": "validating"},
]


SERVICE_ACCOUNT, CONFIG_MAP, DEPLOYMENT, SERVICE, PDB = CHILDREN


def problem(spec):
    """What makes a spec invalid (the first problem), or None; checked in the spec's order."""
    image = spec.get("image")
    if not isinstance(image, str) or not image:
        return "spec.image must be set"
    replicas, port = spec.get("replicas", 1), spec.get("port", 8080)
    if not isinstance(replicas, int) or not 0 <= replicas <= 50:
        return f"spec.replicas must be between 0 and 50, got {json.dumps(replicas)}"
    if not isinstance(port, int) or not 1 <= port <= 65535:
        return f"spec.port must be between 1 and 65535, got {json.dumps(port)}"
    return None


def children(req, spec):
    """The five children, in the order they are applied."""
    name = req.name
    labels = {"app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": name}
    labelled = {"labels": labels}
    container = {
        "name": "app",
        "image": spec["image"],
        "ports": [{"name": "http", "containerPort": spec.get("port", 8080)}],
        "envFrom": [{"configMapRef": {"name": f"{name}-config"}}],
    }
    pod = {"metadata": labelled, "spec": {"serviceAccountName": name, "containers": [container]}}
    return [
        req.new_child(SERVICE_ACCOUNT, name, {"metadata": labelled, "automountServiceAccountToken": False}),
        req.new_child(CONFIG_MAP, f"{name}-config", {"metadata": labelled, "data": spec.get("config") or {}}),
        req.new_child(
            DEPLOYMENT,
            name,
            {"metadata": labelled, "spec": {"replicas": spec.get("replicas", 1), "selector": {"matchLabels": labels}, "template": pod}},
        ),
        req.new_child(
            SERVICE,
            name,
            {"metadata": labelled, "spec": {"selector": labels, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}},
        ),
        req.new_child(PDB, name, {"metadata": labelled, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}}}),
    ]


def reconcile(parent, observed, config):
    """The five children of a WebApp and its status from the observed Deployment. Raises
    `Terminal` (with `phase: Invalid` and `Ready=False InvalidSpec`) for an invalid spec."""
    req = Request(parent, observed, config=config)
    spec = parent.get("spec") or {}
    message = problem(spec)
    if message is not None:
        invalid = false_("Ready", "InvalidSpec", message)
        raise Terminal(message).with_status({"phase": "Invalid"}).with_condition(invalid)
    replicas = spec.get("replicas", 1)
    ready = field(req.child(DEPLOYMENT, req.name), "status", "readyReplicas", default=0)
    message = f"{ready}/{replicas} replicas ready"
    if ready >= replicas:
        phase, condition = "Ready", true_("Ready", "AllReplicasReady", message)
    else:
        phase, condition = "Progressing", false_("Ready", "ReplicasNotReady", message)
    return {"children": children(req, spec), "status": {"readyReplicas": ready, "phase": phase}, "conditions": [condition]}


def admit_validate(obj):
    """The `validate` webhook (validating, on WebApp CREATE and UPDATE): refuses what
    `reconcile` refuses, and an image that names neither a tag nor a digest."""
    spec = obj.get("spec") or {}
    message = problem(spec if isinstance(spec, dict) else {})
    image = spec.get("image", "") if isinstance(spec, dict) else ""
    if message is None and "@" not in image and ":" not in image.rsplit("/", 1)[-1]:
        message = f"spec.image must name a tag or a digest, got {json.dumps(image)}"
    if message is not None:
        return {"allowed": False, "code": 422, "message": message}
    return {"allowed": True}


# Each webhook's function, by name.
ADMIT = {
    "validate": admit_validate,
}
