package wasmop

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/wasmop/wasmop/sdk-go/internal/host"
)

// Cache reads objects of the declared kinds (parent, children, related) from the host's watch
// cache: never a live API call, never an undeclared kind.
type Cache interface {
	// Get is the object of kind k named name in namespace ("" for a cluster-scoped kind), and
	// whether the cache has it.
	Get(k Kind, namespace, name string) (Object, bool, error)
	// List are the objects of kind k in namespace ("": every namespace the plugin may read)
	// whose labels match labelSelector (kubectl syntax; "" matches all).
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

// FixtureCache is a cache holding objects, for tests. Selectors support `key=value`,
// `key==value`, `key!=value`, `key` and `!key` terms joined by commas. With kinds, lookups of
// any other kind are refused as the host refuses an undeclared kind.
type FixtureCache struct {
	Objects []Object
	// Kinds, when not empty, are the only kinds lookups may name (the manifest's).
	Kinds []Kind
}

// NewFixtureCache is a fixture cache of objects that answers any kind.
func NewFixtureCache(objects ...Object) *FixtureCache {
	return &FixtureCache{Objects: objects}
}

// RestrictTo limits lookups to the kinds manifest declares, as the host does.
func (c *FixtureCache) RestrictTo(m Manifest) *FixtureCache {
	d := *c
	d.Kinds = m.DeclaredKinds()
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
	return &LookupError{Message: fmt.Sprintf("%s is not declared in the plugin's manifest", k)}
}

// Get implements [Cache].
func (c *FixtureCache) Get(k Kind, namespace, name string) (Object, bool, error) {
	if err := c.check(k); err != nil {
		return nil, false, err
	}
	for _, o := range c.Objects {
		if o.Is(k) && o.Namespace() == namespace && o.Name() == name {
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
	match, err := parseSelector(labelSelector)
	if err != nil {
		return nil, err
	}
	var out []Object
	for _, o := range c.Objects {
		if o.Is(k) && (namespace == "" || o.Namespace() == namespace) && match(o.Labels()) {
			out = append(out, o)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].Namespace()+"/"+out[i].Name() < out[j].Namespace()+"/"+out[j].Name()
	})
	return out, nil
}

func parseSelector(selector string) (func(map[string]string) bool, error) {
	var terms []func(map[string]string) bool
	for _, term := range strings.Split(selector, ",") {
		term = strings.TrimSpace(term)
		switch {
		case term == "":
			continue
		case strings.Contains(term, "!="):
			k, v, _ := strings.Cut(term, "!=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			terms = append(terms, func(l map[string]string) bool { return l[k] != v })
		case strings.Contains(term, "="):
			k, v, _ := strings.Cut(strings.Replace(term, "==", "=", 1), "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			terms = append(terms, func(l map[string]string) bool { got, ok := l[k]; return ok && got == v })
		case strings.HasPrefix(term, "!"):
			k := strings.TrimSpace(term[1:])
			terms = append(terms, func(l map[string]string) bool { _, ok := l[k]; return !ok })
		case strings.ContainsAny(term, " ()"):
			return nil, &LookupError{Message: fmt.Sprintf("invalid label selector %q: set-based terms are not supported by the fixture", selector)}
		default:
			terms = append(terms, func(l map[string]string) bool { _, ok := l[term]; return ok })
		}
	}
	return func(labels map[string]string) bool {
		for _, t := range terms {
			if !t(labels) {
				return false
			}
		}
		return true
	}, nil
}
