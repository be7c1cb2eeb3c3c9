"""Unit tests of the plugin's logic, in plain Python: `python3 -m unittest`."""

import unittest

import reconcile as logic
from wasmop_sdk import shown_conditions


def sample(spec):
    return {
        "apiVersion": "demo.example.com/v1",
        "kind": "WebApp",
        "metadata": {"name": "sample", "namespace": "default", "generation": 1},
        "spec": spec,
    }


SHOP = {"image": "nginx:1.27", "replicas": 2, "port": 8080, "config": {"MODE": "live"}}


def deployment(ready):
    status = {} if ready is None else {"readyReplicas": ready}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sample", "namespace": "default"}, "status": status}


class ReconcileTest(unittest.TestCase):
    def test_applies_five_labelled_children_in_order(self):
        answer = logic.reconcile(sample(SHOP), [], {})
        kinds = [(c["kind"], c["metadata"]["name"]) for c in answer["children"]]
        expected = ["ServiceAccount", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget"]
        self.assertEqual(kinds, list(zip(expected, ["sample", "sample-config", "sample", "sample", "sample"])))
        labels = {"app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": "sample"}
        for child in answer["children"]:
            self.assertEqual((child["metadata"]["namespace"], child["metadata"]["labels"]), ("default", labels))
        account, config, app, service, budget = answer["children"]
        self.assertIs(account["automountServiceAccountToken"], False)
        self.assertEqual(config["data"], {"MODE": "live"})
        pod = app["spec"]["template"]
        self.assertEqual((app["spec"]["replicas"], pod["metadata"]["labels"], pod["spec"]["serviceAccountName"]), (2, labels, "sample"))
        container = pod["spec"]["containers"][0]
        self.assertEqual(container["ports"], [{"name": "http", "containerPort": 8080}])
        self.assertEqual(container["envFrom"], [{"configMapRef": {"name": "sample-config"}}])
        self.assertEqual(service["spec"]["ports"], [{"name": "http", "port": 80, "targetPort": "http"}])
        self.assertEqual(budget["spec"], {"maxUnavailable": 1, "selector": {"matchLabels": labels}})

    def test_defaults_fill_what_the_spec_leaves_out(self):
        answer = logic.reconcile(sample({"image": "nginx:1.27"}), [], {})
        _, config, app, _, _ = answer["children"]
        self.assertEqual((config["data"], app["spec"]["replicas"]), ({}, 1))
        self.assertEqual(app["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"], 8080)

    def test_ready_follows_the_observed_deployment(self):
        for observed, ready, phase, status, reason in [
            ([], 0, "Progressing", "False", "ReplicasNotReady"),
            ([deployment(None)], 0, "Progressing", "False", "ReplicasNotReady"),
            ([deployment(1)], 1, "Progressing", "False", "ReplicasNotReady"),
            ([deployment(2)], 2, "Ready", "True", "AllReplicasReady"),
        ]:
            answer = logic.reconcile(sample(SHOP), observed, {})
            self.assertEqual(answer["status"], {"readyReplicas": ready, "phase": phase})
            shown = shown_conditions(sample(SHOP), answer["conditions"])[0]
            expected = ("Ready", status, reason, f"{ready}/2 replicas ready", 1)
            self.assertEqual((shown["type"], shown["status"], shown["reason"], shown["message"], shown["observedGeneration"]), expected)

    def test_an_invalid_spec_is_a_terminal_error_shown_on_the_parent(self):
        for spec, message in [
            ({}, "spec.image must be set"),
            ({"image": "nginx:1.27", "replicas": 51}, "spec.replicas must be between 0 and 50, got 51"),
            ({"image": "nginx:1.27", "port": 0}, "spec.port must be between 1 and 65535, got 0"),
        ]:
            with self.assertRaises(logic.Terminal) as raised:
                logic.reconcile(sample(spec), [], {})
            self.assertEqual(str(raised.exception), message)
            self.assertEqual(raised.exception.status, {"phase": "Invalid"})
            ready = raised.exception.conditions[0]
            self.assertEqual((ready["type"], ready["status"], ready["reason"], ready["message"]), ("Ready", "False", "InvalidSpec", message))


def admission_object(spec):
    return {"apiVersion": "demo.example.com/v1", "kind": "WebApp", "metadata": {"name": "sample", "namespace": "default"}, "spec": spec}


class AdmissionTest(unittest.TestCase):
    def test_every_webhook_has_its_function(self):
        self.assertEqual(sorted(w["name"] for w in logic.WEBHOOKS), sorted(logic.ADMIT))

    def test_webhook_validate_refuses_invalid_specs_and_untagged_images(self):
        for image in ["nginx:1.27", "registry:5000/nginx:1.27", "nginx@sha256:abc"]:
            self.assertEqual(logic.ADMIT["validate"](admission_object({"image": image})), {"allowed": True}, image)
        for spec, message in [
            ({"image": "nginx"}, 'spec.image must name a tag or a digest, got "nginx"'),
            ({"image": "registry:5000/nginx"}, 'spec.image must name a tag or a digest, got "registry:5000/nginx"'),
            ({"image": ""}, "spec.image must be set"),
            ({"image": "nginx", "replicas": -1}, "spec.replicas must be between 0 and 50, got -1"),
        ]:
            verdict = logic.ADMIT["validate"](admission_object(spec))
            self.assertEqual((verdict["allowed"], verdict["code"], verdict["message"]), (False, 422, message))


if __name__ == "__main__":
    unittest.main()
