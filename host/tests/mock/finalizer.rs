//! The plugin's finalizer on parents against the mock API server: an optimistic merge patch of
//! `metadata.finalizers` that names the parent's `resourceVersion`, written as the plugin's field
//! manager.

use kube::api::{Api, DynamicObject};
use serde_json::json;
use wasmop::actions::{add_finalizer, remove_finalizer};

use super::server::mock_client;
use wasmop_e2e::plans::{testbed_parent, testbed_resource};

const FINALIZER: &str = "wasmop.dev/testbed";
const MANAGER: &str = "wasmop/testbed";
const PARENT_PATH: &str = "/apis/test.wasmop.dev/v1/namespaces/ns/testbeds/tb";

fn api(client: kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(client, "ns", &testbed_resource())
}

#[tokio::test]
async fn adding_the_finalizer_keeps_the_others_names_the_resource_version_and_the_plugins_field_manager() {
    let (client, mut server) = mock_client();
    let mut tb = testbed_parent();
    tb["metadata"]["finalizers"] = json!(["someone.else/keep"]);
    let api = api(client);
    let (added, ()) = tokio::join!(add_finalizer(&api, &tb, FINALIZER, MANAGER), async {
        let call = server.next().await;
        assert_eq!((&call.method, call.path.as_str()), (&hyper::Method::PATCH, PARENT_PATH), "the object, not its status");
        assert_eq!(call.content_type, "application/merge-patch+json");
        assert_eq!(call.query("fieldManager"), Some(MANAGER), "the plugin's field manager");
        assert_eq!(call.body, json!({"metadata": {"finalizers": ["someone.else/keep", FINALIZER], "resourceVersion": "7"}}));
        call.echo("8");
    });
    added.expect("added");
}

#[tokio::test]
async fn removing_the_finalizer_keeps_the_others_and_names_the_resource_version() {
    let (client, mut server) = mock_client();
    let mut tb = testbed_parent();
    tb["metadata"]["finalizers"] = json!([FINALIZER, "someone.else/keep"]);
    tb["metadata"]["resourceVersion"] = json!("9");
    let api = api(client);
    let (removed, ()) = tokio::join!(remove_finalizer(&api, &tb, FINALIZER, MANAGER), async {
        let call = server.next().await;
        assert_eq!(call.path, PARENT_PATH);
        assert_eq!(call.query("fieldManager"), Some(MANAGER));
        assert_eq!(call.body, json!({"metadata": {"finalizers": ["someone.else/keep"], "resourceVersion": "9"}}));
        call.echo("10");
    });
    removed.expect("removed");
}

#[tokio::test]
async fn a_conflict_fails_the_finalizer_write_and_a_parent_already_gone_does_not() {
    let (client, mut server) = mock_client();
    let api = api(client);
    let tb = testbed_parent();
    let (added, ()) =
        tokio::join!(add_finalizer(&api, &tb, FINALIZER, MANAGER), async { server.next().await.fail(409, "Conflict") });
    assert!(matches!(added, Err(kube::Error::Api(s)) if s.code == 409), "a changed parent is retried, not overwritten");
    let mut tb = tb;
    tb["metadata"]["finalizers"] = json!([FINALIZER]);
    let (removed, ()) =
        tokio::join!(remove_finalizer(&api, &tb, FINALIZER, MANAGER), async { server.next().await.fail(404, "NotFound") });
    removed.expect("a parent already gone needs no finalizer removed");
}
