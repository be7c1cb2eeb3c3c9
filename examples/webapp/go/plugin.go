// Package webapp is the webapp wasmop plugin: what it wants for one WebApp
// (demo.example.com/v1).
//
// Plain Go on the wasmop SDK, with no WebAssembly in sight: `go test` tests it as it is, and
// `sh build.sh` builds it into a component (the SDK generates the component's entry, which
// hands the registered plugin to the host). Every call starts from a fresh instance: nothing
// kept in a global survives to the next reconcile.
package webapp

import (
	"fmt"
	"strings"

	wasmop "github.com/wasmop/wasmop/sdk-go"
)

// Parent is the kind this plugin reconciles (namespaced).
var Parent = wasmop.NewKind("demo.example.com", "v1", "WebApp")

// Children are the kinds it creates for each parent: one object of each, named like the
// parent.
var Children = []wasmop.Kind{
	wasmop.NewKind("", "v1", "ServiceAccount"),
	wasmop.NewKind("", "v1", "ConfigMap"),
	wasmop.NewKind("apps", "v1", "Deployment"),
	wasmop.NewKind("", "v1", "Service"),
	wasmop.NewKind("policy", "v1", "PodDisruptionBudget"),
}

// Manifest is what the plugin is and everything it may touch.
var Manifest = wasmop.Manifest{
	Name:        "webapp",
	Version:     "0.1.0",
	Description: "Reconciles WebApp",
	Parent:      Parent,
	Scope:       wasmop.Namespaced,
	Children:    Children,
	Prune:       true,
	Webhooks:    Webhooks,
}

func init() {
	wasmop.Register(wasmop.Plugin{Manifest: Manifest, Reconcile: Reconcile, Admit: Admit})
}

// parentRule is the requests the webhooks are called for: the parent's CREATE and UPDATE.
var parentRule = wasmop.NewRule([]wasmop.Operation{wasmop.Create, wasmop.Update}, Parent.Group, Parent.Version, "webapps")

// Webhooks are the admission webhooks the plugin serves, each failing closed (the API server
// refuses the request when the call fails).
var Webhooks = []wasmop.Webhook{
	wasmop.ValidatingWebhook("validate").WithRule(parentRule),
}

// Admit answers one admission request for the webhook named webhook. An error fails the call
// (the API server refuses the request with its message).
func Admit(webhook string, req wasmop.AdmissionRequest) (wasmop.Verdict, error) {
	if req.Object == nil {
		return wasmop.Verdict{}, wasmop.Terminalf("webhook %s: the request has no object", webhook)
	}
	switch webhook {
	case "validate":
		return AdmitValidate(req.Object), nil
	}
	return wasmop.Verdict{}, &wasmop.UnknownWebhookError{Webhook: webhook}
}

// AdmitValidate is the `validate` webhook: the reconcile's checks, and an image that names a
// tag or a digest.
func AdmitValidate(object wasmop.Object) wasmop.Verdict {
	var app WebApp
	if err := object.Decode(&app); err != nil {
		return wasmop.DenyWith(422, err.Error())
	}
	if _, _, message := app.Spec.Check(); message != "" {
		return wasmop.DenyWith(422, message)
	}
	image := *app.Spec.Image
	if !strings.Contains(image, "@") && !strings.Contains(image[strings.LastIndex(image, "/")+1:], ":") {
		return wasmop.DenyWith(422, fmt.Sprintf("spec.image must name a tag or a digest, got %q", image))
	}
	return wasmop.Allow()
}

// WebApp is the parent.
type WebApp struct {
	Spec Spec `json:"spec"`
}

// Spec is WebApp.spec.
type Spec struct {
	Image    *string           `json:"image"`
	Replicas *int64            `json:"replicas"`
	Port     *int64            `json:"port"`
	Config   map[string]string `json:"config"`
}

// Check gives the replicas and port with their defaults, or the message saying why the spec is
// invalid.
func (s Spec) Check() (replicas, port int64, message string) {
	replicas, port = 1, 8080
	if s.Replicas != nil {
		replicas = *s.Replicas
	}
	if s.Port != nil {
		port = *s.Port
	}
	switch {
	case s.Image == nil || *s.Image == "":
		return 0, 0, "spec.image must be set"
	case replicas < 0 || replicas > 50:
		return 0, 0, fmt.Sprintf("spec.replicas must be between 0 and 50, got %d", replicas)
	case port < 1 || port > 65535:
		return 0, 0, fmt.Sprintf("spec.port must be between 1 and 65535, got %d", port)
	}
	return replicas, port, ""
}

type obj = map[string]any

// Reconcile plans the five children of one WebApp and its status from the observed Deployment.
func Reconcile(req wasmop.Request) (wasmop.Response, error) {
	var app WebApp
	if err := req.ParentAs(&app); err != nil {
		return wasmop.Response{}, err
	}
	replicas, port, message := app.Spec.Check()
	if message != "" {
		return wasmop.Response{}, wasmop.Terminalf("%s", message).
			WithStatus(obj{"phase": "Invalid"}).
			WithCondition(wasmop.ConditionFalse("Ready", "InvalidSpec", message))
	}
	name, config := req.Name(), req.Name()+"-config"
	labels := obj{"app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": name}
	labelled := func(body obj) obj {
		body["metadata"] = obj{"labels": labels}
		return body
	}
	data := app.Spec.Config
	if data == nil {
		data = map[string]string{}
	}
	pod := obj{"metadata": obj{"labels": labels}, "spec": obj{"serviceAccountName": name, "containers": []obj{{
		"name": "app", "image": *app.Spec.Image, "ports": []obj{{"name": "http", "containerPort": port}},
		"envFrom": []obj{{"configMapRef": obj{"name": config}}}}}}}
	var resp wasmop.Response
	deployment := wasmop.NewKind("apps", "v1", "Deployment")
	resp.Apply(req.NewChild(Children[0], name, labelled(obj{"automountServiceAccountToken": false})))
	resp.Apply(req.NewChild(Children[1], config, labelled(obj{"data": data})))
	resp.Apply(req.NewChild(deployment, name, labelled(obj{"spec": obj{"replicas": replicas,
		"selector": obj{"matchLabels": labels}, "template": pod}})))
	resp.Apply(req.NewChild(Children[3], name, labelled(obj{"spec": obj{"selector": labels,
		"ports": []obj{{"name": "http", "port": 80, "targetPort": "http"}}}})))
	resp.Apply(req.NewChild(Children[4], name, labelled(obj{"spec": obj{"maxUnavailable": 1,
		"selector": obj{"matchLabels": labels}}})))
	var ready int64
	if observed, ok := req.Child(deployment, name); ok {
		ready, _ = observed.Int("status", "readyReplicas")
	}
	message = fmt.Sprintf("%d/%d replicas ready", ready, replicas)
	if ready >= replicas {
		resp.Status = obj{"readyReplicas": ready, "phase": "Ready"}
		resp.SetCondition(wasmop.ConditionTrue("Ready", "AllReplicasReady", message))
	} else {
		resp.Status = obj{"readyReplicas": ready, "phase": "Progressing"}
		resp.SetCondition(wasmop.ConditionFalse("Ready", "ReplicasNotReady", message))
	}
	return resp, nil
}
