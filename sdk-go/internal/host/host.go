// Package host holds what the component's entry installs: the host's log and cache imports.
// Natively (in tests) nothing is installed.
package host

// Imports are the host functions of the contract, in plain Go types. A nil field is absent.
type Imports struct {
	// Log is `log.log` with the level 0 (trace) to 4 (error).
	Log func(level int, message string)
	// Get is `cache.get`: the JSON of the object, or nil when the cache has none.
	Get func(group, version, kind string, namespace *string, name string) (*string, error)
	// List is `cache.list`: the JSON of every matching object.
	List func(group, version, kind string, namespace *string, labelSelector string) ([]string, error)
}

// Installed is what the entry installed.
var Installed Imports
