//! [`Writer::execute`] against the mock API server: the plan's applies, prunes, deletes and
//! status patch as the requests they become, and API errors as the errors the reconcile sees.

use serde_json::{Value, json};
use wasmop::actions::{ActionError, Audit, PARENT_ANNOTATION, PARENT_UID_LABEL, Plan, WriteTarget, Written, owner_reference};
use wasmop::cluster::Discovery;
use wasmop::contract::{Condition, ConditionStatus, Kind, Manifest, ObjectRef, Response};
use wasmop::policy::Grants;
use wasmop_e2e::plans::{
    NOW, Planning, config_map_kind, returned_config_map, stored_config_map, testbed_manifest, testbed_parent, testbed_resource,
};

use super::server::{ApiServer, Call, mock_client};

/// Who the writes of these tests are audited as.
const AUDIT: Audit<'static> =
    Audit { plugin: "p", version: "0.1.0", digest: "sha256:0", parent: "Parent ns/p", field_manager: "wasmop/p" };

/// Where the testbed plugin's writes go: the mock API server behind `client`.
fn target(client: kube::Client) -> WriteTarget {
    WriteTarget::new(client.clone(), std::sync::Arc::new(Discovery::new(client)), testbed_resource())
}
const STATUS_PATH: &str = "/apis/test.wasmop.dev/v1/namespaces/ns/testbeds/tb/status";

/// Plan `response` for the testbed parent with `observed` in the cache, and execute the plan against
/// the mock while `scenario` answers the requests.
async fn execute(
    response: Response,
    observed: &[Value],
    scenario: impl AsyncFnOnce(&mut ApiServer),
) -> (Plan, Result<Written, ActionError>, ApiServer) {
    execute_for(testbed_manifest(), Grants::default(), response, observed, scenario).await
}

/// [`execute`] for the plugin of `manifest` with `grants`.
async fn execute_for(
    manifest: Manifest,
    grants: Grants,
    response: Response,
    observed: &[Value],
    scenario: impl AsyncFnOnce(&mut ApiServer),
) -> (Plan, Result<Written, ActionError>, ApiServer) {
    let (client, mut server) = mock_client();
    let planning = Planning::testbed().manifest(manifest).grants(grants).observed(observed);
    let planned = planning.plan(response);
    let target = target(client);
    let writer = target.writer(planning.context(), AUDIT);
    let (written, ()) = tokio::join!(writer.execute(&planned), scenario(&mut server));
    (planned, written, server)
}

/// Answer the status patch with the parent at resourceVersion 8.
fn answer_status(call: Call) {
    assert_eq!((&call.method, call.path.as_str()), (&hyper::Method::PATCH, STATUS_PATH), "{call}");
    let mut patched = testbed_parent();
    patched["metadata"]["resourceVersion"] = json!("8");
    call.answer(patched);
}

fn api_code(err: &ActionError) -> u16 {
    match err {
        ActionError::Api { source: kube::Error::Api(status), .. } => status.code,
        other => panic!("not an API error: {other:?}"),
    }
}

#[tokio::test]
async fn a_child_is_server_side_applied_with_the_plugins_field_manager_and_the_parent_as_controller() {
    let response = Response { children: vec![returned_config_map("tb-out")], ..Default::default() };
    let (_, written, server) = execute(response, &[], async |server| {
        let call = server.next().await;
        assert_eq!(call.method, hyper::Method::PATCH);
        assert_eq!(call.path, "/api/v1/namespaces/ns/configmaps/tb-out");
        assert_eq!(call.content_type, "application/apply-patch+yaml");
        assert_eq!(call.query("fieldManager"), Some("wasmop/testbed"));
        assert_eq!(call.query("force"), Some("true"));
        assert_eq!(call.query("dryRun"), None);
        let body = &call.body;
        assert_eq!(body["metadata"]["namespace"], "ns");
        assert_eq!(
            body["metadata"]["labels"],
            json!({"app": "tb", "app.kubernetes.io/managed-by": "wasmop", "wasmop.dev/plugin": "testbed"}),
            "the plugin's labels and the host's"
        );
        assert_eq!(body["data"], json!({"k": "v"}));
        assert_eq!(
            body["metadata"]["ownerReferences"],
            json!([{"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed", "name": "tb", "uid": "u-tb",
                "controller": true, "blockOwnerDeletion": true}])
        );
        call.echo("1");
        answer_status(server.next().await);
    })
    .await;
    let written = written.expect("written");
    assert_eq!((written.applied, written.deleted, written.status), (1, 0, true));
    assert!(server.requests().iter().any(|r| r == "GET /api/v1"), "the child's kind is resolved by discovery");
}

#[tokio::test]
async fn an_unchanged_child_is_not_applied_again_and_a_changed_one_is() {
    let (client, mut server) = mock_client();
    let planning = Planning::testbed();
    let mut observed = returned_config_map("tb-out");
    observed["metadata"]["namespace"] = json!("ns");
    observed["metadata"]["ownerReferences"] = json!([owner_reference(&planning.manifest, &planning.parent, "u-tb")]);
    // As the host left it: with the labels it stamps on every child.
    observed["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("wasmop");
    observed["metadata"]["labels"]["wasmop.dev/plugin"] = json!("testbed");
    let planning = planning.observed(&[observed]);
    let target = target(client);
    let writer = target.writer(planning.context(), AUDIT);
    let planned = |child: Value| {
        let response = Response { children: vec![child], ..Default::default() };
        let mut p = planning.plan(response);
        p.status_patch = None;
        p
    };
    let mut fewer = returned_config_map("tb-out");
    fewer["data"] = json!({});
    // First apply, the same content again (skipped), content the observed object still
    // contains but the plugin no longer sends (applied: the field must go).
    for (desired, expect_apply) in [(returned_config_map("tb-out"), true), (returned_config_map("tb-out"), false), (fewer, true)]
    {
        let plan = planned(desired);
        let (written, ()) = tokio::join!(writer.execute(&plan), async {
            match server.next_within(std::time::Duration::from_millis(100)).await {
                Some(call) => {
                    assert!(expect_apply, "an unchanged child is not applied again: {call}");
                    call.echo("2");
                }
                None => assert!(!expect_apply, "a changed child is applied"),
            }
        });
        let written = written.expect("written");
        assert_eq!((written.applied, written.unchanged), if expect_apply { (1, 0) } else { (0, 1) });
    }
}

#[tokio::test]
async fn a_granted_cluster_scoped_child_is_applied_without_namespace_and_names_its_parent_by_label() {
    let role = Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole");
    let manifest = Manifest { children: vec![config_map_kind(), role.clone()], ..testbed_manifest() };
    let grants = Grants { cluster_scoped_children: [role.clone()].into(), escalation_kinds: [role].into(), ..Grants::default() };
    let child = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "tb-role", "labels": {PARENT_UID_LABEL: "forged", "app": "tb"}}, "rules": []});
    let response = Response { children: vec![child], ..Default::default() };
    let (_, written, _) = execute_for(manifest, grants, response, &[], async |server| {
        let call = server.next().await;
        assert_eq!(call.path, "/apis/rbac.authorization.k8s.io/v1/clusterroles/tb-role");
        assert_eq!(call.query("fieldManager"), Some("wasmop/testbed"));
        let meta = &call.body["metadata"];
        assert_eq!(
            meta["labels"],
            json!({PARENT_UID_LABEL: "u-tb", "app": "tb", "app.kubernetes.io/managed-by": "wasmop", "wasmop.dev/plugin": "testbed"}),
            "the host's labels, not the plugin's"
        );
        assert_eq!(meta["annotations"][PARENT_ANNOTATION], "test.wasmop.dev/v1/Testbed ns/tb");
        assert_eq!(meta["ownerReferences"], json!([]), "a namespaced owner cannot own a cluster-scoped object");
        assert!(meta.get("namespace").is_none(), "{meta}");
        call.echo("1");
        answer_status(server.next().await);
    })
    .await;
    assert_eq!(written.expect("written").applied, 1);
}

#[tokio::test]
async fn the_status_is_a_merge_patch_of_the_subresource_by_the_plugins_field_manager_with_conditions_at_the_observed_generation()
{
    let ready = Condition { type_: "Ready".into(), status: ConditionStatus::True, reason: "Up".into(), message: "up".into() };
    let response = Response { status: Some(json!({"phase": "Ready"})), conditions: vec![ready], ..Default::default() };
    let (_, written, _) = execute(response, &[], async |server| {
        let call = server.next().await;
        assert_eq!(call.path, STATUS_PATH, "the status subresource, never the object");
        assert_eq!(call.content_type, "application/merge-patch+json");
        assert_eq!(call.query("fieldManager"), Some("wasmop/testbed"), "the plugin's field manager");
        let status = &call.body["status"];
        assert_eq!(status["phase"], "Ready");
        let conditions: Vec<(&str, &str, i64, &str)> = status["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .map(|c| {
                let s = |f: &str| c[f].as_str().unwrap_or_default();
                (s("type"), s("status"), c["observedGeneration"].as_i64().unwrap_or_default(), s("lastTransitionTime"))
            })
            .collect();
        assert_eq!(conditions, [("Ready", "True", 3, NOW), ("Reconciled", "True", 3, NOW)]);
        assert_eq!(call.body.as_object().map(|o| o.len()), Some(1), "only the status is patched: {}", call.body);
        answer_status(call);
    })
    .await;
    let written = written.expect("written");
    assert_eq!(written.parent_resource_version.as_deref(), Some("8"), "the finalizer's removal must name it");
}

#[tokio::test]
async fn prune_deletes_only_the_parents_absent_children_each_on_its_uid() {
    let observed = [
        stored_config_map("tb-out", Some("u-tb")),
        stored_config_map("tb-stale", Some("u-tb")),
        stored_config_map("theirs", Some("u-other")),
        stored_config_map("users", None),
    ];
    let response = Response { children: vec![returned_config_map("tb-out")], ..Default::default() };
    let (planned, written, server) = execute(response, &observed, async |server| {
        server.next().await.echo("1");
        let call = server.next().await;
        assert_eq!((&call.method, call.path.as_str()), (&hyper::Method::DELETE, "/api/v1/namespaces/ns/configmaps/tb-stale"));
        assert_eq!(call.body["preconditions"], json!({"uid": "uid-tb-stale"}));
        assert_eq!(call.body["propagationPolicy"], "Background");
        call.answer(stored_config_map("tb-stale", Some("u-tb")));
        answer_status(server.next().await);
    })
    .await;
    assert_eq!(planned.prune.len(), 1);
    assert_eq!(written.expect("written").deleted, 1);
    let deletes: Vec<&String> = server.requests().iter().filter(|r| r.starts_with("DELETE")).collect();
    assert_eq!(deletes.len(), 1, "{deletes:?}");
}

#[tokio::test]
async fn a_delete_of_an_object_gone_or_replaced_since_is_skipped_and_a_server_error_fails() {
    let observed = [
        stored_config_map("gone", Some("u-tb")),
        stored_config_map("replaced", Some("u-tb")),
        stored_config_map("broken", Some("u-tb")),
    ];
    let delete = ["gone", "replaced", "broken"].map(|n| ObjectRef::namespaced(&config_map_kind(), "ns", n)).to_vec();
    let response = Response { delete, ..Default::default() };
    let (_, written, mut server) = execute(response, &observed, async |server| {
        for (name, code, reason) in [("gone", 404, "NotFound"), ("replaced", 409, "Conflict"), ("broken", 500, "InternalError")] {
            let call = server.next().await;
            assert_eq!(call.path, format!("/api/v1/namespaces/ns/configmaps/{name}"));
            assert_eq!(call.body["preconditions"]["uid"], format!("uid-{name}"));
            call.fail(code, reason);
        }
    })
    .await;
    let err = written.expect_err("a 500 fails the write");
    assert!(matches!(err, ActionError::Api { action: "delete", .. }), "{err}");
    assert_eq!(api_code(&err), 500);
    assert!(err.to_string().contains("broken"), "{err}");
    assert!(server.next_within(std::time::Duration::from_millis(100)).await.is_none(), "no write after the failed one");
}

#[tokio::test]
async fn api_errors_of_an_apply_keep_their_code_and_stop_the_writes() {
    for (code, reason) in [(409, "Conflict"), (403, "Forbidden"), (500, "InternalError")] {
        let response = Response {
            children: vec![returned_config_map("tb-out")],
            status: Some(json!({"phase": "Ready"})),
            ..Default::default()
        };
        let (_, written, mut server) = execute(response, &[], async |server| {
            let call = server.next().await;
            assert_eq!(call.body["metadata"]["resourceVersion"], "1", "the new child is applied only if absent");
            if code == 409 {
                // The create-only apply's conflict says the child exists: it is read (gone again
                // by then: 404) and applied as any other, and that apply's error is the answer.
                call.fail(409, "Conflict");
                let call = server.next().await;
                assert!(call.body["metadata"].get("resourceVersion").is_none(), "{}", call.body);
                call.fail(code, reason);
            } else {
                call.fail(code, reason);
            }
        })
        .await;
        let err = written.expect_err("the apply failed");
        assert!(matches!(err, ActionError::Api { action: "apply", .. }), "{err}");
        assert_eq!(api_code(&err), code);
        assert!(server.next_within(std::time::Duration::from_millis(100)).await.is_none(), "{code}: no status patch after it");
    }
}

#[tokio::test]
async fn a_refused_status_patch_is_an_error() {
    let response = Response { status: Some(json!({"phase": "Ready"})), ..Default::default() };
    let (_, written, _) = execute(response, &[], async |server| server.next().await.fail(403, "Forbidden")).await;
    let err = written.expect_err("the status patch failed");
    assert!(matches!(err, ActionError::Api { action: "patch status of", .. }), "{err}");
    assert_eq!(api_code(&err), 403);
}

#[tokio::test]
async fn a_new_child_is_created_by_one_apply_naming_a_version_no_object_has() {
    let response = Response { children: vec![returned_config_map("tb-out")], ..Default::default() };
    let (_, written, server) = execute(response, &[], async |server| {
        let call = server.next().await;
        assert_eq!((&call.method, call.path.as_str()), (&hyper::Method::PATCH, "/api/v1/namespaces/ns/configmaps/tb-out"));
        assert_eq!(call.content_type, "application/apply-patch+yaml");
        assert_eq!(call.body["metadata"]["resourceVersion"], "1");
        call.echo("2");
        answer_status(server.next().await);
    })
    .await;
    assert_eq!(written.expect("written").applied, 1);
    assert!(!server.requests().iter().any(|r| r.starts_with("GET /api/v1/namespaces/ns/configmaps")), "{:?}", server.requests());
}

#[tokio::test]
async fn an_existing_child_the_cache_does_not_hold_is_read_after_the_conflict_and_refused() {
    let response = Response { children: vec![returned_config_map("tb-out")], ..Default::default() };
    let (client, mut server) = mock_client();
    // A user's ConfigMap of that name, which nobody controls (not in the host's cache).
    server.add(stored_config_map("tb-out", None));
    let planning = Planning::testbed();
    let planned = planning.plan(response);
    let target = target(client);
    let writer = target.writer(planning.context(), AUDIT);
    let (written, ()) = tokio::join!(writer.execute(&planned), async {
        let call = server.next().await;
        assert_eq!(call.body["metadata"]["resourceVersion"], "1");
        call.fail(409, "Conflict");
        // The mock answers the read meanwhile; nothing else is written.
        assert!(server.next_within(std::time::Duration::from_millis(300)).await.is_none(), "nothing else is written");
    });
    let err = written.expect_err("the user's ConfigMap is not taken");
    assert!(matches!(err, ActionError::Refused(_)), "{err}");
    assert!(server.requests().iter().any(|r| r == "GET /api/v1/namespaces/ns/configmaps/tb-out"), "{:?}", server.requests());
}

#[tokio::test]
async fn a_kind_whose_create_only_apply_is_refused_is_read_first_from_then_on() {
    let (client, mut server) = mock_client();
    let planning = Planning::testbed();
    let target = target(client);
    let writer = target.writer(planning.context(), AUDIT);
    let planned = |name: &str| {
        let response = Response { children: vec![returned_config_map(name)], ..Default::default() };
        let mut p = planning.plan(response);
        p.status_patch = None;
        p
    };
    // The first new ConfigMap: the server refuses the version on a create; the child is read
    // (absent) and applied as before.
    let one = planned("one");
    let (written, ()) = tokio::join!(writer.execute(&one), async {
        let call = server.next().await;
        assert_eq!(call.body["metadata"]["resourceVersion"], "1");
        call.fail(500, "resourceVersion should not be set on objects to be created");
        let call = server.next().await;
        assert!(call.body["metadata"].get("resourceVersion").is_none(), "{}", call.body);
        call.echo("2");
    });
    assert_eq!(written.expect("written").applied, 1);
    assert!(server.requests().iter().any(|r| r == "GET /api/v1/namespaces/ns/configmaps/one"), "{:?}", server.requests());
    // The next one of the kind is read first, without trying again.
    let two = planned("two");
    let (written, ()) = tokio::join!(writer.execute(&two), async {
        let call = server.next().await;
        assert!(call.body["metadata"].get("resourceVersion").is_none(), "{}", call.body);
        call.echo("3");
    });
    assert_eq!(written.expect("written").applied, 1);
    assert!(server.requests().iter().any(|r| r == "GET /api/v1/namespaces/ns/configmaps/two"), "{:?}", server.requests());
}
