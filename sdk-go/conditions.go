package wasmop

import "encoding/json"

// ShownCondition is a condition as the parent's `status.conditions` holds it (metav1.Condition):
// what the host writes from a [Condition].
type ShownCondition struct {
	Type    string          `json:"type"`
	Status  ConditionStatus `json:"status"`
	Reason  string          `json:"reason"`
	Message string          `json:"message"`
	// LastTransitionTime is when the status last changed (RFC 3339).
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	// ObservedGeneration is the parent's generation the condition was set for; nil when the
	// parent has no `metadata.generation`.
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
}

// MergeConditions is the parent's `status.conditions` after the host sets updates on existing
// (as in the parent), as it writes them: a condition whose status did not change keeps its
// lastTransitionTime, others get now; every updated condition gets observedGeneration
// (generation, the parent's `metadata.generation`, unless nil); conditions not mentioned are
// kept as they are, in place.
func MergeConditions(existing []ShownCondition, updates []Condition, generation *int64, now string) []ShownCondition {
	merged := append([]ShownCondition(nil), existing...)
	for _, u := range updates {
		value := ShownCondition{Type: u.Type, Status: u.Status, Reason: u.Reason, Message: u.Message, LastTransitionTime: now}
		if generation != nil {
			g := *generation
			value.ObservedGeneration = &g
		}
		position := -1
		for i, c := range merged {
			if c.Type == u.Type {
				position = i
				break
			}
		}
		if position < 0 {
			merged = append(merged, value)
			continue
		}
		if old := merged[position]; old.Status == u.Status && old.LastTransitionTime != "" {
			value.LastTransitionTime = old.LastTransitionTime
		}
		merged[position] = value
	}
	return merged
}

// ShownConditions is [MergeConditions] on parent: its `status.conditions` and
// `metadata.generation`. Tests use it to see the conditions a response leaves on the parent.
func ShownConditions(parent Object, updates []Condition, now string) []ShownCondition {
	var existing []ShownCondition
	if raw, ok := parent.Get("status", "conditions"); ok {
		if text, err := json.Marshal(raw); err == nil {
			_ = json.Unmarshal(text, &existing)
		}
	}
	var generation *int64
	if g, ok := parent.Int("metadata", "generation"); ok {
		generation = &g
	}
	return MergeConditions(existing, updates, generation, now)
}
