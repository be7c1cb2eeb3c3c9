package wasmop

import (
	"encoding/json"
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
	Type   string
	Status ConditionStatus
	// Reason in CamelCase, e.g. `MinimumReplicasAvailable`.
	Reason  string
	Message string
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
}

// Apply adds a desired child.
func (r *Response) Apply(child any) *Response {
	r.Children = append(r.Children, child)
	return r
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

func setCondition(conditions []Condition, c Condition) []Condition {
	for i := range conditions {
		if conditions[i].Type == c.Type {
			out := append([]Condition(nil), conditions...)
			out[i] = c
			return out
		}
	}
	return append(conditions, c)
}

func conditionOf(conditions []Condition, typ string) (Condition, bool) {
	for _, c := range conditions {
		if c.Type == typ {
			return c, true
		}
	}
	return Condition{}, false
}
