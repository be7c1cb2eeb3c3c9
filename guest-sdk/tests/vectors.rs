//! The SDK against the shared test vectors (`vectors/sdk.json`), which the Python module
//! (`python/`) and the JavaScript module (`js/`) are tested against too, so that the three give
//! the same answers and the same messages. The condition merge (`observedGeneration`,
//! `lastTransitionTime`) is the host's: its vectors are checked in `host/src/actions/status.rs`.

use serde_json::Value;
use wasmop_sdk::{Condition, Context, Error, Kind, LabelSelector, Manifest, Quantity, Response, Scope};

fn vectors() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors/sdk.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("the vectors are JSON")
}

fn cases<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    let cases = value.pointer(pointer).and_then(Value::as_array).unwrap_or_else(|| panic!("no {pointer} in the vectors"));
    assert!(!cases.is_empty(), "{pointer} has no case");
    cases
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_else(|| panic!("{value} is not a string"))
}

fn kind(value: &Value) -> Kind {
    Kind::new(text(&value["group"]), text(&value["version"]), text(&value["kind"]))
}

fn condition(value: &Value) -> Condition {
    serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{value}: {e}"))
}

#[test]
fn quantities_parse_to_exact_nanos_and_round_up_to_units_and_millis() {
    let vectors = vectors();
    for case in cases(&vectors, "/quantity/parse") {
        let q = Quantity::parse(text(&case["text"])).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(q.nanos().to_string(), text(&case["nanos"]), "{case}");
        assert_eq!(q.to_units_ceil(), case["units"].as_i64(), "{case}");
        assert_eq!(q.to_millis_ceil(), case["millis"].as_i64(), "{case}");
        assert_eq!(q.to_string(), text(&case["text"]), "a quantity shows as written");
    }
}

#[test]
fn malformed_and_huge_quantities_are_refused_naming_the_text() {
    let vectors = vectors();
    for case in cases(&vectors, "/quantity/errors") {
        let error = Quantity::parse(text(&case["text"])).expect_err(text(&case["text"]));
        assert_eq!(error.to_string(), text(&case["error"]), "{case}");
    }
}

#[test]
fn quantities_compare_by_value_whatever_the_suffix() {
    let vectors = vectors();
    for case in cases(&vectors, "/quantity/compare") {
        let (a, b) = (Quantity::parse(text(&case["a"])).unwrap(), Quantity::parse(text(&case["b"])).unwrap());
        assert_eq!(a.cmp(&b) as i64, case["order"].as_i64().unwrap(), "{case}");
    }
}

#[test]
fn json_holds_strings_or_numbers() {
    let vectors = vectors();
    for case in cases(&vectors, "/quantity/json") {
        let parsed = serde_json::from_value::<Quantity>(case["value"].clone());
        match case.get("error") {
            Some(error) => assert_eq!(parsed.unwrap_err().to_string(), text(error), "{case}"),
            None => assert_eq!(parsed.unwrap().to_string(), text(&case["text"]), "{case}"),
        }
    }
}

#[test]
fn selectors_match_labels_as_the_host_does() {
    let vectors = vectors();
    let labels = vectors.pointer("/selector/labels").and_then(Value::as_object);
    for case in cases(&vectors, "/selector/matches") {
        let selector = LabelSelector::parse(text(&case["selector"])).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(Value::Bool(selector.matches(labels)), case["matches"], "{case}");
    }
}

#[test]
fn bad_selectors_are_refused_naming_the_requirement() {
    let vectors = vectors();
    for case in cases(&vectors, "/selector/errors") {
        let error = LabelSelector::parse(text(&case["selector"])).expect_err(text(&case["selector"]));
        assert_eq!(error.to_string(), text(&case["error"]), "{case}");
    }
}

#[test]
fn a_later_condition_of_a_type_replaces_the_earlier_one() {
    let vectors = vectors();
    for case in cases(&vectors, "/conditions/set") {
        let response = cases(case, "/set").iter().fold(Response::new(), |r, c| r.condition(condition(c)));
        let expected: Vec<Condition> = cases(case, "/conditions").iter().map(condition).collect();
        assert_eq!(response.conditions(), expected, "{}", case["about"]);
    }
}

#[test]
fn children_of_the_wrong_shape_are_dropped_and_the_first_named() {
    let vectors = vectors();
    for case in cases(&vectors, "/response/children") {
        let response = cases(case, "/apply").iter().fold(Response::new(), |r, child| r.apply(child));
        let applied: Vec<&str> = response.children().iter().map(|c| text(&c["metadata"]["name"])).collect();
        assert_eq!(Value::from(applied), case["applied"], "{case}");
        assert_eq!(response.error().map(Error::message), case["error"].as_str(), "{case}");
        assert_eq!(
            response.validate().err().map(|e| (e.is_retryable(), e.message().to_owned())),
            case["error"].as_str().map(|m| (false, m.to_owned()))
        );
    }
}

#[test]
fn status_must_be_an_object_and_merges() {
    let vectors = vectors();
    for case in cases(&vectors, "/response/status") {
        let response = cases(case, "/status").iter().fold(Response::new(), |r, fields| r.status(fields));
        assert_eq!(response.status_patch().unwrap_or(&Value::Null), &case["patch"], "{case}");
        assert_eq!(response.error().map(Error::message), case["error"].as_str(), "{case}");
    }
}

#[test]
fn a_failure_carries_what_the_parent_shows() {
    let vectors = vectors();
    for case in vectors["failure"].as_array().expect("failure cases") {
        let message = text(&case["message"]);
        let error = if case["retryable"] == true { Error::retryable(message) } else { Error::terminal(message) };
        let error = cases(case, "/status").iter().fold(error, |e, fields| e.with_status(fields));
        let error = case["conditions"].as_array().unwrap().iter().fold(error, |e, c| e.with_condition(condition(c)));
        assert_eq!(Value::Bool(error.is_retryable()), case["retryable"], "{}", case["about"]);
        let shown = &case["shown"];
        assert_eq!(error.message(), text(&shown["message"]), "{}", case["about"]);
        assert_eq!(error.status_patch().unwrap_or(&Value::Null), &shown["status"], "{}", case["about"]);
        let conditions: Vec<Condition> = shown["conditions"].as_array().unwrap().iter().map(condition).collect();
        assert_eq!(error.conditions(), conditions, "{}", case["about"]);
    }
}

#[test]
fn lookups_answer_as_the_host_and_refuse_undeclared_kinds() {
    let vectors = vectors();
    let fixture = &vectors["fixture"];
    let declared = &fixture["manifest"];
    assert_eq!(declared["scope"], "namespaced");
    let manifest = cases(declared, "/related").iter().fold(
        cases(declared, "/children")
            .iter()
            .fold(Manifest::new("vectors", "0.1.0").parent(kind(&declared["parent"]), Scope::Namespaced), |m, k| {
                m.child(kind(k))
            }),
        |m, r| m.related(kind(&r["kind"]), text(&r["labelSelector"])),
    );
    let context = Context::fixture(cases(fixture, "/objects").to_vec()).restrict_to(&manifest);
    for case in cases(fixture, "/lookups") {
        let namespace = case["namespace"].as_str();
        let found = if case["op"] == "get" {
            context.get(&kind(&case["kind"]), namespace, text(&case["name"])).map(|o| o.into_iter().collect::<Vec<_>>())
        } else {
            context.list(&kind(&case["kind"]), namespace, text(&case["selector"]))
        };
        match case.get("error") {
            Some(error) => assert_eq!(found.unwrap_err().to_string(), text(error), "{}", case["about"]),
            None => {
                let names: Vec<String> = found
                    .unwrap_or_else(|e| panic!("{}: {e}", case["about"]))
                    .iter()
                    .map(|o| format!("{}/{}", text(&o["metadata"]["namespace"]), text(&o["metadata"]["name"])))
                    .collect();
                assert_eq!(Value::from(names), case["found"], "{}", case["about"]);
            }
        }
    }
}
