"""The Python SDK module against the shared test vectors (`../vectors/sdk.json`), which the Rust
SDK's and the JavaScript module's tests read too: `python3 -m unittest` in this directory."""

import json
import pathlib
import unittest

import wasmop_sdk as sdk

VECTORS = json.loads((pathlib.Path(__file__).resolve().parent.parent / "vectors" / "sdk.json").read_text())


class QuantityVectors(unittest.TestCase):
    def test_quantities_parse_to_exact_nanos_and_round_up_to_units_and_millis(self):
        for case in VECTORS["quantity"]["parse"]:
            with self.subTest(text=case["text"]):
                q = sdk.Quantity.parse(case["text"])
                self.assertEqual(q.nanos, int(case["nanos"]))
                self.assertEqual(q.to_units_ceil(), case["units"])
                self.assertEqual(q.to_millis_ceil(), case["millis"])
                self.assertEqual(str(q), case["text"], "a quantity shows as written")

    def test_malformed_and_huge_quantities_are_refused_naming_the_text(self):
        for case in VECTORS["quantity"]["errors"]:
            with self.subTest(text=case["text"]):
                with self.assertRaises(sdk.QuantityError) as raised:
                    sdk.Quantity.parse(case["text"])
                self.assertEqual(str(raised.exception), case["error"])

    def test_quantities_compare_by_value_whatever_the_suffix(self):
        for case in VECTORS["quantity"]["compare"]:
            a, b = sdk.Quantity.parse(case["a"]), sdk.Quantity.parse(case["b"])
            self.assertEqual((a > b) - (a < b), case["order"], case)
            self.assertEqual(a == b, case["order"] == 0, case)

    def test_json_holds_strings_or_numbers(self):
        for case in VECTORS["quantity"]["json"]:
            with self.subTest(value=case["value"]):
                if "error" in case:
                    with self.assertRaises(sdk.QuantityError) as raised:
                        sdk.Quantity.from_json(case["value"])
                    self.assertEqual(str(raised.exception), case["error"])
                else:
                    self.assertEqual(str(sdk.Quantity.from_json(case["value"])), case["text"])


class SelectorVectors(unittest.TestCase):
    def test_selectors_match_labels_as_the_host_does(self):
        labels = VECTORS["selector"]["labels"]
        for case in VECTORS["selector"]["matches"]:
            with self.subTest(selector=case["selector"]):
                self.assertEqual(sdk.LabelSelector.parse(case["selector"]).matches(labels), case["matches"])

    def test_bad_selectors_are_refused_naming_the_requirement(self):
        for case in VECTORS["selector"]["errors"]:
            with self.subTest(selector=case["selector"]):
                with self.assertRaises(sdk.SelectorError) as raised:
                    sdk.LabelSelector.parse(case["selector"])
                self.assertEqual(str(raised.exception), case["error"])


class ConditionVectors(unittest.TestCase):
    def test_a_later_condition_of_a_type_replaces_the_earlier_one(self):
        for case in VECTORS["conditions"]["set"]:
            conditions = []
            response = sdk.Response()
            for c in case["set"]:
                conditions = sdk.set_condition(conditions, c)
                response.condition(c)
            self.assertEqual(conditions, case["conditions"], case["about"])
            self.assertEqual(response.conditions, case["conditions"], case["about"])

    def test_merged_conditions_carry_observed_generation_and_stable_transition_times(self):
        for case in VECTORS["conditions"]["merge"]:
            merged = sdk.merge_conditions(case["existing"], case["updates"], case["generation"], case["now"])
            self.assertEqual(merged, case["conditions"], case["about"])
            parent = {"metadata": {"name": "p"}, "status": {"conditions": case["existing"]}}
            if case["generation"] is not None:
                parent["metadata"]["generation"] = case["generation"]
            self.assertEqual(sdk.shown_conditions(parent, case["updates"], case["now"]), case["conditions"], case["about"])

    def test_condition_constructors_write_the_kubernetes_status(self):
        self.assertEqual(sdk.condition("Ready", True, "R", "m"), {"type": "Ready", "status": "True", "reason": "R", "message": "m"})
        self.assertEqual(sdk.false_("Ready", "R")["status"], "False")
        self.assertEqual(sdk.unknown("Ready", "R")["status"], "Unknown")
        with self.assertRaisesRegex(ValueError, "status must be True, False or Unknown"):
            sdk.condition("Ready", "yes", "R")


class ResponseVectors(unittest.TestCase):
    def test_children_of_the_wrong_shape_are_dropped_and_the_first_named(self):
        for case in VECTORS["response"]["children"]:
            with self.subTest(apply=case["apply"]):
                response = sdk.Response()
                for child in case["apply"]:
                    response.apply(child)
                self.assertEqual([c["metadata"]["name"] for c in response.children], case["applied"])
                self.assertEqual(response.error, case["error"])
                if case["error"] is None:
                    self.assertIs(response.validate(), response)
                else:
                    with self.assertRaises(sdk.Terminal) as raised:
                        response.validate()
                    self.assertEqual(str(raised.exception), case["error"])

    def test_status_must_be_an_object_and_merges(self):
        for case in VECTORS["response"]["status"]:
            with self.subTest(status=case["status"]):
                response = sdk.Response()
                for fields in case["status"]:
                    response.status(fields)
                self.assertEqual(response.status_patch, case["patch"])
                self.assertEqual(response.error, case["error"])


class FailureVectors(unittest.TestCase):
    def test_a_failure_carries_what_the_parent_shows(self):
        for case in VECTORS["failure"]:
            with self.subTest(about=case["about"]):
                failure = (sdk.Retryable if case["retryable"] else sdk.Terminal)(case["message"])
                for fields in case["status"]:
                    failure.with_status(fields)
                for c in case["conditions"]:
                    failure.with_condition(c)
                self.assertEqual(failure.retryable, case["retryable"])
                self.assertEqual(failure.shown(), case["shown"])
                self.assertEqual(str(failure), case["shown"]["message"])


class FixtureVectors(unittest.TestCase):
    def test_lookups_answer_as_the_host_and_refuse_undeclared_kinds(self):
        fixture = VECTORS["fixture"]
        context = sdk.Fixture(fixture["objects"], manifest=fixture["manifest"])
        for case in fixture["lookups"]:
            with self.subTest(about=case["about"]):
                if case["op"] == "get":
                    lookup = lambda: context.get(case["kind"], case["namespace"], case["name"])  # noqa: E731
                else:
                    lookup = lambda: context.list(case["kind"], case["namespace"], case["selector"])  # noqa: E731
                if "error" in case:
                    with self.assertRaises(sdk.LookupRefused) as raised:
                        lookup()
                    self.assertEqual(str(raised.exception), case["error"])
                    continue
                found = lookup()
                found = [] if found is None else found if isinstance(found, list) else [found]
                self.assertEqual([f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in found], case["found"])

    def test_without_a_manifest_every_kind_is_answered(self):
        objects = VECTORS["fixture"]["objects"]
        self.assertIsNotNone(sdk.Fixture(objects).get(sdk.kind("", "v1", "Secret"), None, "creds"))

    def test_a_cluster_scoped_parent_reads_every_namespace(self):
        manifest = dict(VECTORS["fixture"]["manifest"], scope="cluster")
        pods = sdk.Fixture(VECTORS["fixture"]["objects"], manifest=manifest).list(sdk.kind("", "v1", "Pod"), None, "app=web")
        self.assertEqual([(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods], [("default", "web-1"), ("default", "web-2"), ("other", "web-1")])


class RequestVectors(unittest.TestCase):
    def test_a_new_child_is_named_in_the_parents_namespace_with_the_bodys_fields(self):
        for case in VECTORS["newChild"]:
            with self.subTest(case["about"]):
                body = json.loads(json.dumps(case["body"]))
                self.assertEqual(sdk.Request(case["parent"]).new_child(case["kind"], case["name"], body), case["child"])
                self.assertEqual(body, case["body"], "the body is not changed")

    def test_a_new_child_refuses_a_body_that_is_not_an_object(self):
        with self.assertRaisesRegex(TypeError, "the body of a new child must be a JSON object, got an array"):
            sdk.Request({"metadata": {"name": "p"}}).new_child(sdk.kind("", "v1", "Pod"), "p", [])

    def test_children_and_related_objects_are_found_by_kind_and_name(self):
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "status": {"readyReplicas": 2}}
        config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1"}}
        req = sdk.Request({"metadata": {"name": "web", "namespace": "prod", "generation": 3}}, [config, deployment], [pod])
        self.assertEqual((req.name, req.namespace, req.generation, req.config), ("web", "prod", 3, {}))
        self.assertIs(req.child(sdk.kind("apps", "v1", "Deployment"), "web"), deployment)
        self.assertIsNone(req.child(sdk.kind("apps", "v1", "Deployment"), "other"))
        self.assertEqual(req.children_of(sdk.kind("", "v1", "ConfigMap")), [config])
        self.assertEqual(req.related_of(sdk.kind("", "v1", "Pod")), [pod])

    def test_a_field_is_read_through_missing_steps_as_the_default(self):
        deployment = {"status": {"readyReplicas": 2, "conditions": None}}
        self.assertEqual(sdk.field(deployment, "status", "readyReplicas", default=0), 2)
        self.assertEqual(sdk.field(deployment, "status", "availableReplicas", default=0), 0)
        self.assertEqual(sdk.field(deployment, "status", "conditions", default=[]), [])
        self.assertEqual(sdk.field(None, "status", "readyReplicas", default=0), 0)
        self.assertEqual(sdk.field({"status": "x"}, "status", "readyReplicas"), None)


if __name__ == "__main__":
    unittest.main()
