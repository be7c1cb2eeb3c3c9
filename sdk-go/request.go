package wasmop

import (
	"bytes"
	"encoding/json"
)

// Request is everything a plugin is given about one parent, from the host's cache.
type Request struct {
	// Parent is the parent object.
	Parent Object
	// Children are the observed objects of the declared child kinds the parent controls.
	Children []Object
	// Related are the observed objects selected by the manifest's related kinds.
	Related []Object
	// Finalizing: the parent is being deleted and the host holds the plugin's finalizer; clean
	// up, then answer [Response.Finalized] once nothing is left to do.
	Finalizing bool
	// Config is the plugin's configuration as the operator set it (checked against the
	// manifest's ConfigSchema), empty when none.
	Config Object
	// Cache reads the declared kinds from the host's watch cache. In tests, set it to a
	// [FixtureCache]; when nil every lookup fails.
	Cache Cache
}

// NewRequest is a request for parent with no children, related objects or configuration: a
// fixture for tests. Add to it with [Request.WithChild], [Request.WithRelated],
// [Request.WithConfig] and [Request.WithCache].
func NewRequest(parent Object) Request {
	return Request{Parent: parent, Config: Object{}}
}

// WithChild is the request with one more observed child.
func (r Request) WithChild(child Object) Request {
	r.Children = append(append([]Object(nil), r.Children...), child)
	return r
}

// WithRelated is the request with one more observed related object.
func (r Request) WithRelated(related Object) Request {
	r.Related = append(append([]Object(nil), r.Related...), related)
	return r
}

// WithConfig is the request with the plugin configuration config.
func (r Request) WithConfig(config Object) Request {
	r.Config = config
	return r
}

// WithFinalizing is the request with the parent being deleted (or not).
func (r Request) WithFinalizing(finalizing bool) Request {
	r.Finalizing = finalizing
	return r
}

// WithCache is the request whose lookups are answered by cache.
func (r Request) WithCache(cache Cache) Request {
	r.Cache = cache
	return r
}

// Name is the parent's name.
func (r Request) Name() string { return r.Parent.Name() }

// Namespace is the parent's namespace, "" for a cluster-scoped parent.
func (r Request) Namespace() string { return r.Parent.Namespace() }

// Generation is the parent's `metadata.generation`, 0 when absent.
func (r Request) Generation() int64 {
	g, _ := r.Parent.Int("metadata", "generation")
	return g
}

// ChildrenOf are the observed children of kind k.
func (r Request) ChildrenOf(k Kind) []Object { return of(r.Children, k) }

// RelatedOf are the observed related objects of kind k.
func (r Request) RelatedOf(k Kind) []Object { return of(r.Related, k) }

// Child is the observed child of kind k named name, if any.
func (r Request) Child(k Kind, name string) (Object, bool) {
	for _, child := range r.ChildrenOf(k) {
		if child.Name() == name {
			return child, true
		}
	}
	return nil, false
}

// NewChild is a child for the response: an object of kind k named name in the parent's
// namespace (none for a cluster-scoped parent), with the fields of body beside its apiVersion,
// kind and metadata; body["metadata"] (labels, annotations; a map[string]any) is merged into
// the metadata, whose name and namespace stay these. body is not changed.
func (r Request) NewChild(k Kind, name string, body map[string]any) Object {
	child := Object{}
	for key, value := range body {
		child[key] = value
	}
	metadata := map[string]any{}
	if given, ok := body["metadata"].(map[string]any); ok {
		for key, value := range given {
			metadata[key] = value
		}
	}
	metadata["name"] = name
	delete(metadata, "namespace")
	if r.Namespace() != "" {
		metadata["namespace"] = r.Namespace()
	}
	child["apiVersion"], child["kind"], child["metadata"] = k.APIVersion(), k.Kind, metadata
	return child
}

// ParentAs decodes the parent into v (a struct with json tags). A parent that does not fit is
// a terminal failure: the spec is wrong until the object changes.
func (r Request) ParentAs(v any) error {
	if err := decodeStrict(r.Parent, v, false); err != nil {
		return Terminalf("parent %s: does not match the expected type: %v", r.Name(), err)
	}
	return nil
}

// ConfigAs decodes the configuration into v, refusing unknown fields. A configuration that
// does not fit is a terminal failure.
func (r Request) ConfigAs(v any) error {
	config := r.Config
	if config == nil {
		config = Object{}
	}
	if err := decodeStrict(config, v, true); err != nil {
		return Terminalf("plugin config: %v", err)
	}
	return nil
}

func decodeStrict(o Object, v any, disallowUnknown bool) error {
	text, err := json.Marshal(o)
	if err != nil {
		return err
	}
	decoder := json.NewDecoder(bytes.NewReader(text))
	if disallowUnknown {
		decoder.DisallowUnknownFields()
	}
	return decoder.Decode(v)
}

func of(objects []Object, k Kind) []Object {
	var out []Object
	for _, o := range objects {
		if o.Is(k) {
			out = append(out, o)
		}
	}
	return out
}
