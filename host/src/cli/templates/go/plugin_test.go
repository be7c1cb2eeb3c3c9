package {{package}}

import (
	"errors"
	"testing"

	wasmop "github.com/wasmop/wasmop/sdk-go"
)

func sample(t *testing.T, spec string) wasmop.Request {
	t.Helper()
	parent, err := wasmop.ParseObject(`{"apiVersion": "{{api_version}}", "kind": "{{Kind}}",
		"metadata": {"name": "sample", "namespace": "default", "generation": 1}, "spec": ` + spec + `}`)
	if err != nil {
		t.Fatal(err)
	}
	return wasmop.NewRequest(parent)
}

func TestAppliesOneChildOfEachKindAndWaitsForThem(t *testing.T) {
	resp, err := Reconcile(sample(t, `{"message": "hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Children) != len(Children) {
		t.Fatalf("children: %v", resp.Children)
	}
	for _, kind := range Children {
		if _, ok := resp.Child(kind, "sample"); !ok {
			t.Errorf("no %s named sample", kind)
		}
	}
	ready, _ := resp.Condition("Ready")
	if want := map[bool]wasmop.ConditionStatus{true: wasmop.False, false: wasmop.True}[len(Children) > 0]; ready.Status != want {
		t.Errorf("Ready %+v", ready)
	}
}

func TestReadyOnceEveryChildIsObserved(t *testing.T) {
	req := sample(t, `{}`)
	first, err := Reconcile(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, child := range first.Children {
		object, err := wasmop.ToObject(child)
		if err != nil {
			t.Fatal(err)
		}
		req = req.WithChild(object)
	}
	resp, err := Reconcile(req)
	if err != nil {
		t.Fatal(err)
	}
	if ready, _ := resp.Condition("Ready"); ready.Status != wasmop.True {
		t.Errorf("Ready %+v", ready)
	}
	if status := resp.Status.(Status); status.Children != len(Children) {
		t.Errorf("status %+v", status)
	}
}

func TestASpecOfTheWrongShapeIsATerminalFailure(t *testing.T) {
	_, err := Reconcile(sample(t, `{"message": 3}`))
	var failure *wasmop.Failure
	if !errors.As(err, &failure) || failure.Retryable || failure.Message != "spec.message must be a string, got 3" {
		t.Fatalf("want a terminal failure, got %#v", err)
	}
}
{{webhook_tests}}