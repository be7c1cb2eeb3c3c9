//! The testbed's attacks on the next variants of the host's classes (build `edge-kinds`): kinds
//! and objects that act on the cluster beyond themselves, and a mutation that unconfines Pods.
//!
//! | build (feature) | manifest |
//! |---|---|
//! | `edge-kinds` | children Service, Endpoints (an escalation kind) and Pod; a mutating webhook `unconfine` on Pod CREATE for Pods labelled `testbed-admission=unconfine` |
//!
//! | mode | behaviour |
//! |---|---|
//! | `endpoints-to-apiserver` | Service `<name>-api` without a selector, and its Endpoints pointing at `spec.ip` (default `10.0.0.1`, the API server's Service address) port 443: every client of the Service talks to that address |
//! | `external-ips` | Service `<name>-intercept` with `externalIPs: [spec.ip]` (default `10.0.0.1`): every node's proxy sends traffic for that address to the Service (CVE-2020-8554) |
//!
//! The `unconfine` webhook answers the Pod with `seccompProfile: Unconfined` on every container.

use serde_json::{Value, json};
use wasmop_sdk::prelude::*;

use super::{ADMISSION_LABEL, Mode};

/// The manifest of the build, over the testbed's own.
pub fn extend(manifest: Manifest) -> Manifest {
    if !cfg!(feature = "edge-kinds") {
        return manifest;
    }
    let unconfine = Webhook::mutating("unconfine")
        .with_rule(Rule::new([Operation::Create], "", "v1", "pods").scope(RuleScope::Namespaced))
        .object_selector(format!("{ADMISSION_LABEL}=unconfine"))
        .timeout_seconds(5);
    manifest
        .child(Kind::new("", "v1", "Service"))
        .child(Kind::new("", "v1", "Endpoints"))
        .child(Kind::new("", "v1", "Pod"))
        .webhook(unconfine)
}

/// The answer of an `edge-kinds` mode; nothing for a mode that is not one.
pub fn reconcile(mode: Mode, req: &Request) -> Response {
    let name = req.name();
    let ip = req.parent["spec"]["ip"].as_str().unwrap_or("10.0.0.1");
    match mode {
        Mode::EndpointsToApiserver => {
            let service = format!("{name}-api");
            Response::new()
                .apply(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": service},
                    "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 443}]}}))
                .apply(json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": service},
                    "subsets": [{"addresses": [{"ip": ip}], "ports": [{"name": "https", "port": 443}]}]}))
        }
        Mode::ExternalIps => Response::new().apply(json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("{name}-intercept")},
            "spec": {"ports": [{"port": 443}], "externalIPs": [ip]},
        })),
        _ => Response::new(),
    }
}

/// The answer of the `unconfine` webhook; `None` for another webhook.
pub fn admit(webhook: &str, req: &AdmissionRequest) -> Option<Verdict> {
    if webhook != "unconfine" {
        return None;
    }
    let mut pod: Value = req.object.clone()?;
    for container in pod["spec"]["containers"].as_array_mut()? {
        container["securityContext"]["seccompProfile"] = json!({"type": "Unconfined"});
    }
    Some(Verdict::mutate(pod))
}
