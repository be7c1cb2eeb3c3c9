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

/// The project's own files (the CRD and the sample are added by the caller).
pub(super) fn files(args: &NewArgs) -> Vec<(String, String)> {
    let mut children = String::new();
    for child in &args.children {
        let _ = writeln!(children, "  {},", object(child));
    }
    let parent = object(&args.parent);
    let mut values: Vec<(&str, &str)> = Vec::new();
    let common = common_values(args);
    values.extend(common.iter().map(|(k, v)| (*k, v.as_str())));
    values.extend([("parent", parent.as_str()), ("children", children.as_str())]);
    let mut files = vec![
        (format!("{}.js", args.name), render(PLUGIN_JS, &values)),
        (format!("{}.test.js", args.name), render(TEST_JS, &values)),
        ("package.json".to_owned(), render(PACKAGE_JSON, &values)),
        ("README.md".to_owned(), render(README, &values)),
        (".gitignore".to_owned(), "*.wasm\nnode_modules/\n".to_owned()),
    ];
    files.extend(wit_files());
    files
}

/// The commands to run in the new project, one a line.
pub(super) fn next_steps(args: &NewArgs) -> Vec<String> {
    vec![
        "npm install                   # componentize-js 0.23, once".into(),
        "npm test".into(),
        "npm run build".into(),
        format!("wasmop reconcile --plugin {}.wasm --object sample.yaml", args.name),
    ]
}

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
        assert_eq!(own, [".gitignore", "README.md", "crd.yaml", "my-db.js", "my-db.test.js", "package.json", "sample.yaml"]);
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
        assert_eq!(package["scripts"]["build"], "componentize-js --wit wit --world-name controller -o my-db.wasm my-db.js");
        assert_eq!(package["scripts"]["test"], "node --test");
        assert_eq!(package["devDependencies"]["@bytecodealliance/componentize-js"], "0.23.0");
    }
}
