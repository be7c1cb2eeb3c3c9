"""The Memcached operator written with kopf, as a Python user would: the same logic as the
wasmop memcached plugin (a Deployment of spec.size Pods per Memcached, status.nodes from its
Pods, an Available condition), measured beside wasmop by the convergence bench.

Run: ``kopf run --standalone --all-namespaces memcached_operator.py`` with KUBECONFIG set.
"""

import datetime

import kopf
import kubernetes

GROUP, VERSION, PLURAL = "cache.example.com", "v1alpha1", "memcacheds"
IMAGE = "memcached:1.6.17-alpine"
INT32_MAX = 2**31 - 1

_apps = None
_custom = None


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    global _apps, _custom
    kubernetes.config.load_kube_config()
    _apps = kubernetes.client.AppsV1Api()
    _custom = kubernetes.client.CustomObjectsApi()
    # kopf's defaults stay as users get them: progress in annotations, events posted.


def labels(name):
    return {"app": "memcached", "memcached_cr": name}


def desired_size(spec):
    size = spec.get("size")
    if size is None:
        raise kopf.PermanentError("spec.size is required")
    if size < 0:
        raise kopf.PermanentError(f"spec.size must be 0 or more, got {size}")
    if size > INT32_MAX:
        raise kopf.PermanentError(f"spec.size must be at most {INT32_MAX}, got {size}")
    return size


def deployment(name, namespace, size):
    ls = labels(name)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": ls},
        "spec": {
            "replicas": size,
            "selector": {"matchLabels": ls},
            "template": {
                "metadata": {"labels": ls},
                "spec": {
                    "containers": [
                        {
                            "name": "memcached",
                            "image": IMAGE,
                            "command": ["memcached", "-m=64", "-o", "modern", "-v"],
                            "ports": [{"name": "memcached", "containerPort": 11211}],
                        }
                    ]
                },
            },
        },
    }


def condition(status, reason, message, generation, old):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    previous = next((c for c in old or [] if c.get("type") == "Available"), None)
    if previous and previous.get("status") == status:
        now = previous.get("lastTransitionTime", now)
    return {
        "type": "Available",
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": now,
    }


def available(observed, size):
    if observed is None:
        return "False", "DeploymentMissing", f"0/{size} replicas available: the Deployment does not exist yet"
    ready = (observed.get("status") or {}).get("availableReplicas") or 0
    message = f"{ready}/{size} replicas available"
    if ready >= size:
        return "True", "MinimumReplicasAvailable", message
    return "False", "Progressing", message


@kopf.index("", "v1", "pods", labels={"app": "memcached"})
def pods_by_memcached(namespace, name, labels, **_):
    return {(namespace, labels.get("memcached_cr")): name}


@kopf.index("apps", "v1", "deployments", labels={"app": "memcached"})
def deployments_by_memcached(namespace, body, labels, **_):
    return {(namespace, labels.get("memcached_cr")): {"status": dict(body.get("status") or {})}}


def write_status(namespace, name, body, nodes, observed, size):
    status = body.get("status") or {}
    old = status.get("conditions")
    cond = condition(*available(observed, size), body["metadata"].get("generation"), old)
    current = next((c for c in old or [] if c.get("type") == "Available"), None)
    if status.get("nodes", []) == nodes and current == cond:
        return
    _custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, {"status": {"nodes": nodes, "conditions": [cond]}}
    )


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def reconcile(spec, name, namespace, body, pods_by_memcached, deployments_by_memcached, **_):
    try:
        size = desired_size(spec)
    except kopf.PermanentError as e:
        cond = condition("False", "InvalidSpec", str(e), body["metadata"].get("generation"), None)
        _custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, {"status": {"conditions": [cond]}}
        )
        raise
    observed = next(iter(deployments_by_memcached.get((namespace, name), [])), None)
    if observed is None:
        child = deployment(name, namespace, size)
        kopf.adopt(child)
        try:
            _apps.create_namespaced_deployment(namespace, child)
        except kubernetes.client.ApiException as e:
            if e.status != 409:
                raise
            _apps.patch_namespaced_deployment(name, namespace, {"spec": {"replicas": size}})
    else:
        _apps.patch_namespaced_deployment(name, namespace, {"spec": {"replicas": size}})
    nodes = sorted(pods_by_memcached.get((namespace, name), []))
    write_status(namespace, name, body, nodes, observed, size)


def parent_changed(namespace, cr, pods_by_memcached, deployments_by_memcached):
    if not cr:
        return
    try:
        body = _custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, cr)
    except kubernetes.client.ApiException as e:
        if e.status == 404:
            return
        raise
    try:
        size = desired_size(body.get("spec") or {})
    except kopf.PermanentError:
        return
    observed = next(iter(deployments_by_memcached.get((namespace, cr), [])), None)
    nodes = sorted(pods_by_memcached.get((namespace, cr), []))
    write_status(namespace, cr, body, nodes, observed, size)


@kopf.on.event("apps", "v1", "deployments", labels={"app": "memcached"})
def deployment_event(namespace, labels, pods_by_memcached, deployments_by_memcached, **_):
    parent_changed(namespace, labels.get("memcached_cr"), pods_by_memcached, deployments_by_memcached)


@kopf.on.event("", "v1", "pods", labels={"app": "memcached"})
def pod_event(namespace, labels, pods_by_memcached, deployments_by_memcached, **_):
    parent_changed(namespace, labels.get("memcached_cr"), pods_by_memcached, deployments_by_memcached)
