// Package export_wasmop_plugin_admission implements the `admission` export of
// wasmop:plugin@0.2.0 (world `operator`) with the registered plugin's Admit.
package export_wasmop_plugin_admission

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	a "wit_component/wasmop_plugin_admission"

	wasmop "github.com/wasmop/wasmop/sdk-go"
	"github.com/wasmop/wasmop/sdk-go/component"
)

// Admit calls the registered plugin.
func Admit(webhook string, request a.AdmissionRequest) witTypes.Result[a.Verdict, a.AdmissionError] {
	raw := component.AdmissionRequest{
		AdmissionRequest: wasmop.AdmissionRequest{
			UID:         request.Uid,
			Kind:        wasmop.NewKind(request.Kind.Group, request.Kind.Version, request.Kind.Kind),
			Resource:    wasmop.GroupVersionResource{Group: request.Resource.Group, Version: request.Resource.Version, Resource: request.Resource.Resource},
			SubResource: request.SubResource.SomeOr(""),
			Operation:   wasmop.Operation(request.Operation),
			Namespace:   request.Namespace.SomeOr(""),
			Name:        request.Name.SomeOr(""),
			UserInfo:    wasmop.UserInfo{Username: request.UserInfo.Username, UID: request.UserInfo.Uid, Groups: request.UserInfo.Groups},
			DryRun:      request.DryRun,
		},
		ObjectJSON:    pointer(request.Object),
		OldObjectJSON: pointer(request.OldObject),
	}
	verdict, failure := component.Admit(webhook, raw)
	if failure != nil {
		if failure.UnknownWebhook {
			return witTypes.Err[a.Verdict](a.MakeAdmissionErrorUnknownWebhook(failure.Message))
		}
		return witTypes.Err[a.Verdict](a.MakeAdmissionErrorFailed(failure.Message))
	}
	warnings := append([]string{}, verdict.Warnings...)
	if verdict.Allowed {
		mutated := witTypes.None[string]()
		if verdict.Mutated != nil {
			mutated = witTypes.Some(*verdict.Mutated)
		}
		return witTypes.Ok[a.Verdict, a.AdmissionError](a.MakeVerdictAllowed(a.Allowed{Warnings: warnings, Mutated: mutated}))
	}
	return witTypes.Ok[a.Verdict, a.AdmissionError](a.MakeVerdictDenied(a.Denied{Code: verdict.Code, Message: verdict.Message, Warnings: warnings}))
}

func pointer(o witTypes.Option[string]) *string {
	if o.IsNone() {
		return nil
	}
	s := o.Some()
	return &s
}
