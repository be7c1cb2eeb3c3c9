package wasmop

// Plugin is what a plugin package registers: its manifest and its logic.
type Plugin struct {
	Manifest Manifest
	// Reconcile decides the desired state of one parent. An error is a [Failure] (see
	// [AsFailure]). Required unless the plugin only serves webhooks.
	Reconcile func(Request) (Response, error)
	// Admit answers an admission request to the webhook named webhook. Required when the
	// manifest declares webhooks; an error fails the webhook call.
	Admit func(webhook string, request AdmissionRequest) (Verdict, error)
}

var registered *Plugin

// Register makes p the plugin the component serves. Call it once, from an init function of
// the plugin's package; a second call panics.
func Register(p Plugin) {
	if registered != nil {
		panic("wasmop.Register called twice: a component serves one plugin")
	}
	registered = &p
}

// Registered is the registered plugin, or nil.
func Registered() *Plugin { return registered }
