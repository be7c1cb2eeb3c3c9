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

/// The project's own files (the CRD and the sample are added by the caller).
pub(super) fn files(args: &NewArgs) -> Vec<(String, String)> {
    let mut children = String::new();
    for child in &args.children {
        let _ = writeln!(children, "    {},", dict(child));
    }
    let parent = dict(&args.parent);
    let mut values: Vec<(&str, &str)> = Vec::new();
    let common = common_values(args);
    values.extend(common.iter().map(|(k, v)| (*k, v.as_str())));
    values.extend([("parent", parent.as_str()), ("children", children.as_str())]);
    let mut files = vec![
        ("reconcile.py".to_owned(), render(RECONCILE_PY, &values)),
        ("app.py".to_owned(), render(APP_PY, &values)),
        ("test_reconcile.py".to_owned(), render(TEST_PY, &values)),
        ("build.sh".to_owned(), render(BUILD_SH, &values)),
        ("README.md".to_owned(), render(README, &values)),
        (".gitignore".to_owned(), "*.wasm\n__pycache__/\n".to_owned()),
    ];
    files.extend(wit_files());
    files
}

/// The commands to run in the new project, one a line.
pub(super) fn next_steps(args: &NewArgs) -> Vec<String> {
    vec![
        "python3 -m unittest".into(),
        "sh build.sh                   # componentize-py 0.25 on PATH: see README.md".into(),
        format!("wasmop reconcile --plugin {}.wasm --object sample.yaml", args.name),
    ]
}

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
            [".gitignore", "README.md", "app.py", "build.sh", "crd.yaml", "reconcile.py", "sample.yaml", "test_reconcile.py"]
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
        assert!(build.contains("\ncomponentize-py -d wit -w controller componentize app -p . -o my-db.wasm\n"), "{build}");
    }

    #[test]
    fn no_children_is_an_empty_list() {
        let files = generate(&args("x", "example.com/v1/X", &[], Lang::Python)).unwrap();
        assert!(file(&files, "reconcile.py").contains("CHILDREN = [\n]\n"));
    }
}
