// Package wasmop is the Go SDK for wasmop plugins: Kubernetes reconcile logic (and admission
// webhooks) in plain Go, built into a WebAssembly component that the wasmop host runs.
//
// A plugin is a library package whose init registers it:
//
//	func init() {
//		wasmop.Register(wasmop.Plugin{Manifest: manifest, Reconcile: Reconcile})
//	}
//
//	func Reconcile(req wasmop.Request) (wasmop.Response, error) { ... }
//
// Nothing in it refers to WebAssembly: `go test` runs the logic natively, with the fixtures of
// this package ([NewRequest], [FixtureCache]). The component's entry (the `main` package with
// the bindings of the contract, `wasmop:plugin@0.3.0`) is generated at build time by
// scripts/go-plugin.sh, which imports the plugin's package and hands the registered [Plugin]
// to the host.
//
// Every call runs in a fresh instance: nothing kept in a global survives to the next call.
package wasmop
