// Package component is the side of the SDK that the generated component entry calls: the
// registered [wasmop.Plugin] with the contract's values as plain strings and numbers. Plugin
// code never imports it.
package component

import (
	"encoding/json"
	"fmt"
	"time"

	wasmop "github.com/wasmop/wasmop/sdk-go"
	"github.com/wasmop/wasmop/sdk-go/internal/host"
)

// Imports are the host's log and cache functions; see [Install].
type Imports = host.Imports

// Install makes the host's imports the SDK's log and cache. The entry calls it from init.
func Install(imports Imports) {
	host.Installed = imports
}

// Plugin is the registered plugin.
//
// It panics when no package called wasmop.Register: the component's entry imports the
// plugin's package for its init function.
func Plugin() *wasmop.Plugin {
	p := wasmop.Registered()
	if p == nil {
		panic("no wasmop plugin registered: the plugin package must call wasmop.Register from an init function")
	}
	return p
}

// ConfigSchema is the manifest's configuration schema as JSON, or nil.
func ConfigSchema(m wasmop.Manifest) *string {
	if m.ConfigSchema == nil {
		return nil
	}
	if text, ok := m.ConfigSchema.(string); ok {
		return &text
	}
	text, err := json.Marshal(m.ConfigSchema)
	if err != nil {
		panic(fmt.Sprintf("the manifest's ConfigSchema is not JSON: %v", err))
	}
	s := string(text)
	return &s
}

// Request is the contract's reconcile request.
type Request struct {
	Parent     string
	Children   []string
	Related    []string
	Finalizing bool
	Config     string
}

// Response is the contract's reconcile response.
type Response struct {
	Children       []string
	Delete         []wasmop.ObjectRef
	Status         *string
	Conditions     []wasmop.Condition
	Events         []wasmop.Event
	RequeueAfterMs *uint64
	Finalized      bool
}

// Failure is the contract's reconcile error.
type Failure struct {
	Retryable  bool
	Message    string
	Status     *string
	Conditions []wasmop.Condition
}

// Reconcile calls the registered plugin's Reconcile.
func Reconcile(raw Request) (Response, *Failure) {
	p := Plugin()
	if p.Reconcile == nil {
		return Response{}, &Failure{Message: "this plugin does not reconcile (it registered no Reconcile)"}
	}
	req, err := request(raw)
	if err != nil {
		return Response{}, failure(wasmop.AsFailure(err))
	}
	resp, err := p.Reconcile(req)
	if err != nil {
		return Response{}, failure(wasmop.AsFailure(err))
	}
	out, f := response(resp)
	if f != nil {
		return Response{}, failure(f)
	}
	return out, nil
}

func request(raw Request) (wasmop.Request, error) {
	parent, err := wasmop.ParseObject(raw.Parent)
	if err != nil {
		return wasmop.Request{}, wasmop.Terminalf("parent: %v", err)
	}
	req := wasmop.NewRequest(parent)
	req.Finalizing = raw.Finalizing
	req.Cache = wasmop.HostCache()
	for _, text := range raw.Children {
		o, err := wasmop.ParseObject(text)
		if err != nil {
			return req, wasmop.Terminalf("child: %v", err)
		}
		req.Children = append(req.Children, o)
	}
	for _, text := range raw.Related {
		o, err := wasmop.ParseObject(text)
		if err != nil {
			return req, wasmop.Terminalf("related object: %v", err)
		}
		req.Related = append(req.Related, o)
	}
	if raw.Config != "" {
		if req.Config, err = wasmop.ParseObject(raw.Config); err != nil {
			return req, wasmop.Terminalf("plugin config: %v", err)
		}
	}
	return req, nil
}

func response(resp wasmop.Response) (Response, *wasmop.Failure) {
	if err := resp.Validate(); err != nil {
		return Response{}, wasmop.AsFailure(err)
	}
	children, err := resp.ChildrenJSON()
	if err != nil {
		return Response{}, wasmop.AsFailure(err)
	}
	status, err := statusJSON(resp.Status)
	if err != nil {
		return Response{}, wasmop.AsFailure(err)
	}
	out := Response{
		Children:   children,
		Delete:     resp.Delete,
		Status:     status,
		Conditions: resp.Conditions,
		Events:     resp.Events,
		Finalized:  resp.Finalized,
	}
	if resp.RequeueAfter > 0 {
		ms := uint64((resp.RequeueAfter + time.Millisecond - 1) / time.Millisecond)
		out.RequeueAfterMs = &ms
	}
	return out, nil
}

func statusJSON(status any) (*string, error) {
	if status == nil {
		return nil, nil
	}
	text, err := json.Marshal(status)
	if err != nil {
		return nil, wasmop.Terminalf("status: %v", err)
	}
	s := string(text)
	return &s, nil
}

func failure(f *wasmop.Failure) *Failure {
	out := &Failure{Retryable: f.Retryable, Message: f.Message, Conditions: f.Conditions}
	status, err := statusJSON(f.Status)
	if err != nil {
		out.Message += fmt.Sprintf(" (and its %v)", err)
	}
	out.Status = status
	return out
}

// AdmissionRequest is the contract's admission request, objects as JSON.
type AdmissionRequest struct {
	wasmop.AdmissionRequest
	ObjectJSON    *string
	OldObjectJSON *string
}

// Verdict is the contract's verdict, the mutated object as JSON.
type Verdict struct {
	Allowed  bool
	Code     uint16
	Message  string
	Warnings []string
	Mutated  *string
}

// AdmissionError is the contract's admission error.
type AdmissionError struct {
	UnknownWebhook bool
	Message        string
}

// Admit calls the registered plugin's Admit.
func Admit(webhook string, raw AdmissionRequest) (Verdict, *AdmissionError) {
	p := Plugin()
	if p.Admit == nil {
		return Verdict{}, &AdmissionError{UnknownWebhook: true, Message: webhook}
	}
	req := raw.AdmissionRequest
	req.Cache = wasmop.HostCache()
	var err error
	if raw.ObjectJSON != nil {
		if req.Object, err = wasmop.ParseObject(*raw.ObjectJSON); err != nil {
			return Verdict{}, &AdmissionError{Message: fmt.Sprintf("object: %v", err)}
		}
	}
	if raw.OldObjectJSON != nil {
		if req.OldObject, err = wasmop.ParseObject(*raw.OldObjectJSON); err != nil {
			return Verdict{}, &AdmissionError{Message: fmt.Sprintf("old object: %v", err)}
		}
	}
	verdict, err := p.Admit(webhook, req)
	if err != nil {
		if u, ok := err.(*wasmop.UnknownWebhookError); ok {
			return Verdict{}, &AdmissionError{UnknownWebhook: true, Message: u.Webhook}
		}
		return Verdict{}, &AdmissionError{Message: err.Error()}
	}
	out := Verdict{Allowed: verdict.Allowed, Code: verdict.Code, Message: verdict.Message, Warnings: verdict.Warnings}
	if !out.Allowed && out.Code == 0 {
		out.Code = 403
	}
	if verdict.Mutated != nil {
		text, err := json.Marshal(verdict.Mutated)
		if err != nil {
			return Verdict{}, &AdmissionError{Message: fmt.Sprintf("mutated object: %v", err)}
		}
		s := string(text)
		out.Mutated = &s
	}
	return out, nil
}

// LookupError is a lookup the host refused, as the SDK reports it.
func LookupError(message string) error {
	return &wasmop.LookupError{Message: message}
}
