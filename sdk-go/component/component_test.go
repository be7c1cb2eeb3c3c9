package component

import (
	"testing"
	"time"

	wasmop "github.com/wasmop/wasmop/sdk-go"
)

func init() {
	wasmop.Register(wasmop.Plugin{
		Manifest: wasmop.Manifest{Name: "t", ConfigSchema: map[string]any{"type": "object"}},
		Reconcile: func(req wasmop.Request) (wasmop.Response, error) {
			if size, _ := req.Parent.Int("spec", "size"); size < 0 {
				return wasmop.Response{}, wasmop.Terminalf("negative").WithStatus(map[string]string{"phase": "Invalid"})
			}
			var resp wasmop.Response
			if size, _ := req.Parent.Int("spec", "size"); size == 7 {
				resp.Children = append(resp.Children, map[string]any{"apiVersion": "v1", "metadata": map[string]any{"name": "x"}})
				return resp, nil
			}
			resp.Apply(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": req.Name()}})
			resp.Status = map[string]any{"nodes": []string{}}
			resp.RequeueAfter = 1500 * time.Microsecond
			return resp, nil
		},
	})
}

func TestReconcileTurnsTheContractIntoPlainGoAndBack(t *testing.T) {
	resp, failure := Reconcile(Request{Parent: `{"metadata": {"name": "a"}, "spec": {"size": 1}}`, Config: "{}"})
	if failure != nil {
		t.Fatalf("%+v", failure)
	}
	if len(resp.Children) != 1 || resp.Children[0] != `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}` {
		t.Errorf("%v", resp.Children)
	}
	if resp.Status == nil || *resp.Status != `{"nodes":[]}` || resp.RequeueAfterMs == nil || *resp.RequeueAfterMs != 2 {
		t.Errorf("%+v", resp)
	}
	_, failure = Reconcile(Request{Parent: `{"metadata": {"name": "a"}, "spec": {"size": -1}}`})
	if failure == nil || failure.Retryable || failure.Message != "negative" || *failure.Status != `{"phase":"Invalid"}` {
		t.Errorf("%+v", failure)
	}
	// A response of the wrong shape never reaches the host: the plugin's bug, named.
	_, failure = Reconcile(Request{Parent: `{"metadata": {"name": "a"}, "spec": {"size": 7}}`})
	if failure == nil || failure.Retryable || failure.Message != "child #0: has no kind" {
		t.Errorf("%+v", failure)
	}
	_, failure = Reconcile(Request{Parent: `{`})
	if failure == nil || failure.Retryable || failure.Message[:20] != "parent: invalid JSON" {
		t.Errorf("%+v", failure)
	}
	if schema := ConfigSchema(Plugin().Manifest); schema == nil || *schema != `{"type":"object"}` {
		t.Errorf("%v", schema)
	}
}
