// Package {{package}} is the {{name}} wasmop plugin: what it wants for one {{Kind}}
// ({{api_version}}).
//
// Plain Go on the wasmop SDK, with no WebAssembly in sight: `go test` tests it as it is, and
// `sh build.sh` builds it into a component (the SDK generates the component's entry, which
// hands the registered plugin to the host). Every call starts from a fresh instance: nothing
// kept in a global survives to the next reconcile.
package {{package}}

import (
	"encoding/json"
	"strings"

	wasmop "github.com/wasmop/wasmop/sdk-go"
)

// Parent is the kind this plugin reconciles (namespaced).
var Parent = {{parent}}

// Children are the kinds it creates for each parent: one object of each, named like the
// parent.
var Children = []wasmop.Kind{
{{children}}}

// Manifest is what the plugin is and everything it may touch.
var Manifest = wasmop.Manifest{
	Name:        "{{name}}",
	Version:     "0.1.0",
	Description: "Reconciles {{Kind}}",
	Parent:      Parent,
	Scope:       wasmop.Namespaced,
	Children:    Children,
	Prune:       true,{{manifest_webhooks}}
}

func init() {
	wasmop.Register(wasmop.Plugin{Manifest: Manifest, Reconcile: Reconcile{{admit_field}}})
}
{{webhook_functions}}
// Spec is the part of the parent's spec the plugin reads. Add the fields your CRD defines.
type Spec struct {
	Message string
}

// SpecOf checks the parent's spec: a spec of the wrong shape is a terminal failure (the host
// records it and waits for the object to change).
func SpecOf(parent wasmop.Object) (Spec, error) {
	value, ok := parent.Get("spec")
	if !ok || value == nil {
		return Spec{}, nil
	}
	spec, ok := value.(map[string]any)
	if !ok {
		return Spec{}, wasmop.Terminalf("spec must be an object, got %s", jsonText(value))
	}
	message, ok := spec["message"]
	if !ok {
		return Spec{}, nil
	}
	text, ok := message.(string)
	if !ok {
		return Spec{}, wasmop.Terminalf("spec.message must be a string, got %s", jsonText(message))
	}
	return Spec{Message: text}, nil
}

// Desired is the object of kind the plugin wants for parent: named like the parent, in its
// namespace. Fill in each kind's fields here (a Deployment needs its spec).
func Desired(kind wasmop.Kind, parent wasmop.Object, spec Spec) map[string]any {
	metadata := map[string]any{
		"name":   parent.Name(),
		"labels": map[string]string{"app.kubernetes.io/name": "{{name}}", "app.kubernetes.io/instance": parent.Name()},
	}
	if parent.Namespace() != "" {
		metadata["namespace"] = parent.Namespace()
	}
	child := map[string]any{"apiVersion": kind.APIVersion(), "kind": kind.Kind, "metadata": metadata}
	if kind == wasmop.NewKind("", "v1", "ConfigMap") {
		child["data"] = map[string]string{"message": spec.Message}
	}
	return child
}

// Status is the parent's status as the plugin writes it (conditions go beside it).
type Status struct {
	// Children is how many of the plugin's children exist.
	Children int `json:"children"`
}

// Reconcile decides the desired state of one parent from its observed children: the children
// to apply, the status and a Ready condition.
func Reconcile(req wasmop.Request) (wasmop.Response, error) {
	spec, err := SpecOf(req.Parent)
	if err != nil {
		return wasmop.Response{}, err
	}
	var resp wasmop.Response
	var waiting []string
	for _, kind := range Children {
		resp.Apply(Desired(kind, req.Parent, spec))
		if _, ok := req.Child(kind, req.Name()); !ok {
			waiting = append(waiting, kind.String())
		}
	}
	if len(waiting) > 0 {
		resp.SetCondition(wasmop.ConditionFalse("Ready", "Creating", "waiting for "+strings.Join(waiting, ", ")))
	} else {
		resp.SetCondition(wasmop.ConditionTrue("Ready", "ChildrenReady", "every child exists"))
	}
	resp.Status = Status{Children: len(Children) - len(waiting)}
	return resp, nil
}

func jsonText(v any) string {
	text, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(text)
}
