// Package v1alpha1 holds the Memcached API (cache.example.com/v1alpha1) as Kubebuilder lays it
// out: the types of crds/memcached.yaml.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of the Memcached kind.
var GroupVersion = schema.GroupVersion{Group: "cache.example.com", Version: "v1alpha1"}

// AddToScheme registers Memcached and MemcachedList with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Memcached{}, &MemcachedList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// MemcachedSpec is the desired state.
type MemcachedSpec struct {
	// Size is the number of memcached Pods (read as int64 so that an out-of-range value is
	// reported, as the plugin does).
	Size *int64 `json:"size,omitempty"`
}

// MemcachedStatus is the observed state.
type MemcachedStatus struct {
	// Nodes are the names of the memcached Pods, sorted.
	Nodes []string `json:"nodes,omitempty"`
	// Conditions hold Available.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Memcached is the Schema for the memcacheds API.
type Memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MemcachedSpec   `json:"spec,omitempty"`
	Status MemcachedStatus `json:"status,omitempty"`
}

// MemcachedList contains a list of Memcached.
type MemcachedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Memcached `json:"items"`
}
