package wasmop

import (
	"errors"
	"fmt"
)

// Failure is a failed reconcile: retryable (the host retries with exponential backoff) or
// terminal (the host records it and waits for the object to change). It may carry a status
// and conditions to show on the parent, which the host applies as it applies a response's
// (`phase: Invalid`, `Ready=False InvalidSpec`); nothing else of a response is taken from a
// failure.
//
// An error that is not a *Failure (anywhere in its chain) is retryable, with its message.
// A panic is not a failure: the host reports it as a trap, in one line naming it.
type Failure struct {
	Retryable bool
	Message   string
	// Status holds fields of the parent's status to apply (a struct or a map); nil leaves it.
	Status any
	// Conditions to set on the parent, by type.
	Conditions []Condition
}

// Error is the message.
func (f *Failure) Error() string { return f.Message }

// Retryablef is a transient failure (something not ready yet, a conflict).
func Retryablef(format string, args ...any) *Failure {
	return &Failure{Retryable: true, Message: fmt.Sprintf(format, args...)}
}

// Terminalf is a permanent failure for this version of the parent (an invalid spec).
func Terminalf(format string, args ...any) *Failure {
	return &Failure{Message: fmt.Sprintf(format, args...)}
}

// WithStatus is the failure with status fields to show on the parent (a struct or a map that
// encodes as a JSON object), merged top-level field by field into fields set before. A value
// that is not an object is not shown: the message says so instead.
func (f *Failure) WithStatus(fields any) *Failure {
	g := *f
	o, mistake := asObject(fields)
	if mistake != "" {
		if mistake != "an array" {
			mistake = "not an object"
		}
		g.Message = fmt.Sprintf("%s (status not shown: it must be a JSON object, got %s)", f.Message, mistake)
		return &g
	}
	merged := Object{}
	if previous, err := ToObject(f.Status); f.Status != nil && err == nil {
		for k, v := range previous {
			merged[k] = v
		}
	}
	for k, v := range o {
		merged[k] = v
	}
	g.Status = merged
	return &g
}

// Shown is what the parent shows beside the failure: the message, the status fields (nil for
// none) and the conditions, as the host applies them.
func (f *Failure) Shown() (message string, status Object, conditions []Condition) {
	if f.Status != nil {
		status, _ = ToObject(f.Status)
	}
	return f.Message, status, append([]Condition(nil), f.Conditions...)
}

// WithCondition is the failure with one more condition (replacing one of the same type).
func (f *Failure) WithCondition(c Condition) *Failure {
	g := *f
	g.Conditions = setCondition(append([]Condition(nil), f.Conditions...), c)
	return &g
}

// Condition is the failure's condition of type typ, if any.
func (f *Failure) Condition(typ string) (Condition, bool) {
	return conditionOf(f.Conditions, typ)
}

// AsFailure is err as the host sees it: the *Failure in its chain (with the full message of
// err), or a retryable failure with err's message; nil for nil.
func AsFailure(err error) *Failure {
	if err == nil {
		return nil
	}
	var f *Failure
	if errors.As(err, &f) {
		g := *f
		g.Message = err.Error()
		return &g
	}
	return &Failure{Retryable: true, Message: err.Error()}
}
