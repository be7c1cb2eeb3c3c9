//! The trait a plugin implements.

use crate::{AdmissionRequest, Context, Error, Manifest, Request, Response, Verdict};

/// A wasmop operator plugin: a pure function from observed state to desired state.
///
/// Implement it on a unit struct and export it with
/// [`export_plugin!`](crate::export_plugin). Every call runs in a fresh instance, so nothing
/// kept in memory survives to the next call.
///
/// ```
/// use wasmop_sdk::prelude::*;
/// use serde_json::json;
///
/// struct Echo;
///
/// impl Plugin for Echo {
///     fn manifest() -> Manifest {
///         Manifest::new("echo", "0.1.0")
///             .parent(Kind::new("example.com", "v1", "Echo"), Scope::Namespaced)
///             .child(Kind::new("", "v1", "ConfigMap"))
///             .prune(true)
///     }
///
///     fn reconcile(req: Request, _ctx: &Context) -> Result<Response, Error> {
///         let message = req.parent["spec"]["message"].as_str().ok_or_else(|| Error::terminal("spec.message is required"))?;
///         Ok(Response::new()
///             .apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
///                           "metadata": {"name": req.name()}, "data": {"message": message}}))
///             .condition(Condition::true_("Ready", "Echoed", "")))
///     }
/// }
///
/// // Unit-test the logic natively:
/// let req = Request::new(json!({"metadata": {"name": "hi"}, "spec": {"message": "hello"}}));
/// let resp = Echo::reconcile(req, &Context::fixture(vec![])).unwrap();
/// assert_eq!(resp.children()[0]["data"]["message"], "hello");
/// ```
pub trait Plugin {
    /// Describe the plugin. Called once when the plugin is loaded; must not depend on any
    /// input and must always return the same answer.
    fn manifest() -> Manifest;

    /// Decide the desired state of one parent.
    fn reconcile(req: Request, ctx: &Context) -> Result<Response, Error>;

    /// Judge, and for a mutating webhook change, one object before the API server stores it.
    /// Called only for a webhook the manifest declares (`webhook` is its name); a mutation is
    /// [`Verdict::mutate`] with the whole changed object, and the host computes the patch.
    /// An error denies the request with its message (the host fails closed), as do a panic, a
    /// timeout or a mutated object with another name, namespace or kind. Lookups through
    /// `ctx` read the admitted object's namespace.
    ///
    /// The default implementation, for plugins that declare no webhooks, fails every call.
    ///
    /// ```
    /// use wasmop_sdk::prelude::*;
    /// use serde_json::json;
    ///
    /// struct Labels;
    ///
    /// impl Plugin for Labels {
    ///     fn manifest() -> Manifest {
    ///         Manifest::new("labels", "0.1.0")
    ///             .parent(Kind::new("example.com", "v1", "Thing"), Scope::Namespaced)
    ///             .webhook(Webhook::mutating("label").rule(Operation::Create, "", "v1", "configmaps"))
    ///     }
    ///     fn reconcile(_req: Request, _ctx: &Context) -> Result<Response, Error> {
    ///         Ok(Response::new())
    ///     }
    ///     fn admit(_webhook: &str, req: AdmissionRequest, _ctx: &Context) -> Result<Verdict, Error> {
    ///         let mut object = req.object.ok_or_else(|| Error::terminal("no object"))?;
    ///         object["metadata"]["labels"]["labelled"] = json!("yes");
    ///         Ok(Verdict::mutate(object))
    ///     }
    /// }
    ///
    /// let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "a"}});
    /// let req = AdmissionRequest::new(Operation::Create, cm);
    /// let verdict = Labels::admit("label", req.clone(), &Context::fixture_for_admission(&req, vec![])).unwrap();
    /// assert_eq!(verdict.mutated().unwrap()["metadata"]["labels"]["labelled"], "yes");
    /// ```
    fn admit(webhook: &str, req: AdmissionRequest, ctx: &Context) -> Result<Verdict, Error> {
        let _ = (req, ctx);
        Err(Error::terminal(format!("the plugin declares webhook {webhook:?} but does not implement Plugin::admit")))
    }
}
