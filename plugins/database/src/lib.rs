//! A PostgreSQL operator as a wasmop plugin: the example to copy.
//!
//! For every `Database` (`db.example.com/v1alpha1`, namespaced) it runs PostgreSQL: a headless
//! Service and a StatefulSet named like the resource, each replica with a volume of
//! `spec.storageSize`, and a Secret `<name>-credentials` holding the database name, the user
//! and a password generated once and kept. Status: `readyReplicas`, `phase` and a `Ready`
//! condition. CRD: `crds/database.yaml`; the host policy must grant `secrets: write`.
//!
//! The password exists only in the Secret: the plugin keeps what it observes there (a password
//! rotated by hand stays), and generates one only while there is none. PostgreSQL reads it once,
//! when it initializes its volume: a deleted Secret gets a new password the database does not know.
//!
//! ```yaml
//! apiVersion: db.example.com/v1alpha1
//! kind: Database
//! metadata: {name: orders, namespace: default}
//! spec: {name: orders, version: "17", storageSize: 1Gi, replicas: 1}
//! ```

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{Secret, Service};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wasmop_sdk::prelude::*;

/// The replicas a `Database` may ask for.
pub const REPLICAS: std::ops::RangeInclusive<i64> = 1..=5;

/// The user PostgreSQL creates, and the key of each value in the credentials Secret.
const USER: &str = "postgres";

/// The `Database` kind this plugin reconciles.
pub fn database_kind() -> Kind {
    Kind::new("db.example.com", "v1alpha1", "Database")
}

/// The fields of a `Database` the plugin reads.
#[derive(Debug, Deserialize)]
pub struct Database {
    /// The desired state.
    pub spec: DatabaseSpec,
}

/// `Database.spec`. Strings and a wide integer, so that bad values get the plugin's own clear
/// terminal error rather than a parse failure.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseSpec {
    /// The database to create; the resource's name when absent.
    pub name: Option<String>,
    /// The PostgreSQL version: the tag of the `postgres` image (`17`, `16.4`).
    #[serde(default)]
    pub version: String,
    /// The volume of each replica, a Kubernetes quantity (`1Gi`); fixed once the StatefulSet exists.
    #[serde(default)]
    pub storage_size: String,
    /// The number of PostgreSQL pods, within [`REPLICAS`]; 1 when absent.
    pub replicas: Option<i64>,
}

/// `Database.status` as the plugin writes it (the `Ready` condition goes through the response).
#[derive(Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseStatus {
    /// Pods of the StatefulSet that are ready.
    pub ready_replicas: i32,
    /// `Pending` (creating the credentials), `Provisioning` (pods not all ready) or `Ready`.
    pub phase: &'static str,
}

/// Check the spec against the StatefulSet already running (if any); the replica count.
///
/// # Errors
/// A terminal error naming the field: replicas out of [`REPLICAS`], an empty or malformed
/// version, a storage size that is not a quantity or differs from the running StatefulSet's
/// (its volume claim templates cannot change).
pub fn validate(spec: &DatabaseSpec, running: Option<&Value>) -> Result<i32, Error> {
    let replicas = spec.replicas.unwrap_or(1);
    if !REPLICAS.contains(&replicas) {
        return Err(Error::terminal(format!("spec.replicas must be {} to {}, got {replicas}", REPLICAS.start(), REPLICAS.end())));
    }
    let tag_char = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    if spec.version.is_empty() || spec.version.len() > 128 || !spec.version.chars().all(tag_char) {
        return Err(Error::terminal(format!(
            "spec.version must be a postgres image tag like 17 or 16.4, got {:?}",
            spec.version
        )));
    }
    let size: Quantity = spec.storage_size.parse().map_err(|e| Error::terminal(format!("spec.storageSize: {e}")))?;
    let claimed = running.and_then(|s| s.pointer("/spec/volumeClaimTemplates/0/spec/resources/requests/storage"));
    if let Some(claimed) = claimed.and_then(Value::as_str).and_then(|c| c.parse::<Quantity>().ok())
        && claimed != size
    {
        return Err(Error::terminal(format!(
            "spec.storageSize cannot change from {claimed} to {size}: a StatefulSet's volume claims are fixed; \
             put it back, or resize the PersistentVolumeClaims yourself"
        )));
    }
    Ok(replicas as i32)
}

/// A password of 128 random bits, in hex: `wasi:random` in the sandbox.
///
/// # Errors
/// Retryable, when the system has no randomness to give.
pub fn generate_password() -> Result<String, Error> {
    let random = || getrandom::u64().map_err(|e| Error::retryable(format!("no randomness for a password: {e}")));
    Ok(format!("{:016x}{:016x}", random()?, random()?))
}

/// The plugin.
#[derive(Debug)]
pub struct DatabaseOperator;

impl Plugin for DatabaseOperator {
    fn manifest() -> Manifest {
        Manifest::new("database", env!("CARGO_PKG_VERSION"))
            .description("Runs PostgreSQL (a StatefulSet, a headless Service, generated credentials) for each Database")
            .parent(database_kind(), Scope::Namespaced)
            .child(Kind::of::<Service>())
            .child(Kind::of::<StatefulSet>())
            .child(Kind::of::<Secret>())
            // Every child has a fixed name: nothing to prune (and a missing Secret must not cost the StatefulSet).
            .prune(false)
    }

    fn reconcile(req: Request, _ctx: &Context) -> Result<Response, Error> {
        let (name, namespace) = (req.name(), req.namespace());
        let spec = req.parent_as::<Database>()?.spec;
        let running = req.child(&Kind::of::<StatefulSet>(), name);
        let replicas = validate(&spec, running)?;
        let labels = json!({"app.kubernetes.io/name": "postgres", "app.kubernetes.io/instance": name});
        let meta = |name: &str| json!({"name": name, "namespace": namespace, "labels": labels});
        let secret = format!("{name}-credentials");

        // The password lives only in the Secret: keep the observed one. Without it, create the
        // Secret alone and wait for its watch event, so that no later call can miss it and
        // generate another.
        let bytes = |text: &str| ByteString(text.as_bytes().to_vec());
        let kept = req.child(&Kind::of::<Secret>(), &secret).and_then(|s| s.pointer("/data/password")).cloned();
        let password = match &kept {
            Some(kept) => kept.clone(),
            None => json!(bytes(&generate_password()?)),
        };
        let database = spec.name.as_deref().unwrap_or(name);
        let response = Response::new().apply(json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": meta(&secret), "type": "Opaque",
            "data": {"database": bytes(database), "username": bytes(USER), "password": password},
        }));
        if kept.is_none() {
            return Ok(response.status(DatabaseStatus { ready_replicas: 0, phase: "Pending" }).condition(Condition::false_(
                "Ready",
                "CreatingCredentials",
                format!("creating Secret {secret}"),
            )));
        }

        let env = |var: &str, key: &str| json!({"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}});
        let response = response
            .apply(json!({
                "apiVersion": "v1", "kind": "Service", "metadata": meta(name),
                // `protocol` keys the ports lists: server-side apply wants it even where it defaults.
                "spec": {"clusterIP": "None", "selector": labels,
                         "ports": [{"name": "postgres", "port": 5432, "protocol": "TCP"}]},
            }))
            .apply(json!({
                "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta(name),
                "spec": {
                    "serviceName": name, "replicas": replicas, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                        "name": "postgres", "image": format!("postgres:{}", spec.version),
                        "ports": [{"name": "postgres", "containerPort": 5432, "protocol": "TCP"}],
                        "env": [env("POSTGRES_DB", "database"), env("POSTGRES_USER", "username"),
                                env("POSTGRES_PASSWORD", "password"),
                                {"name": "PGDATA", "value": "/var/lib/postgresql/data/pgdata"}],
                        "readinessProbe": {"exec": {"command": ["pg_isready", "-U", USER]}},
                        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql/data"}],
                    }]}},
                    "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": spec.storage_size}},
                    }}],
                },
            }));

        let status = req.child_status::<StatefulSetStatus>(&Kind::of::<StatefulSet>(), name)?;
        let ready = status.and_then(|s| s.ready_replicas).unwrap_or(0);
        let message = format!("{ready}/{replicas} replicas ready");
        let (phase, condition) = if ready >= replicas {
            ("Ready", Condition::true_("Ready", "ReplicasReady", message))
        } else {
            ("Provisioning", Condition::false_("Ready", "ReplicasNotReady", message))
        };
        Ok(response.status(DatabaseStatus { ready_replicas: ready, phase }).condition(condition))
    }
}

wasmop_sdk::export_plugin!(DatabaseOperator);

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn database(spec: Value) -> Request {
        Request::new(json!({
            "apiVersion": "db.example.com/v1alpha1", "kind": "Database",
            "metadata": {"name": "orders", "namespace": "shop", "generation": 1},
            "spec": spec,
        }))
    }

    fn valid() -> Value {
        json!({"name": "orders_db", "version": "17", "storageSize": "1Gi", "replicas": 2})
    }

    /// The Secret as the API server stores it (what the host observes after the first apply).
    fn stored_secret(password: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "orders-credentials", "namespace": "shop"},
               "data": {"password": json!(ByteString(password.as_bytes().to_vec()))}})
    }

    fn stateful_set(storage: &str, ready: Option<i32>) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "orders", "namespace": "shop"},
               "spec": {"volumeClaimTemplates": [{"spec": {"resources": {"requests": {"storage": storage}}}}]},
               "status": {"replicas": 2, "readyReplicas": ready}})
    }

    fn reconcile(req: Request) -> Result<Response, Error> {
        DatabaseOperator::reconcile(req, &Context::fixture(vec![]))
    }

    fn child<'a>(resp: &'a Response, kind: Kind, name: &str) -> &'a Value {
        resp.child(&kind, name).unwrap_or_else(|| panic!("{kind} {name} in {:#?}", resp.children()))
    }

    fn decoded(secret: &Value, key: &str) -> String {
        let bytes: ByteString = serde_json::from_value(secret["data"][key].clone()).unwrap();
        String::from_utf8(bytes.0).unwrap()
    }

    #[test]
    fn first_call_creates_only_the_credentials_with_a_fresh_password() {
        let resp = reconcile(database(valid())).unwrap();
        assert_eq!(resp.children().len(), 1, "the Secret alone until it is observed");
        let secret = child(&resp, Kind::of::<Secret>(), "orders-credentials");
        assert_eq!((decoded(secret, "database").as_str(), decoded(secret, "username").as_str()), ("orders_db", "postgres"));
        let password = decoded(secret, "password");
        assert!(password.len() == 32 && password.bytes().all(|b| b.is_ascii_hexdigit()), "{password}");
        let other =
            decoded(child(&reconcile(database(valid())).unwrap(), Kind::of::<Secret>(), "orders-credentials"), "password");
        assert_ne!(password, other, "each fresh Secret gets its own password");
        assert_eq!(resp.status_patch(), Some(&json!({"readyReplicas": 0, "phase": "Pending"})));
        let c = resp.condition_of("Ready").unwrap();
        assert_eq!((c.status, c.reason.as_str()), (ConditionStatus::False, "CreatingCredentials"));
    }

    #[test]
    fn an_observed_secret_keeps_its_password_and_the_database_starts() {
        let resp = reconcile(database(valid()).with_child(stored_secret("s3cret"))).unwrap();
        assert_eq!(decoded(child(&resp, Kind::of::<Secret>(), "orders-credentials"), "password"), "s3cret");
        assert_eq!(resp.children().len(), 3);
    }

    #[test]
    fn service_is_headless_and_selects_the_pods_of_one_database() {
        let resp = reconcile(database(valid()).with_child(stored_secret("p"))).unwrap();
        let svc = child(&resp, Kind::of::<Service>(), "orders");
        assert_eq!(svc["metadata"]["namespace"], "shop");
        assert_eq!(svc["spec"]["clusterIP"], "None");
        assert_eq!(
            svc["spec"]["ports"],
            json!([{"name": "postgres", "port": 5432, "protocol": "TCP"}]),
            "SSA needs the protocol"
        );
        let labels = json!({"app.kubernetes.io/name": "postgres", "app.kubernetes.io/instance": "orders"});
        assert_eq!(svc["spec"]["selector"], labels);
        let sts = child(&resp, Kind::of::<StatefulSet>(), "orders");
        assert_eq!(sts["spec"]["selector"]["matchLabels"], labels);
        assert_eq!(sts["spec"]["template"]["metadata"]["labels"], labels);
        assert_eq!(sts["spec"]["serviceName"], "orders");
    }

    #[test]
    fn stateful_set_runs_the_version_on_a_claim_of_the_storage_size_with_the_secret() {
        let resp = reconcile(database(valid()).with_child(stored_secret("s3cret"))).unwrap();
        let sts = child(&resp, Kind::of::<StatefulSet>(), "orders");
        assert_eq!(sts["spec"]["replicas"], 2);
        let container = &sts["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "postgres:17");
        assert_eq!(
            container["env"][2],
            json!({"name": "POSTGRES_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "orders-credentials", "key": "password"}}})
        );
        let encoded = stored_secret("s3cret")["data"]["password"].as_str().unwrap().to_owned();
        assert!(!sts.to_string().contains(&encoded), "the password stays in the Secret");
        let claim = &sts["spec"]["volumeClaimTemplates"][0];
        assert_eq!(claim["metadata"]["name"], container["volumeMounts"][0]["name"]);
        assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "1Gi");
    }

    #[test]
    fn name_defaults_to_the_resource_and_replicas_to_one() {
        let resp =
            reconcile(database(json!({"version": "16.4", "storageSize": "500Mi"})).with_child(stored_secret("p"))).unwrap();
        assert_eq!(decoded(child(&resp, Kind::of::<Secret>(), "orders-credentials"), "database"), "orders");
        assert_eq!(child(&resp, Kind::of::<StatefulSet>(), "orders")["spec"]["replicas"], 1);
    }

    #[test]
    fn status_follows_the_ready_replicas_of_the_stateful_set() {
        let req = |ready| database(valid()).with_child(stored_secret("p")).with_child(stateful_set("1Gi", ready));
        for (ready, phase, status, message) in [
            (None, "Provisioning", ConditionStatus::False, "0/2 replicas ready"),
            (Some(1), "Provisioning", ConditionStatus::False, "1/2 replicas ready"),
            (Some(2), "Ready", ConditionStatus::True, "2/2 replicas ready"),
        ] {
            let resp = reconcile(req(ready)).unwrap();
            assert_eq!(resp.status_patch(), Some(&json!({"readyReplicas": ready.unwrap_or(0), "phase": phase})));
            let c = resp.condition_of("Ready").unwrap();
            assert_eq!((c.status, c.message.as_str()), (status, message));
        }
    }

    #[test]
    fn replicas_out_of_range_are_terminal() {
        for replicas in [0, 6, 1_i64 << 40] {
            let e = reconcile(database(json!({"version": "17", "storageSize": "1Gi", "replicas": replicas}))).unwrap_err();
            assert_eq!(e, Error::terminal(format!("spec.replicas must be 1 to 5, got {replicas}")));
        }
    }

    #[test]
    fn an_empty_or_malformed_version_is_terminal() {
        for version in ["", "17 beta", "latest/../x"] {
            let e = reconcile(database(json!({"version": version, "storageSize": "1Gi"}))).unwrap_err();
            assert!(!e.is_retryable());
            assert_eq!(e.message(), format!("spec.version must be a postgres image tag like 17 or 16.4, got {version:?}"));
        }
    }

    #[test]
    fn a_storage_size_that_is_not_a_quantity_is_terminal() {
        let e = reconcile(database(json!({"version": "17", "storageSize": "lots"}))).unwrap_err();
        assert!(!e.is_retryable());
        assert!(e.message().starts_with("spec.storageSize: \"lots\" is not a quantity"), "{e}");
    }

    #[test]
    fn a_storage_size_change_is_terminal_but_an_equal_value_is_not() {
        let running = |spec: Value| database(spec).with_child(stored_secret("p")).with_child(stateful_set("1Gi", Some(2)));
        let e = reconcile(running(json!({"version": "17", "storageSize": "2Gi"}))).unwrap_err();
        assert!(!e.is_retryable());
        assert!(e.message().starts_with("spec.storageSize cannot change from 1Gi to 2Gi"), "{e}");
        assert!(reconcile(running(json!({"version": "17", "storageSize": "1024Mi"}))).is_ok());
    }

    #[test]
    fn manifest_declares_the_three_children_and_does_not_prune() {
        let m = DatabaseOperator::manifest();
        assert_eq!(m.parent, Some((Kind::new("db.example.com", "v1alpha1", "Database"), Scope::Namespaced)));
        assert_eq!(
            m.children,
            [Kind::new("", "v1", "Service"), Kind::new("apps", "v1", "StatefulSet"), Kind::new("", "v1", "Secret")]
        );
        assert!(!m.prune && !m.finalizer);
    }
}
