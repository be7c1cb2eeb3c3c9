"""The webapp wasmop plugin as a WebAssembly component: world `operator` of
`wasmop:plugin@0.3.0` (the WIT in `wit/`). It turns the host's request into plain Python
values for `reconcile.py`, and the answer back into the contract's records.

Build (README.md): `sh build.sh` runs
    componentize-py -d wit -w operator componentize app -p . -o webapp.wasm
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import admission as a
from wit_world.exports import plugin as p
from wit_world.exports import reconciler as r
from wit_world.imports import log, types

import reconcile as logic

STATUS = {"True": r.ConditionStatus.TRUE, "False": r.ConditionStatus.FALSE, "Unknown": r.ConditionStatus.UNKNOWN}


def condition(c):
    """A condition dict of `reconcile.py` as the contract's record."""
    return r.Condition(c["type"], STATUS[c["status"]], c["reason"], c["message"])


def failure(error):
    """A `Terminal` or `Retryable` (`wasmop_sdk.py`) as the contract's failure: its message, and
    the status and conditions the parent shows with it."""
    status = None if error.status is None else json.dumps(error.status)
    return r.Failure(message=str(error), status=status, conditions=[condition(c) for c in error.conditions])


def kind_ref(kind):
    return types.KindRef(group=kind["group"], version=kind["version"], kind=kind["kind"])


class Plugin(exports.Plugin):
    def manifest(self):
        return p.PluginManifest(
            name=logic.NAME,
            version=logic.VERSION,
            description=f"Reconciles {logic.PARENT['kind']}",
            parent=p.ParentKind(kind=kind_ref(logic.PARENT), scope=types.Scope.NAMESPACED),
            children=[kind_ref(kind) for kind in logic.CHILDREN],
            related=[],
            finalizer=False,
            prune=True,
            adopt_unowned=False,
            config_schema=None,
            webhooks=[webhook(declared) for declared in logic.WEBHOOKS],
        )


class Reconciler(exports.Reconciler):
    def reconcile(self, request):
        parent = json.loads(request.parent)
        log.log(types.Level.DEBUG, f"reconciling {parent['metadata'].get('namespace', '')}/{parent['metadata']['name']}")
        try:
            answer = logic.reconcile(parent, [json.loads(c) for c in request.children], json.loads(request.config))
        except logic.Retryable as error:
            raise Err(r.ReconcileError_Retryable(failure(error)))
        except logic.Terminal as error:
            raise Err(r.ReconcileError_Terminal(failure(error)))
        return r.Response(
            children=[json.dumps(child) for child in answer["children"]],
            delete=[],
            status=json.dumps(answer["status"]),
            conditions=[condition(c) for c in answer["conditions"]],
            events=[],
            requeue_after_ms=None,
            finalized=False,
        )


def webhook(declared):
    """A webhook of `logic.WEBHOOKS` as the contract declares it: on the parent's CREATE and
    UPDATE, failing closed."""
    return p.Webhook(
        name=declared["name"],
        type=p.WebhookType.MUTATING if declared["type"] == "mutating" else p.WebhookType.VALIDATING,
        rules=[
            p.Rule(
                operations=[types.Operation.CREATE, types.Operation.UPDATE],
                api_groups=[logic.PARENT["group"]],
                api_versions=[logic.PARENT["version"]],
                resources=["webapps"],
                scope=p.RuleScope.ALL,
            )
        ],
        namespace_selector="",
        object_selector="",
        failure_policy=p.FailurePolicy.FAIL,
        side_effects=p.SideEffects.NONE,
        timeout_seconds=5,
        # CEL expressions the API server checks before it calls the webhook, e.g.
        # p.MatchCondition(name="has-spec", expression="has(object.spec)"): empty, every request of the rules.
        match_conditions=[],
    )


class Admission(exports.Admission):
    def admit(self, webhook, request):
        answer = logic.ADMIT.get(webhook)
        if answer is None:
            raise Err(a.AdmissionError_UnknownWebhook(webhook))
        if request.object is None:
            raise Err(a.AdmissionError_Failed(f"webhook {webhook}: the request has no object"))
        verdict = answer(json.loads(request.object))
        if verdict["allowed"]:
            mutated = verdict.get("mutated")
            return a.Verdict_Allowed(a.Allowed(warnings=[], mutated=None if mutated is None else json.dumps(mutated)))
        return a.Verdict_Denied(a.Denied(code=verdict["code"], message=verdict["message"], warnings=[]))
