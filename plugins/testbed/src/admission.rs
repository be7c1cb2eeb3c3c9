//! The testbed's admission modes: the `admission` build declares one webhook per mode (see the
//! table in the crate docs), and [`admit`] answers each by its name.

use serde_json::json;
use wasmop_sdk::prelude::*;

use super::{exhaust_memory, spin_forever, testbed_kind, trap};

/// The label selecting a ConfigMap for one admission webhook of the testbed.
pub const ADMISSION_LABEL: &str = "testbed-admission";

/// The webhooks of the `admission` build: one per mode, each on ConfigMaps labelled
/// `testbed-admission=<mode>`.
pub fn admission_webhooks() -> Vec<Webhook> {
    let modes = [
        ("allow", false),
        ("deny", false),
        ("label", true),
        ("loop", false),
        ("oom", false),
        ("trap", false),
        ("rename", true),
        ("lookup", false),
    ];
    modes
        .into_iter()
        .map(|(mode, mutating)| {
            let webhook = if mutating { Webhook::mutating(mode) } else { Webhook::validating(mode) };
            webhook
                .with_rule(Rule::new([Operation::Create, Operation::Update], "", "v1", "configmaps").scope(RuleScope::Namespaced))
                .object_selector(format!("{ADMISSION_LABEL}={mode}"))
                .timeout_seconds(5)
        })
        .chain(cfg!(feature = "admits-secrets").then(admits_secrets))
        .collect()
}

/// The hostile webhook of the `admits-secrets` build: Secrets it never declared.
fn admits_secrets() -> Webhook {
    Webhook::validating("secrets")
        .with_rule(Rule::new([Operation::Create], "", "v1", "secrets").scope(RuleScope::Namespaced))
        .object_selector(format!("{ADMISSION_LABEL}=secrets"))
        .timeout_seconds(5)
}

/// The answer of webhook `webhook` (a mode) to `req`; an unknown mode is a terminal error.
pub(crate) fn admit(webhook: &str, req: AdmissionRequest, ctx: &Context) -> Result<Verdict, Error> {
    let name = req.name.clone().unwrap_or_default();
    match webhook {
        "allow" => Ok(Verdict::allow().warning("testbed allows")),
        "deny" => Ok(Verdict::deny(format!("testbed denies {name}"))),
        "label" => {
            let mut object = req.object.ok_or_else(|| Error::terminal("no object to label"))?;
            object["metadata"]["labels"]["testbed-admitted"] = json!("yes");
            Ok(Verdict::mutate(object))
        }
        "loop" => spin_forever(),
        "oom" => exhaust_memory(),
        "trap" => trap(),
        "rename" => {
            let mut object = req.object.ok_or_else(|| Error::terminal("no object to rename"))?;
            object["metadata"]["name"] = json!(format!("{name}-renamed"));
            Ok(Verdict::mutate(object))
        }
        "lookup" => {
            let found = ctx.list(&testbed_kind(), None, "").map_err(|e| Error::terminal(e.to_string()))?;
            let names: Vec<&str> = found.iter().filter_map(|o| o["metadata"]["name"].as_str()).collect();
            Ok(Verdict::allow().warning(format!("testbeds: {}", names.join(","))))
        }
        "secrets" => {
            let data = req.object.as_ref().and_then(|o| o["data"].as_object());
            let keys: Vec<&str> = data.map(|d| d.keys().map(String::as_str).collect()).unwrap_or_default();
            Ok(Verdict::deny(format!("testbed saw secret {name}: {}", keys.join(","))))
        }
        other => Err(Error::terminal(format!("testbed has no admission mode {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Testbed;
    use serde_json::Value;

    fn config_map(labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default", "labels": labels}})
    }

    fn admit_with(webhook: &str, objects: Vec<Value>) -> Result<Verdict, Error> {
        let req = AdmissionRequest::new(Operation::Create, config_map(json!({ADMISSION_LABEL: webhook})));
        let ctx = Context::fixture_for_admission(&req, objects);
        Testbed::admit(webhook, req, &ctx)
    }

    #[test]
    fn deny_names_the_object_and_label_adds_the_label() {
        assert_eq!(admit_with("deny", vec![]).unwrap().message(), Some("testbed denies c"));
        let verdict = admit_with("label", vec![]).unwrap();
        assert_eq!(verdict.mutated().unwrap()["metadata"]["labels"]["testbed-admitted"], "yes");
    }

    #[test]
    fn rename_answers_another_name() {
        assert_eq!(admit_with("rename", vec![]).unwrap().mutated().unwrap()["metadata"]["name"], "c-renamed");
    }

    #[test]
    fn lookup_names_the_testbeds_of_the_namespace() {
        let tb = |ns: &str, name: &str| json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed", "metadata": {"name": name, "namespace": ns}});
        let verdict = admit_with("lookup", vec![tb("default", "a"), tb("other", "b")]).unwrap();
        assert_eq!(verdict.warnings(), ["testbeds: a"]);
    }

    #[test]
    fn every_webhook_selects_its_own_label() {
        let webhooks = admission_webhooks();
        let count = if cfg!(feature = "admits-secrets") { 9 } else { 8 };
        assert_eq!(webhooks.len(), count);
        assert!(webhooks.iter().all(|w| w.object_selector == format!("{ADMISSION_LABEL}={}", w.name)));
        assert_eq!(Testbed::manifest().webhooks.len(), if cfg!(feature = "admission") { count } else { 0 });
    }

    #[test]
    fn secrets_denies_naming_what_it_saw() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"},
            "data": {"password": "aHVudGVyMg=="}});
        let req = AdmissionRequest::new(Operation::Create, secret);
        let ctx = Context::fixture_for_admission(&req, vec![]);
        assert_eq!(Testbed::admit("secrets", req, &ctx).unwrap().message(), Some("testbed saw secret s: password"));
    }
}
