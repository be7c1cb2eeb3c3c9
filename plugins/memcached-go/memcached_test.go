package memcached

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	wasmop "github.com/wasmop/wasmop/sdk-go"
)

func memcached(t *testing.T, spec string) wasmop.Request {
	t.Helper()
	parent, err := wasmop.ParseObject(`{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": {"name": "memcached-sample", "namespace": "default", "generation": 1}, "spec": ` + spec + `}`)
	if err != nil {
		t.Fatal(err)
	}
	return wasmop.NewRequest(parent)
}

func object(t *testing.T, text string) wasmop.Object {
	t.Helper()
	o, err := wasmop.ParseObject(text)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func pod(t *testing.T, name string) wasmop.Object {
	return object(t, `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "`+name+`", "namespace": "default",
		"labels": {"app": "memcached", "memcached_cr": "memcached-sample"}}}`)
}

func observedDeployment(t *testing.T, status string) wasmop.Object {
	return object(t, `{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": {"name": "memcached-sample", "namespace": "default"}, "status": `+status+`}`)
}

func reconcile(t *testing.T, req wasmop.Request) wasmop.Response {
	t.Helper()
	resp, err := Reconcile(req)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return resp
}

func theDeployment(t *testing.T, resp wasmop.Response) wasmop.Object {
	t.Helper()
	d, ok := resp.Child(DeploymentKind, "memcached-sample")
	if !ok {
		t.Fatalf("no Deployment named like the CR in %v", resp.Children)
	}
	return d
}

func terminal(t *testing.T, err error) *wasmop.Failure {
	t.Helper()
	var f *wasmop.Failure
	if !errors.As(err, &f) || f.Retryable {
		t.Fatalf("want a terminal failure, got %#v", err)
	}
	return f
}

func TestSize3GivesOneDeploymentWith3ReplicasAndTheMemcachedImage(t *testing.T) {
	resp := reconcile(t, memcached(t, `{"size": 3}`))
	if len(resp.Children) != 1 {
		t.Fatalf("children: %v", resp.Children)
	}
	d := theDeployment(t, resp)
	if replicas, _ := d.Int("spec", "replicas"); replicas != 3 {
		t.Errorf("replicas %d", replicas)
	}
	containers, _ := d.Get("spec", "template", "spec", "containers")
	c := wasmop.Object(containers.([]any)[0].(map[string]any))
	if image, _ := c.String("image"); image != "memcached:1.6.17-alpine" {
		t.Errorf("image %q", image)
	}
	command, _ := c.Get("command")
	want := []any{"memcached", "-m=64", "-o", "modern", "-v"}
	if !reflect.DeepEqual(command, want) {
		t.Errorf("command %v", command)
	}
	ports, _ := c.Get("ports")
	port := wasmop.Object(ports.([]any)[0].(map[string]any))
	if n, _ := port.Int("containerPort"); n != 11211 {
		t.Errorf("port %v", ports)
	}
}

func TestLabelsAndSelectorSelectThePodsOfOneCR(t *testing.T) {
	d := theDeployment(t, reconcile(t, memcached(t, `{"size": 2}`)))
	want := map[string]string{"app": "memcached", "memcached_cr": "memcached-sample"}
	selector, _ := d.Map("spec", "selector", "matchLabels")
	template, _ := d.Map("spec", "template")
	for what, labels := range map[string]map[string]string{
		"deployment": d.Labels(), "selector": wasmop.Object{"metadata": map[string]any{"labels": map[string]any(selector)}}.Labels(),
		"template": template.Labels(),
	} {
		if !reflect.DeepEqual(labels, want) {
			t.Errorf("%s labels %v", what, labels)
		}
	}
	if d.Namespace() != "default" || d.APIVersion() != "apps/v1" {
		t.Errorf("deployment %v", d)
	}
}

func TestRelatedPodsBecomeSortedStatusNodes(t *testing.T) {
	req := memcached(t, `{"size": 3}`).
		WithRelated(pod(t, "memcached-sample-c")).
		WithRelated(pod(t, "memcached-sample-a")).
		WithRelated(object(t, `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "not-a-pod"}}`)).
		WithRelated(pod(t, "memcached-sample-b"))
	status, err := reconcile(t, req).StatusObject()
	if err != nil {
		t.Fatal(err)
	}
	nodes, _ := status.Get("nodes")
	if !reflect.DeepEqual(nodes, []any{"memcached-sample-a", "memcached-sample-b", "memcached-sample-c"}) {
		t.Errorf("nodes %v", nodes)
	}
}

func TestNoPodsGivesEmptyNodesNotNull(t *testing.T) {
	status, _ := reconcile(t, memcached(t, `{"size": 3}`)).StatusObject()
	if nodes, ok := status.Get("nodes"); !ok || !reflect.DeepEqual(nodes, []any{}) {
		t.Errorf("nodes %#v", nodes)
	}
}

func TestAvailableFollowsTheObservedDeployment(t *testing.T) {
	for _, tc := range []struct {
		size, status    string
		observed        bool
		want            wasmop.ConditionStatus
		reason, message string
	}{
		{`{"size": 3}`, `{"availableReplicas": 3}`, true, wasmop.True, "MinimumReplicasAvailable", "3/3 replicas available"},
		{`{"size": 3}`, `{"availableReplicas": 1}`, true, wasmop.False, "Progressing", "1/3 replicas available"},
		{`{"size": 2}`, `{}`, true, wasmop.False, "Progressing", "0/2 replicas available"},
		{`{"size": 0}`, `{}`, true, wasmop.True, "MinimumReplicasAvailable", "0/0 replicas available"},
		{`{"size": 3}`, ``, false, wasmop.False, "DeploymentMissing", "0/3 replicas available: the Deployment does not exist yet"},
	} {
		req := memcached(t, tc.size)
		if tc.observed {
			req = req.WithChild(observedDeployment(t, tc.status))
		}
		c, ok := reconcile(t, req).Condition("Available")
		if !ok || c.Status != tc.want || c.Reason != tc.reason || c.Message != tc.message {
			t.Errorf("%s %s: got %+v", tc.size, tc.status, c)
		}
	}
}

func TestAnInvalidSizeIsATerminalFailureShownAsInvalidSpec(t *testing.T) {
	for spec, message := range map[string]string{
		`{"size": -1}`:         "spec.size must be 0 or more, got -1",
		`{}`:                   "spec.size is required",
		`null`:                 "spec.size is required",
		`{"size": null}`:       "spec.size is required",
		`{"size": 4294967296}`: "spec.size must be at most 2147483647, got 4294967296",
		`{"size": 1.5}`:        "spec.size must be an integer, got 1.5",
	} {
		_, err := Reconcile(memcached(t, spec))
		f := terminal(t, err)
		if f.Message != message {
			t.Errorf("%s: %q", spec, f.Message)
		}
		available, ok := f.Condition("Available")
		if !ok || available != wasmop.ConditionFalse("Available", "InvalidSpec", message) || f.Status != nil {
			t.Errorf("%s: shows %+v, status %v", spec, f.Conditions, f.Status)
		}
	}
	_, err := Reconcile(memcached(t, `{"size": "three"}`))
	if f := terminal(t, err); !strings.HasPrefix(f.Message, "parent memcached-sample: does not match the expected type") {
		t.Errorf("%q", f.Message)
	}
}

func TestTheConfiguredImageAndPortReachTheDeployment(t *testing.T) {
	req := memcached(t, `{"size": 2}`).WithConfig(object(t, `{"image": "memcached:1.6.38-alpine", "port": 11311}`))
	d := theDeployment(t, reconcile(t, req))
	containers, _ := d.Get("spec", "template", "spec", "containers")
	c := wasmop.Object(containers.([]any)[0].(map[string]any))
	ports, _ := c.Get("ports")
	port, _ := wasmop.Object(ports.([]any)[0].(map[string]any)).Int("containerPort")
	if image, _ := c.String("image"); image != "memcached:1.6.38-alpine" || port != 11311 {
		t.Errorf("image %q port %d", image, port)
	}
	_, err := Reconcile(memcached(t, `{"size": 1}`).WithConfig(object(t, `{"imag": "x"}`)))
	if f := terminal(t, err); !strings.HasPrefix(f.Message, "plugin config:") {
		t.Errorf("%q", f.Message)
	}
}

func TestTheManifestDeclaresDeploymentsAndPodsAndPrunes(t *testing.T) {
	m := wasmop.Registered().Manifest
	if m.Name != "memcached" || m.Parent != MemcachedKind || !m.Prune || m.Finalizer {
		t.Errorf("%+v", m)
	}
	if !reflect.DeepEqual(m.Children, []wasmop.Kind{DeploymentKind}) || m.Related[0].Kind != PodKind {
		t.Errorf("%+v", m)
	}
}
