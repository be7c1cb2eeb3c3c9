//! The trait a plugin implements.

use crate::{Context, Error, Manifest, Request, Response};

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
}
