package sidecarset

import (
	"errors"
	"strings"
	"testing"

	wasmop "github.com/wasmop/wasmop/sdk-go"
)

func sidecarSet(t *testing.T, spec string) wasmop.Object {
	t.Helper()
	o, err := wasmop.ParseObject(`{"apiVersion": "apps.wasmop.dev/v1alpha1", "kind": "SidecarSet",
		"metadata": {"name": "log", "generation": 4}, "spec": ` + spec + `}`)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func reason(t *testing.T, spec string) string {
	t.Helper()
	err := ValidateSidecarSet(sidecarSet(t, spec))
	if err == nil {
		t.Fatalf("%s is valid", spec)
	}
	return err.Error()
}

func TestACompleteSidecarSetIsValid(t *testing.T) {
	spec := `{"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
		"namespace": "team-a", "containers": [{"name": "log", "image": "busybox"}, {"name": "proxy", "image": "envoy"}]}`
	if err := ValidateSidecarSet(sidecarSet(t, spec)); err != nil {
		t.Fatal(err)
	}
}

// The messages are the Rust plugin's (plugins/sidecarset/src/validate.rs and selector.rs).
func TestAnInvalidSelectorIsRefusedWithItsField(t *testing.T) {
	for spec, want := range map[string]string{
		`{"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}, "containers": [{"name": "a", "image": "b"}]}`:                    "spec.selector.matchExpressions[0]: operator In needs at least one value",
		`{"selector": {"matchExpressions": [{"key": "app", "operator": "Like", "values": ["x"]}]}, "containers": [{"name": "a", "image": "b"}]}`: `spec.selector.matchExpressions[0]: operator "Like" is not one of In, NotIn, Exists, DoesNotExist`,
		`{"selector": {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]}, "containers": []}`:                                "spec.selector.matchExpressions[0]: operator NotIn needs at least one value",
		`{"selector": {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}}`:                                              "spec.selector.matchExpressions[0]: operator Exists takes no values",
		`{"selector": {"matchExpressions": [{"key": "", "operator": "Exists"}]}}`:                                                                "spec.selector.matchExpressions[0].key: the label key is empty",
		`{"selector": {"matchLabels": {"": "x"}}}`:                                                                                               `spec.selector.matchLabels[""]: the label key is empty`,
		`{"containers": [{"name": "a", "image": "b"}]}`:                                                                                          "spec.selector is required (an empty selector {} selects every Pod)",
	} {
		if got := reason(t, spec); got != want {
			t.Errorf("%s:\n got %s\nwant %s", spec, got, want)
		}
	}
}

func TestContainersNeedANameAnImageAndDistinctNames(t *testing.T) {
	sel := `{"matchLabels": {"app": "web"}}`
	for containers, want := range map[string]string{
		`[]`:                     "spec.containers must list at least one container",
		`[{"image": "busybox"}]`: "spec.containers[0].name is required",
		`[{"name": "a", "image": "x"}, {"name": "log", "image": ""}]`: `spec.containers[1].image is required (container "log")`,
		`[{"name": "a", "image": "x"}, {"name": "a", "image": "y"}]`:  `spec.containers[1].name "a" is used by more than one container`,
		`["log"]`: "spec.containers[0] is not an object",
	} {
		if got := reason(t, `{"selector": `+sel+`, "containers": `+containers+`}`); got != want {
			t.Errorf("%s:\n got %s\nwant %s", containers, got, want)
		}
	}
}

func TestABadNamespaceOrALongNameIsRefused(t *testing.T) {
	ok := `{"selector": {}, "containers": [{"name": "a", "image": "x"}]}`
	if got := reason(t, `{"selector": {}, "namespace": "Team_A", "containers": [{"name": "a", "image": "x"}]}`); got != `spec.namespace "Team_A" is not a valid namespace name` {
		t.Error(got)
	}
	long := sidecarSet(t, ok)
	long["metadata"] = map[string]any{"name": strings.Repeat("x", 59)}
	if err := ValidateSidecarSet(long); err == nil || !strings.HasPrefix(err.Error(), `metadata.name "xxx`) ||
		!strings.HasSuffix(err.Error(), "is longer than 58 characters (the Pod annotation sidecarset.wasmop.dev/<name>-hash must fit)") {
		t.Errorf("%v", err)
	}
	generated := sidecarSet(t, ok)
	generated["metadata"] = map[string]any{"generateName": "log-"}
	if err := ValidateSidecarSet(generated); err != nil {
		t.Errorf("a SidecarSet with generateName: %v", err)
	}
}

func TestAFieldOfTheWrongTypeIsRefused(t *testing.T) {
	if got := reason(t, `{"selector": {}, "containers": {"name": "a"}}`); !strings.HasPrefix(got, "the SidecarSet does not parse: ") {
		t.Error(got)
	}
}

func TestTheWebhookAllowsAValidSidecarSetAndDeniesAnInvalidOneWith422(t *testing.T) {
	valid := sidecarSet(t, `{"selector": {}, "containers": [{"name": "a", "image": "x"}]}`)
	if v, err := Admit(Validate, wasmop.NewAdmissionRequest(wasmop.Create, valid)); err != nil || !v.Allowed {
		t.Errorf("%+v %v", v, err)
	}
	invalid := sidecarSet(t, `{"selector": {}, "containers": [{"name": "log"}]}`)
	v, err := Admit(Validate, wasmop.NewAdmissionRequest(wasmop.Update, invalid).WithOldObject(valid))
	if err != nil || v.Allowed || v.Code != Invalid || v.Message != `spec.containers[0].image is required (container "log")` {
		t.Errorf("%+v %v", v, err)
	}
	var unknown *wasmop.UnknownWebhookError
	if _, err := Admit("inject", wasmop.NewAdmissionRequest(wasmop.Create, valid)); !errors.As(err, &unknown) {
		t.Errorf("%v", err)
	}
	if _, err := Admit(Validate, wasmop.NewAdmissionRequest(wasmop.Delete, valid)); err == nil ||
		err.Error() != "webhook validate: the request has no object" {
		t.Errorf("%v", err)
	}
}

func TestTheManifestDeclaresTheValidatingWebhookOnSidecarSets(t *testing.T) {
	if len(Manifest.Webhooks) != 1 {
		t.Fatalf("%+v", Manifest.Webhooks)
	}
	w := Manifest.Webhooks[0]
	if w.Name != Validate || w.Type != wasmop.Validating || w.FailurePolicy != wasmop.Fail || w.TimeoutSeconds != 5 || len(w.Rules) != 2 {
		t.Errorf("%+v", w)
	}
	if w.Rules[1].Operations[0] != wasmop.Update || w.Rules[1].Resources[0] != "sidecarsets" {
		t.Errorf("%+v", w.Rules)
	}
}

func TestReconcileRefusesAnInvalidSidecarSetAsTerminal(t *testing.T) {
	_, err := Reconcile(wasmop.NewRequest(sidecarSet(t, `{"selector": {}, "containers": [{"name": "log"}]}`)))
	failure := wasmop.AsFailure(err)
	if failure == nil || failure.Retryable || failure.Message != `spec.containers[0].image is required (container "log")` {
		t.Fatalf("%#v", err)
	}
	if c, ok := failure.Condition("Valid"); !ok || c.Status != wasmop.False {
		t.Errorf("%+v", failure.Conditions)
	}
	resp, err := Reconcile(wasmop.NewRequest(sidecarSet(t, `{"selector": {}, "containers": [{"name": "log", "image": "busybox"}]}`)))
	if c, _ := resp.Condition("Valid"); err != nil || c.Status != wasmop.True {
		t.Errorf("%+v %v", resp, err)
	}
}
