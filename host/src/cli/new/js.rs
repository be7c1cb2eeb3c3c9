//! `wasmop new --lang js`: a componentize-js project. `<name>.js` is the component: it exports
//! `plugin` and `reconciler` as plain objects and imports nothing from wasmop, so `node --test`
//! runs its tests as they are; `package.json` holds the build and test commands. Templates:
//! `templates/js/`.

use std::fmt::Write as _;

use super::{NewArgs, common_values, render, wit_files};
use crate::contract::Kind;

const PLUGIN_JS: &str = include_str!("../templates/js/plugin.js");
const TEST_JS: &str = include_str!("../templates/js/plugin.test.js");
const PACKAGE_JSON: &str = include_str!("../templates/js/package.json");
const README: &str = include_str!("../templates/js/README.md");
/// The SDK's checks in plain JavaScript, tested against the vectors the Rust SDK is tested
/// against.
const SDK_JS: &str = include_str!("../../../../guest-sdk/js/wasmop_sdk.js");

/// The project's own files (the CRD and the sample are added by the caller).
pub(super) fn files(args: &NewArgs) -> Vec<(String, String)> {
    let mut children = String::new();
    for child in &args.children {
        let _ = writeln!(children, "  {},", object(child));
    }
    let parent = object(&args.parent);
    let mut values: Vec<(&str, &str)> = Vec::new();
    let admission = admission_values(args);
    values.extend(admission.iter().map(|(k, v)| (*k, v.as_str())));
    let common = common_values(args);
    values.extend(common.iter().map(|(k, v)| (*k, v.as_str())));
    values.extend([("parent", parent.as_str()), ("children", children.as_str())]);
    let mut files = vec![
        (format!("{}.js", args.name), render(PLUGIN_JS, &values)),
        (format!("{}.test.js", args.name), render(TEST_JS, &values)),
        ("package.json".to_owned(), render(PACKAGE_JSON, &values)),
        ("README.md".to_owned(), render(README, &values)),
        ("wasmop_sdk.js".to_owned(), SDK_JS.to_owned()),
        (".gitignore".to_owned(), "*.wasm\nnode_modules/\n".to_owned()),
    ];
    files.extend(wit_files());
    files
}

/// The commands to run in the new project, one a line.
pub(super) fn next_steps(args: &NewArgs) -> Vec<String> {
    let wasm = format!("{}.wasm", args.name);
    let mut steps = vec![
        "npm install                   # componentize-js 0.23, once".into(),
        "npm test".into(),
        "npm run build".into(),
        format!("wasmop reconcile --plugin {wasm} --object sample.yaml{}", super::crds_flag(args)),
    ];
    steps.extend(super::admit_steps(args, &wasm));
    steps
}

/// The values of the admission placeholders: world `operator`, the webhooks' code and the
/// `admission` export when the plugin has webhooks; world `controller` and nothing else when
/// it has none. Rendered first, so the snippets' own placeholders (`{{Kind}}`) are filled after.
fn admission_values(args: &NewArgs) -> Vec<(&'static str, String)> {
    if args.webhooks.is_empty() {
        let none = ["webhook_list", "webhook_tests", "admission_export", "admission_test_import"];
        let mut values: Vec<(&str, String)> = none.into_iter().map(|k| (k, String::new())).collect();
        values.extend([("world", "controller".to_owned()), ("manifest_webhooks", "[]".to_owned())]);
        return values;
    }
    let mut list = String::from("\n// The admission webhooks, each on the parent's CREATE and UPDATE.\nconst WEBHOOKS = [\n");
    let (mut functions, mut dispatch, mut tests) = (String::new(), String::new(), String::from(ADMISSION_TEST_JS));
    for webhook in &args.webhooks {
        let type_ = if webhook.is_mutating() { "mutating" } else { "validating" };
        let _ = writeln!(list, "  {{ name: '{}', type: '{type_}' }},", webhook.name);
        let (function, test) =
            if webhook.is_mutating() { (MUTATING_JS, MUTATING_TEST_JS) } else { (VALIDATING_JS, VALIDATING_TEST_JS) };
        let ident = camel(&webhook.name);
        let fill = |t: &str| t.replace("{webhook}", &webhook.name).replace("{ident}", &ident);
        functions.push_str(&fill(function));
        tests.push_str(&fill(test));
        let _ = writeln!(dispatch, "  '{}': admit{ident},", webhook.name);
    }
    list.push_str("];\n");
    let export =
        format!("{functions}\n/** Each webhook's function, by name. */\nconst ADMIT = {{\n{dispatch}}};\n{ADMISSION_JS}");
    vec![
        ("world", "operator".to_owned()),
        ("webhook_list", list),
        ("webhook_tests", tests),
        ("admission_export", export),
        ("admission_test_import", "admission, ".to_owned()),
        ("manifest_webhooks", "WEBHOOKS.map(webhook)".to_owned()),
    ]
}

/// `set-defaults` as `SetDefaults`: the webhook's function is `admit<Ident>`.
fn camel(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect()
}

const VALIDATING_JS: &str = r#"
/** The `{webhook}` webhook (validating, on {{Kind}} CREATE and UPDATE): a {{Kind}} with an empty
 * `spec.message` is refused. Replace this check with your own. Returns `{ allowed: true }` or
 * `{ allowed: false, code, message }`. */
export function admit{ident}(object) {
  const message = object.spec?.message;
  if (typeof message !== 'string' || message === '') return { allowed: false, code: 422, message: 'spec.message must not be empty' };
  return { allowed: true };
}
"#;

const MUTATING_JS: &str = r#"
/** The `{webhook}` webhook (mutating, on {{Kind}} CREATE and UPDATE): a {{Kind}} without
 * `spec.message` gets `hello`. Replace this default with your own; the host computes the JSON
 * Patch from the object returned. Returns `{ allowed: true }` or `{ allowed: true, mutated }`. */
export function admit{ident}(object) {
  const spec = object.spec ?? {};
  if (typeof spec !== 'object' || Array.isArray(spec) || 'message' in spec) return { allowed: true };
  return { allowed: true, mutated: { ...object, spec: { ...spec, message: 'hello' } } };
}
"#;

const ADMISSION_JS: &str = r#"
/** A webhook of `WEBHOOKS` as the contract declares it: on the parent's CREATE and UPDATE,
 * failing closed. */
function webhook({ name, type }) {
  return {
    name,
    type,
    rules: [
      { operations: ['create', 'update'], apiGroups: [PARENT.group], apiVersions: [PARENT.version], resources: ['{{plural}}'], scope: 'all' },
    ],
    namespaceSelector: '',
    objectSelector: '',
    failurePolicy: 'fail',
    sideEffects: 'none',
    timeoutSeconds: 5,
    // CEL expressions the API server checks before it calls the webhook, e.g.
    // { name: 'has-spec', expression: 'has(object.spec)' }: empty, every request of the rules.
    matchConditions: [],
  };
}

/** An admission error the host reports (it denies the request with the message). */
export class AdmissionError extends Error {
  constructor(tag, message) {
    super(message);
    this.payload = { tag, val: message };
  }
}

export const admission = {
  /** Answer one admission request for `webhook`: `request.object` is JSON text. */
  admit(webhook, request) {
    const answer = ADMIT[webhook];
    if (answer === undefined) throw new AdmissionError('unknown-webhook', webhook);
    if (request.object === undefined) throw new AdmissionError('failed', `webhook ${webhook}: the request has no object`);
    const verdict = answer(JSON.parse(request.object));
    if (verdict.allowed) {
      const mutated = verdict.mutated === undefined ? undefined : JSON.stringify(verdict.mutated);
      return { tag: 'allowed', val: { warnings: [], mutated } };
    }
    return { tag: 'denied', val: { code: verdict.code, message: verdict.message, warnings: [] } };
  },
};
"#;

const ADMISSION_TEST_JS: &str = r#"
const admissionRequest = (spec) => ({
  object: JSON.stringify({ apiVersion: '{{api_version}}', kind: '{{Kind}}', metadata: { name: 'sample', namespace: 'default' }, spec }),
});

test('every webhook is declared on the parent', () => {
  for (const declared of plugin.manifest().webhooks) {
    assert.deepEqual(declared.rules[0].resources, ['{{plural}}']);
  }
});
"#;

const VALIDATING_TEST_JS: &str = r#"
test('webhook {webhook} refuses an empty message', () => {
  assert.deepEqual(admission.admit('{webhook}', admissionRequest({ message: 'hi' })), { tag: 'allowed', val: { warnings: [], mutated: undefined } });
  const verdict = admission.admit('{webhook}', admissionRequest({}));
  assert.deepEqual(verdict, { tag: 'denied', val: { code: 422, message: 'spec.message must not be empty', warnings: [] } });
});
"#;

const MUTATING_TEST_JS: &str = r#"
test('webhook {webhook} sets an absent message', () => {
  const verdict = admission.admit('{webhook}', admissionRequest({}));
  assert.equal(verdict.tag, 'allowed');
  assert.deepEqual(JSON.parse(verdict.val.mutated).spec, { message: 'hello' });
  assert.equal(admission.admit('{webhook}', admissionRequest({ message: 'hi' })).val.mutated, undefined);
});
"#;

/// A kind as a JavaScript object literal. Kinds hold only letters, digits, `.` and `-`
/// (checked when parsed), so no character needs escaping.
fn object(kind: &Kind) -> String {
    format!("{{ group: '{}', version: '{}', kind: '{}' }}", kind.group, kind.version, kind.kind)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::super::tests::{args, file, paths};
    use super::super::{Lang, generate};

    #[test]
    fn the_project_declares_parent_and_children_and_builds_with_npm() {
        let files =
            generate(&args("my-db", "example.com/v1/Database", &["v1/ConfigMap", "apps/v1/Deployment"], Lang::Js)).unwrap();
        let own: Vec<&str> = paths(&files).into_iter().filter(|p| !p.starts_with("wit/")).collect();
        assert_eq!(
            own,
            [".gitignore", "README.md", "crd.yaml", "my-db.js", "my-db.test.js", "package.json", "sample.yaml", "wasmop_sdk.js"]
        );
        let plugin = file(&files, "my-db.js");
        assert!(plugin.contains("const NAME = 'my-db';\n"), "{plugin}");
        assert!(plugin.contains("const PARENT = { group: 'example.com', version: 'v1', kind: 'Database' };\n"), "{plugin}");
        let children = "const CHILDREN = [\n  { group: '', version: 'v1', kind: 'ConfigMap' },\n  \
                        { group: 'apps', version: 'v1', kind: 'Deployment' },\n];\n";
        assert!(plugin.contains(children), "{plugin}");
        assert!(!plugin.contains("from 'wasmop:"), "node runs the file without the component's imports");
        let test = file(&files, "my-db.test.js");
        assert!(test.contains("from './my-db.js';") && test.contains("apiVersion: 'example.com/v1',"), "{test}");
        let package: Value = serde_json::from_str(&file(&files, "package.json")).unwrap();
        assert_eq!(package["name"], "my-db");
        assert_eq!(package["type"], "module", "the plugin and its test are ES modules");
        // `OUT=/abs/path.wasm npm run build` writes the component elsewhere (npm runs it with sh).
        assert_eq!(
            package["scripts"]["build"],
            r#"componentize-js --wit wit --world-name controller -o "${OUT:-my-db.wasm}" my-db.js"#
        );
        assert_eq!(package["scripts"]["test"], "node --test");
        assert_eq!(package["devDependencies"]["@bytecodealliance/componentize-js"], "0.23.0");
    }
}
