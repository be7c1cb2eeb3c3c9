package wasmop

// RelatedKind is a kind the plugin may read but does not own.
type RelatedKind struct {
	Kind Kind
	// LabelSelector (kubectl syntax) limits which objects the plugin sees; `$(parent.name)`
	// in it is replaced by the parent's name. Empty: every object of the kind in the
	// parent's namespace.
	LabelSelector string
}

// Manifest is what a plugin is and everything it may touch; the host grants nothing else.
type Manifest struct {
	// Name is a DNS-1123 label: the controller name in logs and metrics, the field manager
	// `wasmop/<name>`.
	Name string
	// Version is semantic (`1.2.3`).
	Version     string
	Description string
	// Parent is the kind the plugin reconciles; Scope is its scope.
	Parent Kind
	Scope  Scope
	// Children are the kinds the plugin creates, updates and deletes as children of a parent.
	Children []Kind
	// Related are the kinds the plugin may read.
	Related []RelatedKind
	// Finalizer: the host holds a finalizer on every parent and calls the plugin with
	// Request.Finalizing before the parent goes.
	Finalizer bool
	// Prune: owned children of the declared kinds the response no longer lists are deleted.
	Prune bool
	// AdoptUnowned: take over an existing child-kind object that no controller owns.
	AdoptUnowned bool
	// ConfigSchema is the JSON Schema of the configuration (a map or a struct), nil for none.
	ConfigSchema any
	// Webhooks are the admission webhooks the plugin serves (with [Plugin.Admit]).
	Webhooks []Webhook
}

// DeclaredKinds are the parent, child and related kinds: the kinds lookups may name.
func (m Manifest) DeclaredKinds() []Kind {
	kinds := append([]Kind{m.Parent}, m.Children...)
	for _, r := range m.Related {
		kinds = append(kinds, r.Kind)
	}
	return kinds
}

// WebhookType tells validating webhooks from mutating ones.
type WebhookType int

const (
	// Validating webhooks judge an object.
	Validating WebhookType = iota
	// Mutating webhooks may answer a changed object.
	Mutating
)

// FailurePolicy is what the API server does when the webhook fails.
type FailurePolicy int

const (
	// Fail refuses the request (Kubernetes' default).
	Fail FailurePolicy = iota
	// Ignore lets the request through.
	Ignore
)

// SideEffects says whether calling the webhook has effects outside the object.
type SideEffects int

const (
	// SideEffectsNone: none (a plugin writes nothing from an admission call).
	SideEffectsNone SideEffects = iota
	// SideEffectsNoneOnDryRun: none when the request is a dry run.
	SideEffectsNoneOnDryRun
)

// Operation is an admission operation.
type Operation int

const (
	// Create of an object.
	Create Operation = iota
	// Update of an object.
	Update
	// Delete of an object.
	Delete
	// Connect to an object (exec, port-forward).
	Connect
	// AllOperations matches every operation in a rule.
	AllOperations
)

// RuleScope is which objects a rule matches by scope.
type RuleScope int

const (
	// RuleScopeAll matches both.
	RuleScopeAll RuleScope = iota
	// RuleScopeCluster matches cluster-scoped objects only.
	RuleScopeCluster
	// RuleScopeNamespaced matches namespaced objects only.
	RuleScopeNamespaced
)

// Rule is which requests a webhook is called for (Kubernetes' RuleWithOperations).
type Rule struct {
	Operations  []Operation
	APIGroups   []string
	APIVersions []string
	// Resources are plural and lowercase (`pods`, `pods/status`).
	Resources []string
	Scope     RuleScope
}

// MatchCondition is a CEL expression the API server evaluates before it calls a webhook.
type MatchCondition struct {
	// Name is a DNS-1123 label, unique within the webhook.
	Name string
	// Expression over `object`, `oldObject`, `request`, `authorizer`, evaluating to a bool.
	Expression string
}

// Webhook is one admission webhook, registered as `<name>.<plugin>.wasmop.dev`.
type Webhook struct {
	Name              string
	Type              WebhookType
	Rules             []Rule
	NamespaceSelector string
	ObjectSelector    string
	FailurePolicy     FailurePolicy
	SideEffects       SideEffects
	// TimeoutSeconds is 1 to 30; 0 means 10.
	TimeoutSeconds  uint32
	MatchConditions []MatchCondition
}

// NewRule is a rule for operations on one resource (`""` is the core group), both scopes.
func NewRule(operations []Operation, group, version, resource string) Rule {
	return Rule{
		Operations:  append([]Operation{}, operations...),
		APIGroups:   []string{group},
		APIVersions: []string{version},
		Resources:   []string{resource},
		Scope:       RuleScopeAll,
	}
}

// ValidatingWebhook is a validating webhook named name (a DNS-1123 label), without rules yet:
// it fails closed, has no side effects and a 10 s timeout. Add rules with [Webhook.Rule].
func ValidatingWebhook(name string) Webhook {
	return Webhook{Name: name, Type: Validating, FailurePolicy: Fail, SideEffects: SideEffectsNone, TimeoutSeconds: 10}
}

// MutatingWebhook is a mutating webhook named name, otherwise as [ValidatingWebhook].
func MutatingWebhook(name string) Webhook {
	w := ValidatingWebhook(name)
	w.Type = Mutating
	return w
}

// Rule is the webhook with one more rule: one operation on one resource.
func (w Webhook) Rule(operation Operation, group, version, resource string) Webhook {
	return w.WithRule(NewRule([]Operation{operation}, group, version, resource))
}

// WithRule is the webhook with one more rule built with [NewRule].
func (w Webhook) WithRule(rule Rule) Webhook {
	w.Rules = append(append([]Rule{}, w.Rules...), rule)
	return w
}

// MatchCondition is the webhook called only for requests on which the CEL expression is true
// (a condition named name; every condition must hold). The API server evaluates it before
// calling, so requests the plugin would let through anyway never reach it.
func (w Webhook) MatchCondition(name, expression string) Webhook {
	w.MatchConditions = append(append([]MatchCondition{}, w.MatchConditions...), MatchCondition{Name: name, Expression: expression})
	return w
}

// WithTimeout is the webhook with the API server waiting seconds (1 to 30) for it.
func (w Webhook) WithTimeout(seconds uint32) Webhook {
	w.TimeoutSeconds = seconds
	return w
}

// WithFailurePolicy is the webhook with what the API server does when the call fails.
func (w Webhook) WithFailurePolicy(policy FailurePolicy) Webhook {
	w.FailurePolicy = policy
	return w
}
