package wasmop

import "strings"

// Kind names a Kubernetes kind by group, version and kind (`apps`, `v1`, `Deployment`; the
// core group is "").
type Kind struct {
	Group   string
	Version string
	Kind    string
}

// NewKind is the kind group/version/kind.
func NewKind(group, version, kind string) Kind {
	return Kind{Group: group, Version: version, Kind: kind}
}

// APIVersion is `group/version`, or `version` for the core group.
func (k Kind) APIVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// String is `group/version/Kind` (`v1/Kind` for the core group), as the host writes a kind.
func (k Kind) String() string {
	return k.APIVersion() + "/" + k.Kind
}

// KindOf is the kind of an object's `apiVersion` and `kind`.
func KindOf(apiVersion, kind string) Kind {
	group, version, found := strings.Cut(apiVersion, "/")
	if !found {
		return Kind{Version: apiVersion, Kind: kind}
	}
	return Kind{Group: group, Version: version, Kind: kind}
}

// Scope tells namespaced kinds from cluster-scoped ones.
type Scope int

const (
	// Namespaced objects live in a namespace.
	Namespaced Scope = iota
	// Cluster objects are cluster-scoped.
	Cluster
)

// ObjectRef names one object: a child to delete.
type ObjectRef struct {
	APIVersion string
	Kind       string
	// Namespace is "" for a cluster-scoped object (and defaults to the parent's for a child).
	Namespace string
	Name      string
}
