// Package export_wasmop_plugin_reconciler implements the `reconciler` export of
// wasmop:plugin@0.3.0 with the registered plugin's Reconcile.
package export_wasmop_plugin_reconciler

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	r "wit_component/wasmop_plugin_reconciler"
	"wit_component/wasmop_plugin_types"

	wasmop "github.com/wasmop/wasmop/sdk-go"
	"github.com/wasmop/wasmop/sdk-go/component"
)

// Reconcile calls the registered plugin.
func Reconcile(request r.Request) witTypes.Result[r.Response, r.ReconcileError] {
	resp, failure := component.Reconcile(component.Request{
		Parent:     request.Parent,
		Children:   request.Children,
		Related:    request.Related,
		Finalizing: request.Finalizing,
		Config:     request.Config,
	})
	if failure != nil {
		f := r.Failure{Message: failure.Message, Status: option(failure.Status), Conditions: conditions(failure.Conditions)}
		if failure.Retryable {
			return witTypes.Err[r.Response](r.MakeReconcileErrorRetryable(f))
		}
		return witTypes.Err[r.Response](r.MakeReconcileErrorTerminal(f))
	}
	out := r.Response{
		Children:       append([]string{}, resp.Children...),
		Delete:         []wasmop_plugin_types.ObjectRef{},
		Status:         option(resp.Status),
		Conditions:     conditions(resp.Conditions),
		Events:         []r.Event{},
		RequeueAfterMs: witTypes.None[uint64](),
		Finalized:      resp.Finalized,
	}
	for _, d := range resp.Delete {
		ref := wasmop_plugin_types.ObjectRef{ApiVersion: d.APIVersion, Kind: d.Kind, Namespace: witTypes.None[string](), Name: d.Name}
		if d.Namespace != "" {
			ref.Namespace = witTypes.Some(d.Namespace)
		}
		out.Delete = append(out.Delete, ref)
	}
	for _, e := range resp.Events {
		event := r.Event{Type: r.EventType_Normal, Reason: e.Reason, Action: e.Action, Note: e.Note}
		if e.Type == wasmop.Warning {
			event.Type = r.EventType_Warning
		}
		out.Events = append(out.Events, event)
	}
	if resp.RequeueAfterMs != nil {
		out.RequeueAfterMs = witTypes.Some(*resp.RequeueAfterMs)
	}
	return witTypes.Ok[r.Response, r.ReconcileError](out)
}

func option(s *string) witTypes.Option[string] {
	if s == nil {
		return witTypes.None[string]()
	}
	return witTypes.Some(*s)
}

func conditions(cs []wasmop.Condition) []r.Condition {
	out := []r.Condition{}
	for _, c := range cs {
		status := r.ConditionStatus_Unknown
		switch c.Status {
		case wasmop.True:
			status = r.ConditionStatus_True
		case wasmop.False:
			status = r.ConditionStatus_False
		}
		out = append(out, r.Condition{Type: c.Type, Status: status, Reason: c.Reason, Message: c.Message})
	}
	return out
}
