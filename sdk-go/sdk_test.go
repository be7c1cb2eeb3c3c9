package wasmop

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func mustParse(t *testing.T, text string) Object {
	t.Helper()
	o, err := ParseObject(text)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestObjectsKeepEveryDigitAndReadPaths(t *testing.T) {
	o := mustParse(t, `{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "namespace": "n",
		"labels": {"app": "x"}}, "spec": {"replicas": 9007199254740993}}`)
	if n, ok := o.Int("spec", "replicas"); !ok || n != 9007199254740993 {
		t.Errorf("replicas %d %v", n, ok)
	}
	if !o.Is(NewKind("apps", "v1", "Deployment")) || o.Name() != "a" || o.Namespace() != "n" || o.Labels()["app"] != "x" {
		t.Errorf("%v", o)
	}
	if _, ok := o.Get("spec", "replicas", "deeper"); ok {
		t.Error("a path through a number exists")
	}
	if _, err := ParseObject("[1]"); err == nil {
		t.Error("an array is an object")
	}
	if KindOf("v1", "Pod") != NewKind("", "v1", "Pod") || NewKind("", "v1", "Pod").String() != "v1/Pod" {
		t.Error("core kinds")
	}
}

func TestFailuresAreTerminalOrRetryableAndCarryStatus(t *testing.T) {
	f := Terminalf("spec.size must be 0 or more, got %d", -1).
		WithStatus(map[string]string{"phase": "Invalid"}).
		WithCondition(ConditionFalse("Ready", "InvalidSpec", "bad size"))
	wrapped := fmt.Errorf("memcached: %w", f)
	got := AsFailure(wrapped)
	if got.Retryable || got.Message != "memcached: spec.size must be 0 or more, got -1" || got.Status == nil {
		t.Errorf("%+v", got)
	}
	if c, ok := got.Condition("Ready"); !ok || c.Status != False {
		t.Errorf("%+v", got.Conditions)
	}
	if plain := AsFailure(errors.New("conflict")); !plain.Retryable || plain.Message != "conflict" {
		t.Errorf("%+v", plain)
	}
	if AsFailure(nil) != nil {
		t.Error("nil is a failure")
	}
	if lookup := AsFailure(&LookupError{Message: "v1/Secret is not declared"}); lookup.Retryable {
		t.Errorf("a refused lookup is retryable: %+v", lookup)
	}
}

func TestTheFixtureCacheSelectsByLabelsAndRefusesUndeclaredKinds(t *testing.T) {
	pod := func(name, app string) Object {
		return mustParse(t, `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "`+name+`", "namespace": "default",
			"labels": {"app": "`+app+`"}}}`)
	}
	cache := NewFixtureCache(pod("b", "x"), pod("a", "x"), pod("c", "y"))
	pods, err := cache.List(NewKind("", "v1", "Pod"), "default", "app=x")
	if err != nil || len(pods) != 2 || pods[0].Name() != "a" || pods[1].Name() != "b" {
		t.Errorf("%v %v", pods, err)
	}
	if pods, _ := cache.List(NewKind("", "v1", "Pod"), "", "app!=x"); len(pods) != 1 || pods[0].Name() != "c" {
		t.Errorf("%v", pods)
	}
	if o, ok, _ := cache.Get(NewKind("", "v1", "Pod"), "default", "c"); !ok || o.Name() != "c" {
		t.Error("get")
	}
	restricted := cache.RestrictTo(Manifest{Parent: NewKind("example.com", "v1", "X")})
	_, err = restricted.List(NewKind("", "v1", "Pod"), "", "")
	var lookup *LookupError
	if !errors.As(err, &lookup) || lookup.Message != "kind not declared in the manifest: v1/Pod" {
		t.Errorf("%v", err)
	}
}

func TestRequestsDecodeTheirParentAndConfig(t *testing.T) {
	req := NewRequest(mustParse(t, `{"apiVersion": "example.com/v1", "kind": "X", "metadata": {"name": "x", "generation": 4},
		"spec": {"size": "three"}}`)).WithConfig(Object{"image": "m:1", "extra": true})
	var typed struct {
		Spec struct {
			Size int `json:"size"`
		} `json:"spec"`
	}
	f := AsFailure(req.ParentAs(&typed))
	if f == nil || f.Retryable || f.Message[:41] != "parent x: does not match the expected typ" {
		t.Errorf("%+v", f)
	}
	var config struct {
		Image string `json:"image"`
	}
	if f := AsFailure(req.ConfigAs(&config)); f == nil || f.Message != `plugin config: json: unknown field "extra"` {
		t.Errorf("%+v", f)
	}
	if req.Generation() != 4 {
		t.Errorf("generation %d", req.Generation())
	}
}

func TestAdmissionFixturesReadTheObjectAsTheAPIServerSendsIt(t *testing.T) {
	pod := mustParse(t, `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "prod"}}`)
	req := NewAdmissionRequest(Create, pod).WithUser("admin", "system:masters")
	if req.Kind != NewKind("", "v1", "Pod") || req.Resource.Resource != "pods" || req.Namespace != "prod" || req.Name != "web" {
		t.Errorf("%+v", req)
	}
	if req.OldObject != nil || req.UserInfo.Groups[0] != "system:masters" {
		t.Errorf("%+v", req)
	}
	var typed struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	if err := req.ObjectAs(&typed); err != nil || typed.Metadata.Name != "web" {
		t.Errorf("%v %+v", err, typed)
	}
	if err := req.OldObjectAs(&typed); err == nil || err.Error() != "the request has no old object" {
		t.Errorf("%v", err)
	}
	deleted := NewAdmissionRequest(Delete, pod)
	if deleted.Object != nil || deleted.OldObject.Name() != "web" {
		t.Errorf("a delete has the old object only: %+v", deleted)
	}
	if err := deleted.ObjectAs(&typed); err == nil || err.Error() != "the request has no object" {
		t.Errorf("%v", err)
	}
	if NewAdmissionRequest(Update, pod).WithResource("pods/status").Resource.Resource != "pods/status" {
		t.Error("resource")
	}
}

func TestVerdictsAllowDenyOrMutateWithWarnings(t *testing.T) {
	if v := Allow(); !v.Allowed || v.Mutated != nil {
		t.Errorf("%+v", v)
	}
	if v := Deny("no"); v.Allowed || v.Code != 403 || v.Message != "no" {
		t.Errorf("%+v", v)
	}
	if v := DenyWith(422, "spec.containers must list at least one container"); v.Code != 422 {
		t.Errorf("%+v", v)
	}
	if v := Denyf("%d sidecars", 2); v.Code != 403 || v.Message != "2 sidecars" {
		t.Errorf("%+v", v)
	}
	base := Mutate(map[string]any{"kind": "Pod"})
	warned := base.Warning("defaulted imagePullPolicy")
	if !warned.Allowed || len(warned.Warnings) != 1 || len(base.Warnings) != 0 {
		t.Errorf("%+v %+v", base, warned)
	}
}

func TestWebhooksAreDeclaredWithKubernetesDefaults(t *testing.T) {
	w := MutatingWebhook("inject").Rule(Create, "", "v1", "pods").MatchCondition("not-opted-out", "true")
	if w.Type != Mutating || w.FailurePolicy != Fail || w.SideEffects != SideEffectsNone || w.TimeoutSeconds != 10 {
		t.Errorf("%+v", w)
	}
	if len(w.Rules) != 1 || w.Rules[0].Resources[0] != "pods" || w.Rules[0].Scope != RuleScopeAll || w.Rules[0].Operations[0] != Create {
		t.Errorf("%+v", w.Rules)
	}
	if w.MatchConditions[0].Name != "not-opted-out" || ValidatingWebhook("check").Type != Validating {
		t.Errorf("%+v", w.MatchConditions)
	}
}

func TestANewChildLivesInTheParentsNamespaceWhateverItsBodySays(t *testing.T) {
	deployment := NewKind("apps", "v1", "Deployment")
	body := map[string]any{"metadata": map[string]any{"name": "other", "namespace": "x", "labels": map[string]any{"a": "b"}},
		"spec": map[string]any{"replicas": 1}}
	namespaced := NewRequest(Object{"metadata": map[string]any{"name": "p", "namespace": "prod"}})
	child := namespaced.NewChild(deployment, "web", body)
	got, _ := json.Marshal(child)
	want := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"a":"b"},"name":"web","namespace":"prod"},"spec":{"replicas":1}}`
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if name, _ := body["metadata"].(map[string]any)["name"].(string); name != "other" {
		t.Errorf("the body was changed: %v", body)
	}
	cluster := NewRequest(Object{"metadata": map[string]any{"name": "p"}})
	if metadata, _ := json.Marshal(cluster.NewChild(deployment, "web", nil)["metadata"]); string(metadata) != `{"name":"web"}` {
		t.Errorf("cluster-scoped: %s", metadata)
	}
}
