//! `wasmop new --lang python`: a componentize-py project. The logic is plain Python in
//! `reconcile.py` (unit-tested by `python3 -m unittest` without any wasmop module), `app.py` is
//! the component's entry that turns the contract's records into dicts and back, and `build.sh`
//! holds the build command. Templates: `templates/python/`.

use std::fmt::Write as _;

use super::{NewArgs, common_values, render, wit_files};
use crate::contract::Kind;

const RECONCILE_PY: &str = include_str!("../templates/python/reconcile.py");
const APP_PY: &str = include_str!("../templates/python/app.py");
const TEST_PY: &str = include_str!("../templates/python/test_reconcile.py");
const BUILD_SH: &str = include_str!("../templates/python/build.sh");
const README: &str = include_str!("../templates/python/README.md");
/// The SDK's checks in plain Python, tested against the vectors the Rust SDK is tested against.
const SDK_PY: &str = include_str!("../../../../guest-sdk/python/wasmop_sdk.py");

/// The project's own files (the CRD and the sample are added by the caller).
pub(super) fn files(args: &NewArgs) -> Vec<(String, String)> {
    let mut children = String::new();
    for child in &args.children {
        let _ = writeln!(children, "    {},", dict(child));
    }
    let parent = dict(&args.parent);
    let mut values: Vec<(&str, &str)> = Vec::new();
    let admission = admission_values(args);
    values.extend(admission.iter().map(|(k, v)| (*k, v.as_str())));
    let common = common_values(args);
    values.extend(common.iter().map(|(k, v)| (*k, v.as_str())));
    values.extend([("parent", parent.as_str()), ("children", children.as_str())]);
    let mut files = vec![
        ("reconcile.py".to_owned(), render(RECONCILE_PY, &values)),
        ("app.py".to_owned(), render(APP_PY, &values)),
        ("test_reconcile.py".to_owned(), render(TEST_PY, &values)),
        ("build.sh".to_owned(), render(BUILD_SH, &values)),
        ("README.md".to_owned(), render(README, &values)),
        ("wasmop_sdk.py".to_owned(), SDK_PY.to_owned()),
        (".gitignore".to_owned(), "*.wasm\n__pycache__/\n".to_owned()),
    ];
    files.extend(wit_files());
    files
}

/// The commands to run in the new project, one a line.
pub(super) fn next_steps(args: &NewArgs) -> Vec<String> {
    let wasm = format!("{}.wasm", args.name);
    let mut steps = vec![
        "python3 -m unittest".into(),
        "sh build.sh                   # componentize-py 0.25 on PATH: see README.md".into(),
        format!("wasmop reconcile --plugin {wasm} --object sample.yaml{}", super::crds_flag(args)),
    ];
    steps.extend(super::admit_steps(args, &wasm));
    steps
}

/// The values of the admission placeholders: world `operator` and the webhooks' code when the
/// plugin has webhooks, world `controller` and nothing else when it has none. Rendered first,
/// so the snippets' own placeholders (`{{Kind}}`) are filled after.
fn admission_values(args: &NewArgs) -> Vec<(&'static str, String)> {
    if args.webhooks.is_empty() {
        let none = ["webhook_list", "webhook_functions", "webhook_tests", "admission_import", "admission_export"];
        let mut values: Vec<(&str, String)> = none.into_iter().map(|k| (k, String::new())).collect();
        values.extend([("world", "controller".to_owned()), ("manifest_webhooks", "[]".to_owned())]);
        return values;
    }
    let mut list = String::from(
        "\n# The admission webhooks, each on the parent's CREATE and UPDATE (app.py declares them).\nWEBHOOKS = [\n",
    );
    let (mut functions, mut dispatch, mut tests) = (String::new(), String::new(), String::from(ADMISSION_TEST_PY));
    for webhook in &args.webhooks {
        let type_ = if webhook.is_mutating() { "mutating" } else { "validating" };
        let _ = writeln!(list, "    {{\"name\": \"{}\", \"type\": \"{type_}\"}},", webhook.name);
        let (function, test) =
            if webhook.is_mutating() { (MUTATING_PY, MUTATING_TEST_PY) } else { (VALIDATING_PY, VALIDATING_TEST_PY) };
        let fill = |t: &str| t.replace("{webhook}", &webhook.name).replace("{ident}", &webhook.ident());
        functions.push_str(&fill(function));
        tests.push_str(&fill(test));
        let _ = writeln!(dispatch, "    \"{}\": admit_{},", webhook.name, webhook.ident());
    }
    list.push_str("]\n");
    functions.push_str(&format!("\n\n# Each webhook's function, by name.\nADMIT = {{\n{dispatch}}}\n"));
    vec![
        ("world", "operator".to_owned()),
        ("webhook_list", list),
        ("webhook_functions", functions),
        ("webhook_tests", tests),
        ("admission_import", "from wit_world.exports import admission as a\n".to_owned()),
        ("admission_export", ADMISSION_APP_PY.to_owned()),
        ("manifest_webhooks", "[webhook(declared) for declared in logic.WEBHOOKS]".to_owned()),
    ]
}

const VALIDATING_PY: &str = r#"

def admit_{ident}(obj):
    """The `{webhook}` webhook (validating, on {{Kind}} CREATE and UPDATE): a {{Kind}} with an
    empty `spec.message` is refused. Replace this check with your own.

    Returns the verdict: {"allowed": True}, or {"allowed": False, "code": ..., "message": ...}.
    """
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict) or not spec.get("message"):
        return {"allowed": False, "code": 422, "message": "spec.message must not be empty"}
    return {"allowed": True}
"#;

const MUTATING_PY: &str = r#"

def admit_{ident}(obj):
    """The `{webhook}` webhook (mutating, on {{Kind}} CREATE and UPDATE): a {{Kind}} without
    `spec.message` gets `hello`. Replace this default with your own; the host computes the JSON
    Patch from the object returned.

    Returns the verdict: {"allowed": True}, or {"allowed": True, "mutated": the new object}.
    """
    spec = obj.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict) or "message" in spec:
        return {"allowed": True}
    return {"allowed": True, "mutated": dict(obj, spec=dict(spec, message="hello"))}
"#;

const ADMISSION_TEST_PY: &str = r#"

def admission_object(spec):
    return {"apiVersion": "{{api_version}}", "kind": "{{Kind}}", "metadata": {"name": "sample", "namespace": "default"}, "spec": spec}


class AdmissionTest(unittest.TestCase):
    def test_every_webhook_has_its_function(self):
        self.assertEqual(sorted(w["name"] for w in logic.WEBHOOKS), sorted(logic.ADMIT))
"#;

const VALIDATING_TEST_PY: &str = r#"
    def test_webhook_{ident}_refuses_an_empty_message(self):
        self.assertEqual(logic.ADMIT["{webhook}"](admission_object({"message": "hi"})), {"allowed": True})
        verdict = logic.ADMIT["{webhook}"](admission_object({}))
        self.assertEqual((verdict["allowed"], verdict["message"]), (False, "spec.message must not be empty"))
"#;

const MUTATING_TEST_PY: &str = r#"
    def test_webhook_{ident}_sets_an_absent_message(self):
        verdict = logic.ADMIT["{webhook}"](admission_object({}))
        self.assertEqual(verdict["mutated"]["spec"], {"message": "hello"})
        self.assertEqual(logic.ADMIT["{webhook}"](admission_object({"message": "hi"})), {"allowed": True})
"#;

const ADMISSION_APP_PY: &str = r#"

def webhook(declared):
    """A webhook of `logic.WEBHOOKS` as the contract declares it: on the parent's CREATE and
    UPDATE, failing closed."""
    return p.Webhook(
        name=declared["name"],
        type=p.WebhookType.MUTATING if declared["type"] == "mutating" else p.WebhookType.VALIDATING,
        rules=[
            p.Rule(
                operations=[types.Operation.CREATE, types.Operation.UPDATE],
                api_groups=[logic.PARENT["group"]],
                api_versions=[logic.PARENT["version"]],
                resources=["{{plural}}"],
                scope=p.RuleScope.ALL,
            )
        ],
        namespace_selector="",
        object_selector="",
        failure_policy=p.FailurePolicy.FAIL,
        side_effects=p.SideEffects.NONE,
        timeout_seconds=5,
        # CEL expressions the API server checks before it calls the webhook, e.g.
        # p.MatchCondition(name="has-spec", expression="has(object.spec)"): empty, every request of the rules.
        match_conditions=[],
    )


class Admission(exports.Admission):
    def admit(self, webhook, request):
        answer = logic.ADMIT.get(webhook)
        if answer is None:
            raise Err(a.AdmissionError_UnknownWebhook(webhook))
        if request.object is None:
            raise Err(a.AdmissionError_Failed(f"webhook {webhook}: the request has no object"))
        verdict = answer(json.loads(request.object))
        if verdict["allowed"]:
            mutated = verdict.get("mutated")
            return a.Verdict_Allowed(a.Allowed(warnings=[], mutated=None if mutated is None else json.dumps(mutated)))
        return a.Verdict_Denied(a.Denied(code=verdict["code"], message=verdict["message"], warnings=[]))
"#;

/// A kind as a Python dict literal. Kinds hold only letters, digits, `.` and `-` (checked when
/// parsed), so no character needs escaping.
fn dict(kind: &Kind) -> String {
    format!(r#"{{"group": "{}", "version": "{}", "kind": "{}"}}"#, kind.group, kind.version, kind.kind)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{args, file, paths};
    use super::super::{Lang, generate};

    #[test]
    fn the_project_declares_parent_and_children_in_plain_python() {
        let files =
            generate(&args("my-db", "example.com/v1/Database", &["v1/ConfigMap", "apps/v1/Deployment"], Lang::Python)).unwrap();
        let own: Vec<&str> = paths(&files).into_iter().filter(|p| !p.starts_with("wit/")).collect();
        assert_eq!(
            own,
            [
                ".gitignore",
                "README.md",
                "app.py",
                "build.sh",
                "crd.yaml",
                "reconcile.py",
                "sample.yaml",
                "test_reconcile.py",
                "wasmop_sdk.py"
            ]
        );
        let logic = file(&files, "reconcile.py");
        assert!(logic.contains("NAME = \"my-db\"\n"), "{logic}");
        assert!(logic.contains(r#"PARENT = {"group": "example.com", "version": "v1", "kind": "Database"}"#), "{logic}");
        let children = "CHILDREN = [\n    {\"group\": \"\", \"version\": \"v1\", \"kind\": \"ConfigMap\"},\n    \
                        {\"group\": \"apps\", \"version\": \"v1\", \"kind\": \"Deployment\"},\n]\n";
        assert!(logic.contains(children), "{logic}");
        assert!(
            !logic.contains("import wit_world") && !logic.contains("from wit_world"),
            "the logic is testable without the bindings"
        );
        let test = file(&files, "test_reconcile.py");
        assert!(test.contains(r#""apiVersion": "example.com/v1","#) && test.contains(r#""kind": "Database","#), "{test}");
        let build = file(&files, "build.sh");
        assert!(build.contains("\ncomponentize-py -d wit -w controller componentize app -p . -o \"$out\"\n"), "{build}");
        // Beside build.sh by default, else where its argument says (relative to the caller).
        assert!(build.contains(r#""") out="$(cd "$(dirname "$0")" && pwd)/my-db.wasm" ;;"#), "{build}");
        assert!(build.contains(r#"*) out="$PWD/$1" ;;"#), "{build}");
    }

    #[test]
    fn no_children_is_an_empty_list() {
        let files = generate(&args("x", "example.com/v1/X", &[], Lang::Python)).unwrap();
        assert!(file(&files, "reconcile.py").contains("CHILDREN = [\n]\n"));
    }
}
