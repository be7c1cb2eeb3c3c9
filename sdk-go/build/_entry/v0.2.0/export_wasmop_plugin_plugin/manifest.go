// Package export_wasmop_plugin_plugin implements the `plugin` export of wasmop:plugin@0.2.0
// with the registered plugin's manifest.
package export_wasmop_plugin_plugin

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"wit_component/wasmop_plugin_plugin"
	"wit_component/wasmop_plugin_types"

	wasmop "github.com/wasmop/wasmop/sdk-go"
	"github.com/wasmop/wasmop/sdk-go/component"
)

// Manifest is the registered plugin's manifest.
func Manifest() wasmop_plugin_plugin.PluginManifest {
	m := component.Plugin().Manifest
	out := wasmop_plugin_plugin.PluginManifest{
		Name:         m.Name,
		Version:      m.Version,
		Description:  m.Description,
		Parent:       wasmop_plugin_plugin.ParentKind{Kind: kindRef(m.Parent), Scope: scope(m.Scope)},
		Children:     []wasmop_plugin_types.KindRef{},
		Related:      []wasmop_plugin_plugin.RelatedKind{},
		Finalizer:    m.Finalizer,
		Prune:        m.Prune,
		AdoptUnowned: m.AdoptUnowned,
		ConfigSchema: witTypes.None[string](),
		Webhooks:     []wasmop_plugin_plugin.Webhook{},
	}
	for _, k := range m.Children {
		out.Children = append(out.Children, kindRef(k))
	}
	for _, r := range m.Related {
		out.Related = append(out.Related, wasmop_plugin_plugin.RelatedKind{Kind: kindRef(r.Kind), LabelSelector: r.LabelSelector})
	}
	if schema := component.ConfigSchema(m); schema != nil {
		out.ConfigSchema = witTypes.Some(*schema)
	}
	for _, w := range m.Webhooks {
		out.Webhooks = append(out.Webhooks, webhook(w))
	}
	return out
}

func kindRef(k wasmop.Kind) wasmop_plugin_types.KindRef {
	return wasmop_plugin_types.KindRef{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

func scope(s wasmop.Scope) wasmop_plugin_types.Scope {
	if s == wasmop.Cluster {
		return wasmop_plugin_types.Scope_Cluster
	}
	return wasmop_plugin_types.Scope_Namespaced
}

// webhook is w in 0.2.0, which has no match conditions: they need 0.3.0.
func webhook(w wasmop.Webhook) wasmop_plugin_plugin.Webhook {
	out := wasmop_plugin_plugin.Webhook{
		Name:              w.Name,
		Type:              wasmop_plugin_plugin.WebhookType_Validating,
		Rules:             []wasmop_plugin_plugin.Rule{},
		NamespaceSelector: w.NamespaceSelector,
		ObjectSelector:    w.ObjectSelector,
		FailurePolicy:     wasmop_plugin_plugin.FailurePolicy_Fail,
		SideEffects:       wasmop_plugin_plugin.SideEffects_None,
		TimeoutSeconds:    w.TimeoutSeconds,
	}
	if w.Type == wasmop.Mutating {
		out.Type = wasmop_plugin_plugin.WebhookType_Mutating
	}
	if w.FailurePolicy == wasmop.Ignore {
		out.FailurePolicy = wasmop_plugin_plugin.FailurePolicy_Ignore
	}
	if w.SideEffects == wasmop.SideEffectsNoneOnDryRun {
		out.SideEffects = wasmop_plugin_plugin.SideEffects_NoneOnDryRun
	}
	if out.TimeoutSeconds == 0 {
		out.TimeoutSeconds = 10
	}
	for _, r := range w.Rules {
		rule := wasmop_plugin_plugin.Rule{
			Operations:  []wasmop_plugin_types.Operation{},
			ApiGroups:   append([]string{}, r.APIGroups...),
			ApiVersions: append([]string{}, r.APIVersions...),
			Resources:   append([]string{}, r.Resources...),
			Scope:       wasmop_plugin_plugin.RuleScope_All,
		}
		for _, op := range r.Operations {
			rule.Operations = append(rule.Operations, wasmop_plugin_types.Operation(op))
		}
		switch r.Scope {
		case wasmop.RuleScopeCluster:
			rule.Scope = wasmop_plugin_plugin.RuleScope_Cluster
		case wasmop.RuleScopeNamespaced:
			rule.Scope = wasmop_plugin_plugin.RuleScope_Namespaced
		}
		out.Rules = append(out.Rules, rule)
	}
	return out
}
