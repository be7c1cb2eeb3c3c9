//! `wasmop::yaml` (serde-saphyr, see the workspace `Cargo.toml`) on what the host reads and
//! writes: Kubernetes manifests in multi-document streams, YAML 1.2 scalars, large integers, and
//! output that YAML 1.1 readers (kubectl, helm) read back the same.

use serde_json::{Value, json};
use wasmop::yaml;

fn names(docs: &[Value]) -> Vec<&str> {
    docs.iter().map(|d| d["metadata"]["name"].as_str().unwrap()).collect()
}

#[test]
fn a_multi_document_stream_yields_every_object_and_skips_empty_documents() {
    let text = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\n# a comment only\n---\n\
                apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n...\n---\n{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"c\"}}\n";
    let docs: Vec<Value> = yaml::documents(text).into_iter().collect::<Result<_, _>>().unwrap();
    assert_eq!(names(&docs), ["a", "b", "c"]);
}

#[test]
fn a_broken_document_is_an_error_of_the_stream() {
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nmetadata: {name: [\n";
    let documents = yaml::documents::<Value>(text);
    assert_eq!(documents.len(), 2);
    assert_eq!(documents[0].as_ref().unwrap()["metadata"]["name"], "a");
    let error = documents[1].as_ref().unwrap_err().to_string();
    assert!(!error.contains('\n') && error.contains("line 5"), "one line naming where: {error}");
}

#[test]
fn yaml_1_1_booleans_are_strings_and_only_true_and_false_are_booleans() {
    let v: Value = yaml::from_str("data: {a: on, b: yes, c: no, d: off, e: y, f: n, g: true, h: false, i: 'true'}").unwrap();
    assert_eq!(
        v["data"],
        json!({"a": "on", "b": "yes", "c": "no", "d": "off", "e": "y", "f": "n", "g": true, "h": false, "i": "true"})
    );
}

#[test]
fn large_integers_are_exact() {
    let v: Value =
        yaml::from_str("a: 9007199254740993\nb: 18446744073709551615\nc: -9223372036854775808\nd: 3\ne: 0644").unwrap();
    assert_eq!(v["a"].as_u64(), Some(9_007_199_254_740_993), "2^53 + 1 is not rounded through a float");
    assert_eq!(v["b"].as_u64(), Some(u64::MAX));
    assert_eq!(v["c"].as_i64(), Some(i64::MIN));
    assert_eq!(v["d"], json!(3));
    assert_eq!(v["e"], json!("0644"), "a leading zero is neither octal nor dropped");
}

#[test]
fn strings_that_look_like_other_scalars_are_written_quoted_and_read_back_as_strings() {
    let tricky = json!({"a": "on", "b": "yes", "c": "0644", "d": "1.0", "e": "null", "f": "~", "g": "", "h": "true", "i": "1e3", "j": "- x", "k": "a: b"});
    let text = yaml::to_string(&tricky).unwrap();
    let back: Value = yaml::from_str(&text).unwrap();
    assert_eq!(back, tricky, "{text}");
    for line in text.lines() {
        let (_, value) = line.split_once(": ").unwrap_or((line, ""));
        assert!(value.starts_with(['"', '\'']), "a YAML 1.1 reader could take {value:?} for another type:\n{text}");
    }
}

#[test]
fn the_host_policy_reads_an_inline_configuration_as_yaml_1_2() {
    let policy = wasmop::policy::HostPolicy::from_yaml(
        "plugins:\n  memcached:\n    config: {replicas: 3, mode: on, big: 9007199254740993}\n",
    )
    .unwrap();
    assert_eq!(
        policy.for_plugin("memcached").config,
        wasmop::policy::ConfigSource::Inline(json!({"replicas": 3, "mode": "on", "big": 9_007_199_254_740_993_u64}))
    );
}
