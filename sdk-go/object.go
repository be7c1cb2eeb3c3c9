package wasmop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Object is a Kubernetes object as decoded JSON. Numbers are [json.Number], so integers keep
// every digit; read them with [Object.Int].
type Object map[string]any

// ParseObject decodes one JSON object, numbers as [json.Number].
func ParseObject(text string) (Object, error) {
	decoder := json.NewDecoder(bytes.NewReader([]byte(text)))
	decoder.UseNumber()
	var object Object
	if err := decoder.Decode(&object); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if object == nil {
		return nil, fmt.Errorf("invalid JSON: expected an object, got null")
	}
	return object, nil
}

// Get is the value at path (`Get("status", "availableReplicas")`), and whether every step of
// the path exists.
func (o Object) Get(path ...string) (any, bool) {
	var value any = map[string]any(o)
	for _, key := range path {
		m, ok := asMap(value)
		if !ok {
			return nil, false
		}
		if value, ok = m[key]; !ok {
			return nil, false
		}
	}
	return value, true
}

// String is the string at path, or "" and false when it is missing or not a string.
func (o Object) String(path ...string) (string, bool) {
	value, _ := o.Get(path...)
	s, ok := value.(string)
	return s, ok
}

// Int is the integer at path, or 0 and false when it is missing or not an integer.
func (o Object) Int(path ...string) (int64, bool) {
	value, _ := o.Get(path...)
	switch n := value.(type) {
	case json.Number:
		i, err := strconv.ParseInt(n.String(), 10, 64)
		return i, err == nil
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		if n == float64(int64(n)) {
			return int64(n), true
		}
	}
	return 0, false
}

// Map is the object at path, or nil and false.
func (o Object) Map(path ...string) (Object, bool) {
	value, _ := o.Get(path...)
	m, ok := asMap(value)
	return Object(m), ok
}

// APIVersion is the object's `apiVersion`.
func (o Object) APIVersion() string {
	s, _ := o.String("apiVersion")
	return s
}

// KindName is the object's `kind`.
func (o Object) KindName() string {
	s, _ := o.String("kind")
	return s
}

// Name is `metadata.name`.
func (o Object) Name() string {
	s, _ := o.String("metadata", "name")
	return s
}

// Namespace is `metadata.namespace`, "" when it has none.
func (o Object) Namespace() string {
	s, _ := o.String("metadata", "namespace")
	return s
}

// Labels are `metadata.labels`.
func (o Object) Labels() map[string]string {
	labels := map[string]string{}
	m, _ := o.Map("metadata", "labels")
	for k, v := range m {
		if s, ok := v.(string); ok {
			labels[k] = s
		}
	}
	return labels
}

// Is tells whether the object is of kind k.
func (o Object) Is(k Kind) bool {
	return o.APIVersion() == k.APIVersion() && o.KindName() == k.Kind
}

// Decode fills v (a struct with json tags) from the object.
func (o Object) Decode(v any) error {
	text, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return json.Unmarshal(text, v)
}

// ToObject is v (a struct, a map, an Object) as an Object.
func ToObject(v any) (Object, error) {
	if o, ok := v.(Object); ok {
		return o, nil
	}
	text, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return ParseObject(string(text))
}

func asMap(value any) (map[string]any, bool) {
	switch m := value.(type) {
	case map[string]any:
		return m, true
	case Object:
		return m, true
	}
	return nil, false
}
