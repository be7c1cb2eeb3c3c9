package wasmop

import (
	"encoding/json"
	"fmt"
	"time"
)

// ConditionStatus is a condition's status, as in metav1.Condition.
type ConditionStatus string

const (
	// True: the condition holds.
	True ConditionStatus = "True"
	// False: the condition does not hold.
	False ConditionStatus = "False"
	// Unknown: the plugin cannot tell.
	Unknown ConditionStatus = "Unknown"
)

// Condition is set on the parent's `status.conditions`, by type. The host fills in
// `observedGeneration` (the parent's generation it reconciled) and keeps
// `lastTransitionTime` unless the status changes.
type Condition struct {
	// Type in CamelCase, e.g. `Available`.
	Type   string          `json:"type"`
	Status ConditionStatus `json:"status"`
	// Reason in CamelCase, e.g. `MinimumReplicasAvailable`.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// ConditionTrue is a condition that holds.
func ConditionTrue(typ, reason, message string) Condition {
	return Condition{Type: typ, Status: True, Reason: reason, Message: message}
}

// ConditionFalse is a condition that does not hold.
func ConditionFalse(typ, reason, message string) Condition {
	return Condition{Type: typ, Status: False, Reason: reason, Message: message}
}

// EventType is Normal or Warning.
type EventType int

const (
	// Normal: something expected happened.
	Normal EventType = iota
	// Warning: something needs attention.
	Warning
)

// Event is recorded about the parent (events.k8s.io/v1).
type Event struct {
	Type EventType
	// Reason in CamelCase: why the action was taken (`ScaledUp`).
	Reason string
	// Action in CamelCase: what was done (`Scale`).
	Action string
	Note   string
}

// Response is what the host should do for one parent. The zero value does nothing.
type Response struct {
	// Children are the desired children: structs, maps or Objects with `apiVersion`, `kind`
	// and `metadata.name` (the namespace defaults to the parent's). The host applies each one
	// server-side with a controller ownerReference to the parent; with the manifest's Prune,
	// owned children not listed are deleted.
	Children []any
	// Delete are children to delete explicitly.
	Delete []ObjectRef
	// Status holds the fields of the parent's status to apply (a struct or a map); nil leaves
	// the status alone.
	Status any
	// Conditions to set on the parent, by type.
	Conditions []Condition
	// Events to record about the parent.
	Events []Event
	// RequeueAfter: reconcile again after this long even if nothing changes; 0 never.
	RequeueAfter time.Duration
	// Finalized: when finalizing, cleanup is complete and the host may remove its finalizer.
	Finalized bool

	// mistake is the first wrong value given to Apply or SetStatus, which were dropped.
	mistake string
}

// Apply adds a desired child. A child that is not a JSON object with `apiVersion`, `kind` and
// `metadata.name` is a bug in the plugin: it is dropped, and [Response.Validate] reports the
// first one (`child #1: has no kind`).
func (r *Response) Apply(child any) *Response {
	if mistake := checkChild(child); mistake != "" {
		r.fail(fmt.Sprintf("child #%d: %s", len(r.Children), mistake))
		return r
	}
	r.Children = append(r.Children, child)
	return r
}

// SetStatus merges fields (a struct or a map, which must encode as a JSON object) into the
// status to apply, top-level field by field. A value that is not an object is dropped, and
// [Response.Validate] reports it.
func (r *Response) SetStatus(fields any) *Response {
	o, mistake := asObject(fields)
	if mistake != "" {
		r.fail("status must be a JSON object, got " + mistake)
		return r
	}
	merged, err := ToObject(r.Status)
	if r.Status == nil || err != nil {
		merged = Object{}
	}
	for k, v := range o {
		merged[k] = v
	}
	r.Status = merged
	return r
}

// Validate is nil for a response the host can apply, or a terminal [Failure] naming the first
// mistake: one recorded by [Response.Apply] or [Response.SetStatus], else a child or status set
// directly that has the wrong shape. The component's entry validates every response.
func (r Response) Validate() error {
	if r.mistake != "" {
		return Terminalf("%s", r.mistake)
	}
	for i, child := range r.Children {
		if mistake := checkChild(child); mistake != "" {
			return Terminalf("child #%d: %s", i, mistake)
		}
	}
	if r.Status != nil {
		if _, mistake := asObject(r.Status); mistake != "" {
			return Terminalf("status must be a JSON object, got %s", mistake)
		}
	}
	return nil
}

func (r *Response) fail(mistake string) {
	if r.mistake == "" {
		r.mistake = mistake
	}
}

// SetCondition adds a condition, replacing one of the same type.
func (r *Response) SetCondition(c Condition) *Response {
	r.Conditions = setCondition(r.Conditions, c)
	return r
}

// Child is the desired child of kind k named name, as an Object, if the response has it.
func (r Response) Child(k Kind, name string) (Object, bool) {
	for _, child := range r.Children {
		o, err := ToObject(child)
		if err == nil && o.Is(k) && o.Name() == name {
			return o, true
		}
	}
	return nil, false
}

// Condition is the response's condition of type typ, if any.
func (r Response) Condition(typ string) (Condition, bool) {
	return conditionOf(r.Conditions, typ)
}

// StatusObject is the status patch as an Object (nil when the response leaves the status
// alone): what the host would apply, for tests.
func (r Response) StatusObject() (Object, error) {
	if r.Status == nil {
		return nil, nil
	}
	return ToObject(r.Status)
}

// ChildrenJSON are the desired children as JSON objects, as the host receives them.
func (r Response) ChildrenJSON() ([]string, error) {
	out := make([]string, 0, len(r.Children))
	for _, child := range r.Children {
		text, err := json.Marshal(child)
		if err != nil {
			return nil, Terminalf("child %d: %v", len(out), err)
		}
		out = append(out, string(text))
	}
	return out, nil
}

// setCondition is conditions with c set by type: one of the same type is removed and c goes
// last (a later condition of a type wins).
func setCondition(conditions []Condition, c Condition) []Condition {
	out := make([]Condition, 0, len(conditions)+1)
	for _, d := range conditions {
		if d.Type != c.Type {
			out = append(out, d)
		}
	}
	return append(out, c)
}

// jsonType names what a value encodes as in JSON, as the Rust SDK's messages name it.
func jsonType(v any) string {
	text, err := json.Marshal(v)
	if err != nil || len(text) == 0 {
		return "not JSON"
	}
	switch text[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// asObject is v as an Object, or what it is instead when it is not a JSON object.
func asObject(v any) (Object, string) {
	if kind := jsonType(v); kind != "an object" {
		return nil, kind
	}
	o, err := ToObject(v)
	if err != nil {
		return nil, "not JSON"
	}
	return o, ""
}

// checkChild is "" when a child has what the host needs, else the mistake.
func checkChild(child any) string {
	o, mistake := asObject(child)
	if mistake != "" {
		return "must be a JSON object, got " + mistake
	}
	for _, field := range []string{"apiVersion", "kind"} {
		if s, _ := o[field].(string); s == "" {
			return "has no " + field
		}
	}
	if name, _ := o.String("metadata", "name"); name == "" {
		return o["kind"].(string) + " has no metadata.name"
	}
	return ""
}

func conditionOf(conditions []Condition, typ string) (Condition, bool) {
	for _, c := range conditions {
		if c.Type == typ {
			return c, true
		}
	}
	return Condition{}, false
}
