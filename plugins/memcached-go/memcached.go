// Package memcached is the Memcached operator as a wasmop plugin written in Go.
//
// The same logic as the Rust example (plugins/memcached): for every Memcached
// (cache.example.com/v1alpha1, namespaced) one Deployment of spec.size memcached pods, the
// pods' names in status.nodes, and an Available condition. The test suite checks that both
// plugins plan the same actions on the same objects.
//
// Build (from the repository's root; scripts/go-toolchain.sh installs the tools):
//
//	scripts/go-plugin.sh plugins/memcached-go memcached-go.wasm
package memcached

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"

	wasmop "github.com/wasmop/wasmop/sdk-go"
)

// Image is the memcached image every pod runs, unless the configuration names another.
const Image = "memcached:1.6.17-alpine"

// Port is the container port memcached listens on, unless the configuration names another.
const Port = 11211

var (
	// MemcachedKind is the kind this plugin reconciles.
	MemcachedKind = wasmop.NewKind("cache.example.com", "v1alpha1", "Memcached")
	// DeploymentKind is the kind of its children.
	DeploymentKind = wasmop.NewKind("apps", "v1", "Deployment")
	// PodKind is the kind it reads, to report the pods' names.
	PodKind = wasmop.NewKind("", "v1", "Pod")
)

// Config is the plugin's configuration, checked by the host against ConfigSchema.
type Config struct {
	// Image of every pod [default: Image].
	Image string `json:"image,omitempty"`
	// Port is the container port [default: Port].
	Port int32 `json:"port,omitempty"`
}

// ConfigSchema is the JSON Schema of Config, declared in the manifest.
var ConfigSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"image": map[string]any{"type": "string", "minLength": 1, "description": "The memcached image of every pod."},
		"port":  map[string]any{"type": "integer", "minimum": 1, "maximum": 65535, "description": "The container port."},
	},
	"additionalProperties": false,
}

// Manifest declares the parent, the children, the pods it reads and pruning.
var Manifest = wasmop.Manifest{
	Name:         "memcached",
	Version:      "0.1.0",
	Description:  "Runs a memcached Deployment of spec.size pods for each Memcached",
	Parent:       MemcachedKind,
	Scope:        wasmop.Namespaced,
	Children:     []wasmop.Kind{DeploymentKind},
	Related:      []wasmop.RelatedKind{{Kind: PodKind, LabelSelector: "app=memcached,memcached_cr=$(parent.name)"}},
	Prune:        true,
	ConfigSchema: ConfigSchema,
}

func init() {
	wasmop.Register(wasmop.Plugin{Manifest: Manifest, Reconcile: Reconcile})
}

// Memcached is the part of a Memcached the plugin reads.
type Memcached struct {
	Spec *struct {
		// Size is read as any JSON number so that an out-of-range value gets a clear error.
		Size *json.Number `json:"size"`
	} `json:"spec"`
}

// Status is Memcached.status as the plugin writes it (conditions go through the response).
type Status struct {
	// Nodes are the memcached pods' names, sorted.
	Nodes []string `json:"nodes"`
}

// DesiredSize is spec.size: required, within 0..=MaxInt32. An invalid size is a terminal
// failure that also shows on the Memcached: Available=False with reason InvalidSpec and the
// same message (the next valid reconcile replaces it).
func DesiredSize(m Memcached) (int32, error) {
	if m.Spec == nil || m.Spec.Size == nil {
		return 0, InvalidSpec("spec.size is required")
	}
	size, err := m.Spec.Size.Int64()
	if err != nil {
		return 0, InvalidSpec(fmt.Sprintf("spec.size must be an integer, got %s", m.Spec.Size.String()))
	}
	if size < 0 {
		return 0, InvalidSpec(fmt.Sprintf("spec.size must be 0 or more, got %d", size))
	}
	if size > math.MaxInt32 {
		return 0, InvalidSpec(fmt.Sprintf("spec.size must be at most %d, got %d", math.MaxInt32, size))
	}
	return int32(size), nil
}

// InvalidSpec is a terminal failure for an invalid spec, shown as Available=False InvalidSpec.
func InvalidSpec(message string) *wasmop.Failure {
	return wasmop.Terminalf("%s", message).WithCondition(wasmop.ConditionFalse("Available", "InvalidSpec", message))
}

// Labels are the labels of the pods of one Memcached, also the Deployment's selector.
func Labels(name string) map[string]string {
	return map[string]string{"app": "memcached", "memcached_cr": name}
}

// Deployment runs size memcached pods for the Memcached namespace/name.
func Deployment(name, namespace string, size int32, config Config) map[string]any {
	image, port := config.Image, config.Port
	if image == "" {
		image = Image
	}
	if port == 0 {
		port = Port
	}
	metadata := map[string]any{"name": name, "labels": Labels(name)}
	if namespace != "" {
		metadata["namespace"] = namespace
	}
	container := map[string]any{
		"name":    "memcached",
		"image":   image,
		"command": []string{"memcached", "-m=64", "-o", "modern", "-v"},
		"ports":   []any{map[string]any{"name": "memcached", "containerPort": port}},
	}
	return map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   metadata,
		"spec": map[string]any{
			"replicas": size,
			"selector": map[string]any{"matchLabels": Labels(name)},
			"template": map[string]any{
				"metadata": map[string]any{"labels": Labels(name)},
				"spec":     map[string]any{"containers": []any{container}},
			},
		},
	}
}

// Available is the Available condition from the observed Deployment (if any).
func Available(observed wasmop.Object, size int32) wasmop.Condition {
	if observed == nil {
		message := fmt.Sprintf("0/%d replicas available: the Deployment does not exist yet", size)
		return wasmop.ConditionFalse("Available", "DeploymentMissing", message)
	}
	ready, _ := observed.Int("status", "availableReplicas")
	message := fmt.Sprintf("%d/%d replicas available", ready, size)
	if ready >= int64(size) {
		return wasmop.ConditionTrue("Available", "MinimumReplicasAvailable", message)
	}
	return wasmop.ConditionFalse("Available", "Progressing", message)
}

// Reconcile wants one Deployment of spec.size pods, reports the pods and their availability.
func Reconcile(req wasmop.Request) (wasmop.Response, error) {
	var memcached Memcached
	if err := req.ParentAs(&memcached); err != nil {
		return wasmop.Response{}, err
	}
	size, err := DesiredSize(memcached)
	if err != nil {
		return wasmop.Response{}, err
	}
	var config Config
	if err := req.ConfigAs(&config); err != nil {
		return wasmop.Response{}, err
	}
	name, namespace := req.Name(), req.Namespace()
	wasmop.Debugf("memcached %s/%s: want %d replicas", namespace, name, size)

	nodes := []string{}
	for _, pod := range req.RelatedOf(PodKind) {
		if pod.Name() != "" {
			nodes = append(nodes, pod.Name())
		}
	}
	sort.Strings(nodes)
	observed, _ := req.Child(DeploymentKind, name)

	var resp wasmop.Response
	resp.Apply(Deployment(name, namespace, size, config))
	resp.Status = Status{Nodes: nodes}
	resp.SetCondition(Available(observed, size))
	return resp, nil
}
