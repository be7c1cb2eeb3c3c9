package wasmop

import (
	"errors"
	"fmt"
	"strings"
)

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

// AdmissionRequest is one request to a webhook: the `request` of an `admission.k8s.io/v1`
// AdmissionReview, with the fields a plugin decides on.
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
	// Cache reads the declared kinds from the host's watch cache. In tests, set it to a
	// [FixtureCache] ([AdmissionRequest.WithCache]); when nil every lookup fails.
	Cache Cache
}

// NewAdmissionRequest is a request as the API server would send it for operation on object: a
// fixture for tests. Kind, namespace and name are read from the object; the resource is the
// kind in lowercase plus `s` (set the real plural with [AdmissionRequest.WithResource] when
// that is wrong). For [Delete] the object is the old object and there is no new one.
func NewAdmissionRequest(operation Operation, object Object) AdmissionRequest {
	kind := KindOf(object.APIVersion(), object.KindName())
	req := AdmissionRequest{
		UID:       "00000000-0000-0000-0000-000000000000",
		Kind:      kind,
		Resource:  GroupVersionResource{Group: kind.Group, Version: kind.Version, Resource: strings.ToLower(kind.Kind) + "s"},
		Operation: operation,
		Namespace: object.Namespace(),
		Name:      object.Name(),
		Object:    object,
	}
	if operation == Delete {
		req.Object, req.OldObject = nil, object
	}
	return req
}

// WithOldObject is the request with the object before the change (an update).
func (r AdmissionRequest) WithOldObject(old Object) AdmissionRequest {
	r.OldObject = old
	return r
}

// WithResource is the request with the resource's plural name.
func (r AdmissionRequest) WithResource(resource string) AdmissionRequest {
	r.Resource.Resource = resource
	return r
}

// WithUser is the request sent by username, a member of groups.
func (r AdmissionRequest) WithUser(username string, groups ...string) AdmissionRequest {
	r.UserInfo = UserInfo{Username: username, Groups: append([]string{}, groups...)}
	return r
}

// WithDryRun is the request marked a dry run (or not).
func (r AdmissionRequest) WithDryRun(dryRun bool) AdmissionRequest {
	r.DryRun = dryRun
	return r
}

// WithCache is the request whose lookups are answered by cache.
func (r AdmissionRequest) WithCache(cache Cache) AdmissionRequest {
	r.Cache = cache
	return r
}

// ObjectAs decodes the object into v (a struct of encoding/json tags).
//
// It fails when the request has no object (a delete) or the object does not decode into v.
func (r AdmissionRequest) ObjectAs(v any) error {
	if r.Object == nil {
		return errors.New("the request has no object")
	}
	return r.Object.Decode(v)
}

// OldObjectAs decodes the object before the change into v.
//
// It fails when the request has no old object (a create) or it does not decode into v.
func (r AdmissionRequest) OldObjectAs(v any) error {
	if r.OldObject == nil {
		return errors.New("the request has no old object")
	}
	return r.OldObject.Decode(v)
}

// Verdict is a webhook's answer: allowed (possibly with a changed object) or denied.
type Verdict struct {
	Allowed bool
	// Code is the HTTP-style status of a denial, 400 to 599 (403 when 0).
	Code uint16
	// Message is why the request is denied, in words the user of kubectl understands.
	Message string
	// Warnings are shown to the client either way (kubectl prints them).
	Warnings []string
	// Mutated is, for a mutating webhook, the object as it should be stored (a struct, a map
	// or an [Object]); nil leaves it unchanged. It must keep the request's apiVersion, kind,
	// name and namespace; the host computes the JSON Patch.
	Mutated any
}

// Allow lets the request through, unchanged, without warnings.
func Allow() Verdict { return Verdict{Allowed: true} }

// Mutate lets the request through with object stored instead (a mutating webhook).
func Mutate(object any) Verdict { return Verdict{Allowed: true, Mutated: object} }

// Deny refuses the request with code 403 and message.
func Deny(message string) Verdict { return DenyWith(403, message) }

// DenyWith refuses the request with an HTTP-style code (400 to 599) and message.
func DenyWith(code uint16, message string) Verdict {
	return Verdict{Code: code, Message: message}
}

// Denyf refuses the request (403) with a formatted message.
func Denyf(format string, args ...any) Verdict {
	return Deny(fmt.Sprintf(format, args...))
}

// Warning is the verdict with one more warning shown to the client.
func (v Verdict) Warning(warning string) Verdict {
	v.Warnings = append(append([]string{}, v.Warnings...), warning)
	return v
}

// UnknownWebhookError is what Admit returns for a webhook name it does not serve.
type UnknownWebhookError struct {
	Webhook string
}

func (e *UnknownWebhookError) Error() string { return "unknown webhook " + e.Webhook }
