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

// WithStatus is the failure with a status to apply to the parent.
func (f *Failure) WithStatus(status any) *Failure {
	g := *f
	g.Status = status
	return &g
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
