package wasmop

import (
	"errors"
	"fmt"
	"sort"

	"github.com/wasmop/wasmop/sdk-go/internal/host"
)

// Cache reads objects of the declared kinds (parent, children, related) from the host's watch
// cache: never a live API call, never an undeclared kind.
type Cache interface {
	// Get is the object of kind k named name in namespace ("": the parent's namespace; any for
	// a cluster-scoped kind), and whether the cache has it.
	Get(k Kind, namespace, name string) (Object, bool, error)
	// List are the objects of kind k in namespace ("": the parent's namespace; every
	// namespace for a cluster-scoped parent) whose labels match labelSelector (kubectl syntax,
	// as [LabelSelector] parses it; "" matches all), ordered by namespace and name.
	List(k Kind, namespace, labelSelector string) ([]Object, error)
}

// LookupError is a refused lookup: the kind is not declared, the namespace is not granted, or
// the selector is invalid. Returned from Reconcile, it is a terminal failure (the manifest
// must change).
type LookupError struct {
	Message string
}

func (e *LookupError) Error() string { return e.Message }

// Unwrap makes a refused lookup a terminal [Failure] for [AsFailure].
func (e *LookupError) Unwrap() error { return &Failure{Message: e.Message} }

// ErrNoCache is what lookups of a request without a cache fail with.
var ErrNoCache = errors.New("no cache: set Request.Cache (FixtureCache in tests)")

// hostCache is the host's cache, through the component's imports.
type hostCache struct{}

// HostCache is the host's watch cache, when running in the host (the component's entry sets
// every request's Cache to it); nil natively.
func HostCache() Cache {
	if host.Installed.Get == nil {
		return nil
	}
	return hostCache{}
}

func optional(namespace string) *string {
	if namespace == "" {
		return nil
	}
	return &namespace
}

func (hostCache) Get(k Kind, namespace, name string) (Object, bool, error) {
	text, err := host.Installed.Get(k.Group, k.Version, k.Kind, optional(namespace), name)
	if err != nil || text == nil {
		return nil, false, err
	}
	o, err := ParseObject(*text)
	return o, err == nil, err
}

func (hostCache) List(k Kind, namespace, labelSelector string) ([]Object, error) {
	texts, err := host.Installed.List(k.Group, k.Version, k.Kind, optional(namespace), labelSelector)
	if err != nil {
		return nil, err
	}
	out := make([]Object, 0, len(texts))
	for _, text := range texts {
		o, err := ParseObject(text)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// FixtureCache answers lookups from a list of objects, for tests, the way the host answers
// from its cache: a namespace of "" reads the parent's namespace (ParentNamespace; every
// namespace for a cluster-scoped parent), an object without a namespace (a cluster-scoped kind)
// is found whatever the namespace, selectors parse and match as the host's ([LabelSelector]),
// lists are ordered by namespace and name, and with Kinds set (see [FixtureCache.RestrictTo])
// any other kind is refused as the host refuses an undeclared kind. It does not model the host
// policy's grants.
type FixtureCache struct {
	Objects []Object
	// Kinds, when not empty, are the only kinds lookups may name (the manifest's).
	Kinds []Kind
	// ParentNamespace is the namespace "" reads; "default" from the constructors.
	ParentNamespace string
	// Scope is the parent's: a cluster-scoped parent's "" reads every namespace.
	Scope Scope
}

// NewFixtureCache is a fixture cache of objects that answers any kind, for a parent in the
// namespace `default`.
func NewFixtureCache(objects ...Object) *FixtureCache {
	return &FixtureCache{Objects: objects, ParentNamespace: "default"}
}

// FixtureCacheFor is a fixture cache of objects for this parent: "" reads its namespace.
func FixtureCacheFor(parent Object, objects ...Object) *FixtureCache {
	return &FixtureCache{Objects: objects, ParentNamespace: parent.Namespace()}
}

// RestrictTo limits lookups to the kinds manifest declares, and takes its parent's scope, as
// the host does.
func (c *FixtureCache) RestrictTo(m Manifest) *FixtureCache {
	d := *c
	d.Kinds = m.DeclaredKinds()
	d.Scope = m.Scope
	return &d
}

func (c *FixtureCache) check(k Kind) error {
	if len(c.Kinds) == 0 {
		return nil
	}
	for _, d := range c.Kinds {
		if d == k {
			return nil
		}
	}
	return &LookupError{Message: fmt.Sprintf("kind not declared in the manifest: %s", k)}
}

// in is whether o is in the namespace a lookup of namespace reads.
func (c *FixtureCache) in(o Object, namespace string) bool {
	if o.Namespace() == "" {
		return true
	}
	if namespace == "" {
		if c.Scope == Cluster {
			return true
		}
		namespace = c.ParentNamespace
	}
	return o.Namespace() == namespace
}

// Get implements [Cache].
func (c *FixtureCache) Get(k Kind, namespace, name string) (Object, bool, error) {
	if err := c.check(k); err != nil {
		return nil, false, err
	}
	for _, o := range c.Objects {
		if o.Is(k) && c.in(o, namespace) && o.Name() == name {
			return o, true, nil
		}
	}
	return nil, false, nil
}

// List implements [Cache].
func (c *FixtureCache) List(k Kind, namespace, labelSelector string) ([]Object, error) {
	if err := c.check(k); err != nil {
		return nil, err
	}
	selector, err := ParseLabelSelector(labelSelector)
	if err != nil {
		return nil, &LookupError{Message: "invalid label selector: " + err.Error()}
	}
	var out []Object
	for _, o := range c.Objects {
		if o.Is(k) && c.in(o, namespace) && selector.MatchesObject(o) {
			out = append(out, o)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Namespace() != out[j].Namespace() {
			return out[i].Namespace() < out[j].Namespace()
		}
		return out[i].Name() < out[j].Name()
	})
	return out, nil
}
