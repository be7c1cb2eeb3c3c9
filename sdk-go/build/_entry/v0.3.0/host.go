// The component's entry for wasmop:plugin@0.3.0, beside the bindings wit-bindgen generated:
// it installs the host's imports into the SDK. The export packages implement the exports with
// the registered plugin.
package main

import (
	"errors"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"wit_component/wasmop_plugin_cache"
	"wit_component/wasmop_plugin_log"
	"wit_component/wasmop_plugin_types"

	"github.com/wasmop/wasmop/sdk-go/component"
)

func init() {
	component.Install(component.Imports{
		Log: func(level int, message string) {
			wasmop_plugin_log.Log(wasmop_plugin_types.Level(level), message)
		},
		Get: func(group, version, kind string, namespace *string, name string) (*string, error) {
			result := wasmop_plugin_cache.Get(kindRef(group, version, kind), option(namespace), name)
			if result.IsErr() {
				return nil, lookupError(result.Err())
			}
			if found := result.Ok(); found.IsSome() {
				text := found.Some()
				return &text, nil
			}
			return nil, nil
		},
		List: func(group, version, kind string, namespace *string, selector string) ([]string, error) {
			result := wasmop_plugin_cache.List(kindRef(group, version, kind), option(namespace), selector)
			if result.IsErr() {
				return nil, lookupError(result.Err())
			}
			return result.Ok(), nil
		},
	})
}

func kindRef(group, version, kind string) wasmop_plugin_types.KindRef {
	return wasmop_plugin_types.KindRef{Group: group, Version: version, Kind: kind}
}

func option(s *string) witTypes.Option[string] {
	if s == nil {
		return witTypes.None[string]()
	}
	return witTypes.Some(*s)
}

func lookupError(e wasmop_plugin_cache.LookupError) error {
	switch e.Tag() {
	case wasmop_plugin_cache.LookupError_UndeclaredKind:
		return component.LookupError(e.UndeclaredKind())
	case wasmop_plugin_cache.LookupError_Forbidden:
		return component.LookupError(e.Forbidden())
	case wasmop_plugin_cache.LookupError_InvalidSelector:
		return component.LookupError(e.InvalidSelector())
	}
	return errors.New("unknown lookup error")
}
