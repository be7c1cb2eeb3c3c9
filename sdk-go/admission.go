package wasmop

import "fmt"

// GroupVersionResource names a resource (`apps`, `v1`, `deployments`).
type GroupVersionResource struct {
	Group    string
	Version  string
	Resource string
}

// UserInfo is who sent an admission request.
type UserInfo struct {
	Username string
	UID      string
	Groups   []string
}

// AdmissionRequest is one request to a webhook.
type AdmissionRequest struct {
	UID         string
	Kind        Kind
	Resource    GroupVersionResource
	SubResource string
	Operation   Operation
	Namespace   string
	Name        string
	// Object is the object as it would be stored (nil for a delete).
	Object Object
	// OldObject is the object before an update or delete (nil for a create).
	OldObject Object
	UserInfo  UserInfo
	DryRun    bool
}

// Verdict is a webhook's answer: allowed (possibly with a changed object) or denied.
type Verdict struct {
	Allowed bool
	// Code is the HTTP status of a denial (403 when 0).
	Code    uint16
	Message string
	// Warnings are shown to the client either way.
	Warnings []string
	// Mutated is, for a mutating webhook, the object as it should be stored; nil leaves it.
	Mutated any
}

// Allow lets the request through.
func Allow() Verdict { return Verdict{Allowed: true} }

// Mutate lets the request through with object stored instead.
func Mutate(object any) Verdict { return Verdict{Allowed: true, Mutated: object} }

// Denyf refuses the request (403) with a message.
func Denyf(format string, args ...any) Verdict {
	return Verdict{Code: 403, Message: fmt.Sprintf(format, args...)}
}

// UnknownWebhookError is what Admit returns for a webhook name it does not serve.
type UnknownWebhookError struct {
	Webhook string
}

func (e *UnknownWebhookError) Error() string { return "unknown webhook " + e.Webhook }
