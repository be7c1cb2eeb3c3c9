"""Unit tests of the plugin's logic, in plain Python: `python3 -m unittest`."""

import unittest

import reconcile as logic
from wasmop_sdk import shown_conditions


def sample(spec):
    return {
        "apiVersion": "{{api_version}}",
        "kind": "{{Kind}}",
        "metadata": {"name": "sample", "namespace": "default", "generation": 1},
        "spec": spec,
    }


class ReconcileTest(unittest.TestCase):
    def test_applies_one_child_of_each_kind_and_waits_for_them(self):
        answer = logic.reconcile(sample({"message": "hi"}), [], {})
        self.assertEqual(len(answer["children"]), len(logic.CHILDREN))
        for kind, child in zip(logic.CHILDREN, answer["children"]):
            self.assertEqual((child["apiVersion"], child["kind"]), (logic.api_version(kind), kind["kind"]))
            self.assertEqual(child["metadata"]["name"], "sample")
        ready = answer["conditions"][0]
        self.assertEqual(ready["type"], "Ready")
        self.assertEqual(ready["status"], "False" if logic.CHILDREN else "True")

    def test_ready_once_every_child_is_observed(self):
        desired = logic.reconcile(sample({}), [], {})["children"]
        answer = logic.reconcile(sample({}), desired, {})
        self.assertEqual(answer["conditions"][0]["status"], "True")
        # What the sample shows once the host writes it: observedGeneration is its generation.
        self.assertEqual(shown_conditions(sample({}), answer["conditions"])[0]["observedGeneration"], 1)
        self.assertEqual(answer["status"], {"children": len(logic.CHILDREN)})

    def test_a_spec_of_the_wrong_shape_is_a_terminal_error_shown_on_the_parent(self):
        with self.assertRaisesRegex(logic.Terminal, "spec.message must be a string, got 3") as raised:
            logic.reconcile(sample({"message": 3}), [], {})
        self.assertNotIsInstance(raised.exception, logic.Retryable)
        ready = raised.exception.conditions[0]
        self.assertEqual((ready["type"], ready["status"], ready["reason"]), ("Ready", "False", "InvalidSpec"))

{{webhook_tests}}

if __name__ == "__main__":
    unittest.main()
