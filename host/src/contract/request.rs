//! What a plugin is given: [`Request`] (gathered from the object cache by
//! [`Request::gather`], in `objects`).

use std::sync::Arc;

use serde_json::Value;

use super::Object;

/// Everything a plugin is given about one parent.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The parent object.
    pub parent: Arc<Object>,
    /// Observed children of the declared child kinds.
    pub children: Vec<Arc<Object>>,
    /// Related objects selected by the manifest.
    pub related: Vec<Arc<Object>>,
    /// The parent is being deleted and the plugin's finalizer is on it.
    pub finalizing: bool,
    /// The plugin's configuration, a JSON object.
    pub config: Value,
}

impl Request {
    /// A request with only a parent: no children, no related objects, empty config.
    pub fn new(parent: impl Into<Object>) -> Self {
        Self {
            parent: Arc::new(parent.into()),
            children: Vec::new(),
            related: Vec::new(),
            finalizing: false,
            config: Value::Object(Default::default()),
        }
    }
}
