//! The testbed's attacks on the host's own surface and bounds, each in a build of its own:
//!
//! | feature | what the manifest declares |
//! |---|---|
//! | `vetoes-leases` | Leases as related, and a `Fail` validating webhook `veto-leases` on every Lease UPDATE, with no selector: denied with `testbed vetoes lease <name>` (the host's leader Lease and kube-system's included, unless the host excludes them) |
//! | `mutates-ownership` | mutating webhooks on ConfigMaps labelled `testbed-admission=<mode>`: `own` adds an `ownerReferences` entry naming the ConfigMap `testbed-owner` (uid `spec-owner-uid`), `hold` adds the finalizer `testbed.example.com/hold`, `forge` sets the host's label `wasmop.dev/plugin: forged` |
//! | `schema-huge` | a configuration schema of 20 MiB (a description of that length) |
//! | `schema-doubling` | a 3 KB configuration schema with 2^60 `allOf`/`$ref` paths |
//! | `schema-regexes` | a configuration schema of 1,500 Unicode regular expressions in about 50 KB |
//!
//! And one mode, in every build: `dense` returns one ConfigMap of about `spec.bytes` bytes
//! (default 15,000,000) whose `data` is as many short keys as fit (`"k0":"","k1":"",…`): small
//! as text, many times larger parsed.

use serde_json::{Value, json};
use wasmop_sdk::prelude::*;

use super::ADMISSION_LABEL;

/// The webhooks of the hostile features enabled in this build.
pub fn hostile_webhooks() -> Vec<Webhook> {
    let mut webhooks = Vec::new();
    if cfg!(feature = "vetoes-leases") {
        webhooks.push(
            Webhook::validating("veto-leases")
                .with_rule(Rule::new([Operation::Update], "coordination.k8s.io", "v1", "leases").scope(RuleScope::Namespaced))
                .failure_policy(FailurePolicy::Fail)
                .timeout_seconds(5),
        );
    }
    if cfg!(feature = "mutates-ownership") {
        for mode in ["own", "hold", "forge"] {
            webhooks.push(
                Webhook::mutating(mode)
                    .with_rule(Rule::new([Operation::Create], "", "v1", "configmaps").scope(RuleScope::Namespaced))
                    .object_selector(format!("{ADMISSION_LABEL}={mode}"))
                    .timeout_seconds(5),
            );
        }
    }
    webhooks
}

/// The Lease kind, declared as related by the `vetoes-leases` build.
pub fn lease_kind() -> Kind {
    Kind::new("coordination.k8s.io", "v1", "Lease")
}

/// The answer of a hostile webhook; `None` for a webhook that is not one of them.
pub fn admit(webhook: &str, req: &AdmissionRequest) -> Option<Result<Verdict, Error>> {
    let name = req.name.clone().unwrap_or_default();
    let mutate = |change: fn(&mut Value)| {
        let mut object = req.object.clone().ok_or_else(|| Error::terminal("no object to mutate"))?;
        change(&mut object);
        Ok(Verdict::mutate(object))
    };
    Some(match webhook {
        "veto-leases" => Ok(Verdict::deny(format!("testbed vetoes lease {name}"))),
        "own" => mutate(|o| {
            o["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "testbed-owner", "uid": "spec-owner-uid"}]);
        }),
        "hold" => mutate(|o| o["metadata"]["finalizers"] = json!(["testbed.example.com/hold"])),
        "forge" => mutate(|o| o["metadata"]["labels"]["wasmop.dev/plugin"] = json!("forged")),
        _ => return None,
    })
}

/// The configuration schema of the `schema-*` build, if this is one.
pub fn config_schema() -> Option<Value> {
    if cfg!(feature = "schema-huge") {
        return Some(json!({"type": "object", "description": "x".repeat(20 << 20)}));
    }
    if cfg!(feature = "schema-doubling") {
        let mut defs = serde_json::Map::new();
        defs.insert("d0".into(), json!({"type": "string"}));
        for i in 1..=60 {
            let previous = format!("#/$defs/d{}", i - 1);
            defs.insert(format!("d{i}"), json!({"allOf": [{"$ref": previous}, {"$ref": previous}]}));
        }
        return Some(json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/d60"}}, "required": ["x"], "$defs": defs}));
    }
    if cfg!(feature = "schema-regexes") {
        let properties: serde_json::Map<String, Value> =
            (0..1500).map(|i| (format!("p{i}"), json!({"pattern": format!("^[\\p{{L}}\\w]{{{}}}$", 20 + i % 7)}))).collect();
        return Some(json!({"type": "object", "properties": properties, "required": ["p0"]}));
    }
    None
}

/// The answer of mode `dense`: one ConfigMap `<name>-dense` of about `bytes` bytes of JSON, all
/// of it short `data` keys with empty values.
pub fn dense(name: &str, bytes: u64) -> Response {
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    let mut text = String::with_capacity(bytes.saturating_add(200));
    text.push_str(&format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}-dense"}},"data":{{"#));
    let mut i = 0_u64;
    while text.len() < bytes {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&format!(r#""k{i}":"""#));
        i += 1;
    }
    text.push_str("}}");
    Response::new().apply_raw_json(text)
}
