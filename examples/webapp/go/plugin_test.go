package webapp

import (
	"errors"
	"testing"

	wasmop "github.com/wasmop/wasmop/sdk-go"
)

func parse(t *testing.T, text string) wasmop.Object {
	t.Helper()
	object, err := wasmop.ParseObject(text)
	if err != nil {
		t.Fatal(err)
	}
	return object
}

func webapp(t *testing.T, spec string) wasmop.Object {
	return parse(t, `{"apiVersion": "demo.example.com/v1", "kind": "WebApp",
		"metadata": {"name": "shop", "namespace": "default", "generation": 1}, "spec": `+spec+`}`)
}

func TestANewWebAppGetsFiveLabelledChildrenAndIsProgressing(t *testing.T) {
	resp, err := Reconcile(wasmop.NewRequest(webapp(t, `{"image": "nginx:1.27", "replicas": 2}`)))
	if err != nil || resp.Validate() != nil {
		t.Fatal(err, resp.Validate())
	}
	deployment, ok := resp.Child(wasmop.NewKind("apps", "v1", "Deployment"), "shop")
	if replicas, _ := deployment.Int("spec", "replicas"); !ok || len(resp.Children) != 5 || replicas != 2 {
		t.Fatalf("children: %v", resp.Children)
	}
	if _, ok := resp.Child(wasmop.NewKind("", "v1", "ConfigMap"), "shop-config"); !ok {
		t.Error("no ConfigMap shop-config")
	}
	if ready, _ := resp.Condition("Ready"); ready.Message != "0/2 replicas ready" || ready.Status != wasmop.False {
		t.Errorf("Ready %+v", ready)
	}
}

func TestReadyOnceTheDeploymentHasEveryReplicaReady(t *testing.T) {
	deployment := parse(t, `{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": {"name": "shop", "namespace": "default"}, "status": {"readyReplicas": 2}}`)
	resp, err := Reconcile(wasmop.NewRequest(webapp(t, `{"image": "nginx:1.27", "replicas": 2}`)).WithChild(deployment))
	if err != nil {
		t.Fatal(err)
	}
	if ready, _ := resp.Condition("Ready"); ready.Reason != "AllReplicasReady" {
		t.Errorf("Ready %+v", ready)
	}
}

func TestAnInvalidSpecIsATerminalFailureThatShowsOnTheParent(t *testing.T) {
	_, err := Reconcile(wasmop.NewRequest(webapp(t, `{"image": "nginx:1.27", "replicas": 51}`)))
	var failure *wasmop.Failure
	if !errors.As(err, &failure) || failure.Retryable || failure.Message != "spec.replicas must be between 0 and 50, got 51" {
		t.Fatalf("want a terminal failure, got %#v", err)
	}
	if ready, _ := failure.Condition("Ready"); ready.Reason != "InvalidSpec" {
		t.Errorf("Ready %+v", ready)
	}
}

func TestTheWebhookRefusesAnImageWithoutATagAndAnInvalidSpec(t *testing.T) {
	for spec, want := range map[string]string{
		`{"image": "nginx:1.27"}`:                     "",
		`{"image": "registry:5000/nginx@sha256:abc"}`: "",
		`{"image": "nginx"}`:                          `spec.image must name a tag or a digest, got "nginx"`,
		`{"image": "registry:5000/nginx"}`:            `spec.image must name a tag or a digest, got "registry:5000/nginx"`,
		`{"port": 80}`:                                "spec.image must be set",
	} {
		verdict, err := Admit("validate", wasmop.NewAdmissionRequest(wasmop.Create, webapp(t, spec)))
		if err != nil || verdict.Allowed != (want == "") || (want != "" && verdict.Message != want) {
			t.Errorf("%s: %+v %v", spec, verdict, err)
		}
	}
}
