"""What the {{name}} wasmop plugin wants for one {{Kind}} ({{api_version}}).

Plain Python without the component's bindings: `python3 -m unittest` tests it as it is, and
`app.py` (the component's entry) hands the host what it returns. `wasmop_sdk.py` holds the
SDK's checks in plain Python (quantities, conditions, failures with status, responses, a lookup
fixture), with the Rust SDK's semantics and messages. Every call starts from a fresh instance:
nothing kept in a global survives to the next reconcile.
"""

import json

from wasmop_sdk import Retryable, Terminal, false_, true_

__all__ = ["Retryable", "Terminal", "reconcile"]

NAME = "{{name}}"
VERSION = "0.1.0"

# The kind this plugin reconciles (namespaced), and the kinds it creates for each parent: one
# object of each, named like the parent.
PARENT = {{parent}}
CHILDREN = [
{{children}}]
{{webhook_list}}

def invalid_spec(message):
    """A terminal failure for an invalid spec (`Terminal`: the host records it and waits for the
    object to change; `Retryable` is retried with backoff), shown on the parent as `Ready=False
    InvalidSpec` with the same message (the next valid reconcile replaces it). Add status fields
    with `.with_status({...})`."""
    return Terminal(message).with_condition(false_("Ready", "InvalidSpec", message))


def api_version(kind):
    """`group/version`, or `version` for the core group."""
    return f"{kind['group']}/{kind['version']}" if kind["group"] else kind["version"]


def kind_text(kind):
    """`group/version/Kind`, as the host writes a kind."""
    return f"{api_version(kind)}/{kind['kind']}"


def spec_of(parent):
    """The fields of `spec` the plugin reads, checked. Add the ones your CRD defines."""
    spec = parent.get("spec") or {}
    if not isinstance(spec, dict):
        raise invalid_spec(f"spec must be an object, got {json.dumps(spec)}")
    message = spec.get("message", "")
    if not isinstance(message, str):
        raise invalid_spec(f"spec.message must be a string, got {json.dumps(message)}")
    return {"message": message}


def desired(kind, parent, spec):
    """The object of `kind` the plugin wants for `parent`: named like the parent, in its
    namespace. Fill in each kind's fields here (a Deployment needs its spec)."""
    metadata = {"name": parent["metadata"]["name"]}
    if parent["metadata"].get("namespace") is not None:
        metadata["namespace"] = parent["metadata"]["namespace"]
    child = {"apiVersion": api_version(kind), "kind": kind["kind"], "metadata": metadata}
    if kind["group"] == "" and kind["kind"] == "ConfigMap":
        child["data"] = {"message": spec["message"]}
    return child


def observed(children, kind, name):
    """The observed child of `kind` named `name`, or None."""
    for child in children:
        same_kind = child.get("apiVersion") == api_version(kind) and child.get("kind") == kind["kind"]
        if same_kind and child.get("metadata", {}).get("name") == name:
            return child
    return None


def reconcile(parent, children, config):
    """Decide the desired state of `parent` from the observed `children` (objects as dicts) and
    the operator's `config` (a dict, `{}` when none).

    Returns the children to apply, the status fields to set and the conditions, as dicts.
    Raises `Terminal` for an invalid spec, `Retryable` for a transient failure.
    """
    spec = spec_of(parent)
    name = parent["metadata"]["name"]
    waiting = [kind_text(kind) for kind in CHILDREN if observed(children, kind, name) is None]
    if waiting:
        ready = false_("Ready", "Creating", f"waiting for {', '.join(waiting)}")
    else:
        ready = true_("Ready", "ChildrenReady", "every child exists")
    return {
        "children": [desired(kind, parent, spec) for kind in CHILDREN],
        "status": {"children": len(CHILDREN) - len(waiting)},
        "conditions": [ready],
    }
{{webhook_functions}}