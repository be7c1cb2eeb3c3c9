//! Recording Kubernetes events about parents (`events.k8s.io/v1`, via kube's Recorder).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType, Recorder, Reporter};
use serde_json::Value;

use crate::contract::{Event, EventType};

/// Publishes events about parents on behalf of one plugin. Failures are logged, never
/// returned: an event is a courtesy, not part of the reconcile.
#[derive(Clone)]
pub struct EventSink {
    recorder: Recorder,
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink").finish_non_exhaustive()
    }
}

impl EventSink {
    /// A sink reporting as controller `wasmop/<plugin>` from host instance `instance` (a
    /// sharded replica's shard name, so the cluster shows which replica reconciled a parent),
    /// else from `$POD_NAME`, else `$HOSTNAME`.
    pub fn new(client: kube::Client, plugin: &str, instance: Option<&str>) -> Self {
        let instance =
            instance.map(str::to_owned).or_else(|| std::env::var("POD_NAME").ok()).or_else(|| std::env::var("HOSTNAME").ok());
        Self { recorder: Recorder::new(client, Reporter { controller: format!("wasmop/{plugin}"), instance }) }
    }

    /// Record `event` about `parent`; a failure is logged.
    pub async fn publish(&self, parent: &Value, event: &Event) {
        if let Err(e) = self.try_publish(parent, event).await {
            tracing::warn!(error = %e, reason = %event.reason, "cannot record event");
        }
    }

    /// Record `event` about `parent`.
    ///
    /// # Errors
    /// The API server's refusal or a failed request.
    pub async fn try_publish(&self, parent: &Value, event: &Event) -> Result<(), kube::Error> {
        let meta = |f: &str| parent.pointer(&format!("/metadata/{f}")).and_then(Value::as_str).map(str::to_owned);
        let reference = ObjectReference {
            api_version: parent["apiVersion"].as_str().map(str::to_owned),
            kind: parent["kind"].as_str().map(str::to_owned),
            name: meta("name"),
            namespace: meta("namespace"),
            uid: meta("uid"),
            resource_version: meta("resourceVersion"),
            field_path: None,
        };
        let ev = KubeEvent {
            type_: match event.type_ {
                EventType::Normal => KubeEventType::Normal,
                EventType::Warning => KubeEventType::Warning,
            },
            reason: event.reason.clone(),
            note: Some(event.note.clone()),
            action: event.action.clone(),
            secondary: None,
        };
        self.recorder.publish(&ev, &reference).await
    }
}
