// Package sidecarset is the SidecarSet's validating webhook as a wasmop plugin written in Go.
//
// The same checks, with the same messages, as the Rust example's (plugins/sidecarset, its
// `validate` webhook): a SidecarSet (apps.wasmop.dev/v1alpha1, cluster-scoped) whose selector,
// namespace or containers are invalid is refused on CREATE and UPDATE with code 422 and the
// one reason the user sees in kubectl. Reconcile reports the same reason as a terminal failure
// for a SidecarSet stored while the webhook was not registered, and a Valid condition
// otherwise. The test suite builds it and calls the webhook with `wasmop admit`.
//
// Build (from the repository's root; scripts/go-toolchain.sh installs the tools):
//
//	scripts/go-plugin.sh plugins/sidecarset-go sidecarset-go.wasm
package sidecarset

import (
	"fmt"

	wasmop "github.com/wasmop/wasmop/sdk-go"
)

// Group and Version of the SidecarSet kind.
const (
	Group   = "apps.wasmop.dev"
	Version = "v1alpha1"
)

// Validate is the name of the validating webhook on SidecarSet CREATE and UPDATE.
const Validate = "validate"

// Invalid is the HTTP-style code of a refused SidecarSet: 422 Unprocessable Entity, as the API
// server answers an invalid object.
const Invalid = 422

// SidecarSetKind is the kind this plugin reconciles and validates.
var SidecarSetKind = wasmop.NewKind(Group, Version, "SidecarSet")

// Manifest declares the SidecarSet (cluster-scoped) and the validating webhook, which fails
// closed: an unchecked SidecarSet is never stored.
var Manifest = wasmop.Manifest{
	Name:        "sidecarset-go",
	Version:     "0.1.0",
	Description: "Validates SidecarSets",
	Parent:      SidecarSetKind,
	Scope:       wasmop.Cluster,
	Webhooks: []wasmop.Webhook{
		wasmop.ValidatingWebhook(Validate).
			Rule(wasmop.Create, Group, Version, "sidecarsets").
			Rule(wasmop.Update, Group, Version, "sidecarsets").
			WithTimeout(5),
	},
}

func init() {
	wasmop.Register(wasmop.Plugin{Manifest: Manifest, Reconcile: Reconcile, Admit: Admit})
}

// Reconcile refuses an invalid SidecarSet with a terminal failure naming the reason, and says
// a valid one is Valid.
func Reconcile(req wasmop.Request) (wasmop.Response, error) {
	if err := ValidateSidecarSet(req.Parent); err != nil {
		return wasmop.Response{}, wasmop.Terminalf("%s", err.Error()).
			WithCondition(wasmop.ConditionFalse("Valid", "InvalidSpec", err.Error()))
	}
	var resp wasmop.Response
	resp.SetCondition(wasmop.ConditionTrue("Valid", "SpecValid", "the SidecarSet is valid"))
	return resp, nil
}

// Admit answers one admission request for the webhook named webhook: the validating webhook
// allows a valid SidecarSet and denies an invalid one with code 422 and the reason.
func Admit(webhook string, req wasmop.AdmissionRequest) (wasmop.Verdict, error) {
	if webhook != Validate {
		return wasmop.Verdict{}, &wasmop.UnknownWebhookError{Webhook: webhook}
	}
	if req.Object == nil {
		return wasmop.Verdict{}, fmt.Errorf("webhook %s: the request has no object", webhook)
	}
	if err := ValidateSidecarSet(req.Object); err != nil {
		return wasmop.DenyWith(Invalid, err.Error()), nil
	}
	return wasmop.Allow(), nil
}
