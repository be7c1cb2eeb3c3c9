package sidecarset

import (
	"fmt"
	"strings"

	wasmop "github.com/wasmop/wasmop/sdk-go"
)

// MaxName is the longest SidecarSet name: the Pod annotation
// `sidecarset.wasmop.dev/<name>-hash` must fit in a 63-character name.
const MaxName = 63 - len("-hash")

// Expression is one requirement of a label selector.
type Expression struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

// PodSelector is a SidecarSet's `spec.selector`: the Pods it injects into.
type PodSelector struct {
	MatchLabels      map[string]string `json:"matchLabels"`
	MatchExpressions []Expression      `json:"matchExpressions"`
}

// Spec is what a SidecarSet's spec holds.
type Spec struct {
	Selector   *PodSelector `json:"selector"`
	Containers []any        `json:"containers"`
	Namespace  *string      `json:"namespace"`
}

type object struct {
	Metadata struct {
		Name *string `json:"name"`
	} `json:"metadata"`
	Spec Spec `json:"spec"`
}

// ValidateSidecarSet checks a SidecarSet object and returns the first reason it is invalid, in
// field order, or nil. A SidecarSet created with generateName (no name yet) is not checked for
// its name's length.
func ValidateSidecarSet(o wasmop.Object) error {
	var parsed object
	if err := o.Decode(&parsed); err != nil {
		return fmt.Errorf("the SidecarSet does not parse: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, named := o.Get("metadata", "name"); !named {
		unnamed := "unnamed"
		parsed.Metadata.Name = &unnamed
	}
	if parsed.Metadata.Name == nil {
		return fmt.Errorf("the SidecarSet has no metadata.name")
	}
	if name := *parsed.Metadata.Name; len(name) > MaxName {
		return fmt.Errorf("metadata.name %q is longer than %d characters (the Pod annotation sidecarset.wasmop.dev/<name>-hash must fit)", name, MaxName)
	}
	spec := parsed.Spec
	if spec.Selector == nil {
		return fmt.Errorf("spec.selector is required (an empty selector {} selects every Pod)")
	}
	if err := spec.Selector.validate("spec.selector"); err != nil {
		return err
	}
	if spec.Namespace != nil && !isDNS1123Label(*spec.Namespace) {
		return fmt.Errorf("spec.namespace %q is not a valid namespace name", *spec.Namespace)
	}
	if len(spec.Containers) == 0 {
		return fmt.Errorf("spec.containers must list at least one container")
	}
	names := map[string]bool{}
	for index, value := range spec.Containers {
		container, ok := value.(map[string]any)
		if !ok {
			return fmt.Errorf("spec.containers[%d] is not an object", index)
		}
		field := func(key string) string {
			text, _ := container[key].(string)
			return text
		}
		name := field("name")
		if name == "" {
			return fmt.Errorf("spec.containers[%d].name is required", index)
		}
		if field("image") == "" {
			return fmt.Errorf("spec.containers[%d].image is required (container %q)", index, name)
		}
		if names[name] {
			return fmt.Errorf("spec.containers[%d].name %q is used by more than one container", index, name)
		}
		names[name] = true
	}
	return nil
}

// validate names the first bad requirement of the selector at field.
func (s PodSelector) validate(field string) error {
	if _, empty := s.MatchLabels[""]; empty {
		return fmt.Errorf("%s.matchLabels[\"\"]: the label key is empty", field)
	}
	for i, e := range s.MatchExpressions {
		at := fmt.Sprintf("%s.matchExpressions[%d]", field, i)
		if e.Key == "" {
			return fmt.Errorf("%s.key: the label key is empty", at)
		}
		switch e.Operator {
		case "In", "NotIn":
			if len(e.Values) == 0 {
				return fmt.Errorf("%s: operator %s needs at least one value", at, e.Operator)
			}
		case "Exists", "DoesNotExist":
			if len(e.Values) > 0 {
				return fmt.Errorf("%s: operator %s takes no values", at, e.Operator)
			}
		default:
			return fmt.Errorf("%s: operator %q is not one of In, NotIn, Exists, DoesNotExist", at, e.Operator)
		}
	}
	return nil
}

func isDNS1123Label(s string) bool {
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if len(s) < 1 || len(s) > 63 || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !alnum(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}
