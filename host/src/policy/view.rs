//! How limits and grants read in `WasmPlugin` status and `wasmop inspect`: sizes as `64Mi`,
//! durations in milliseconds, grants spelled out even when empty.

use serde_json::json;

use super::Limits;
use super::{Grants, NamespaceGrant, SecretAccess};

/// The limits a plugin runs under, as `kubectl` readers write them.
pub fn limits_json(limits: &Limits) -> serde_json::Value {
    let size = |bytes: u64| if bytes.is_multiple_of(1 << 20) { format!("{}Mi", bytes >> 20) } else { bytes.to_string() };
    let mut status = json!({
        "deadline": format!("{}ms", limits.deadline.as_millis()),
        "memory": size(limits.memory_bytes),
        "maxResponseBytes": size(limits.output.max_bytes as u64),
        "maxActions": limits.output.max_actions,
    });
    if let Some(fuel) = limits.fuel {
        status["fuel"] = fuel.into();
    }
    if let Some(share) = limits.cpu_share {
        status["cpuShare"] = share.to_string().into();
    }
    status
}

/// The grants of a plugin; empty lists and `none` are shown too, so that "nothing granted" is
/// visible rather than absent.
pub fn grants_json(grants: &Grants) -> serde_json::Value {
    let secrets = match grants.secrets {
        SecretAccess::None => "none",
        SecretAccess::Read => "read",
        SecretAccess::Write => "write",
    };
    let list = |grant: &NamespaceGrant| -> Vec<String> {
        match grant {
            NamespaceGrant::ParentOnly => Vec::new(),
            NamespaceGrant::Also(extra) => extra.iter().cloned().collect(),
            NamespaceGrant::All => vec!["*".to_owned()],
            NamespaceGrant::AllAnd(named) => std::iter::once("*".to_owned()).chain(named.iter().cloned()).collect(),
        }
    };
    let cluster_scoped: Vec<String> = grants.cluster_scoped_children.iter().map(ToString::to_string).collect();
    let escalation: Vec<String> = grants.escalation_kinds.iter().map(ToString::to_string).collect();
    json!({
        "secrets": secrets,
        "namespaces": list(&grants.namespaces),
        "writeNamespaces": list(&grants.write_namespaces),
        "clusterScopedChildren": cluster_scoped,
        "escalationKinds": escalation,
        "allowHostAccess": grants.allow_host_access,
        "adoptUnowned": grants.adopt_unowned,
        "webhookResources": grants.webhook_resources.to_json(),
    })
}
