//! The behaviours a `Testbed` parent asks for in `spec.mode` (`spec.twinMode` in the `twin`
//! build), as one enum parsed from the string the tests write.
//!
//! Adding a mode is one line in the table below (its variant, its string, what it does) and one
//! arm in the reconcile `match` of the module that implements it (the compiler points at it).
//! The test `every_mode_is_exercised_by_a_host_or_end_to_end_test` fails until a test of the host
//! (`host/tests`) or an end-to-end test (`tests/tests`) uses the new mode's string.

use std::fmt;
use std::str::FromStr;

/// Defines [`Mode`], [`Mode::ALL`] and [`Mode::name`] from one table of
/// `Variant = "string": "what it does"` lines.
macro_rules! modes {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)+) => {
        /// One behaviour of the testbed, chosen by the parent's `spec.mode`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Mode {
            $($(#[$doc])* $variant,)+
        }

        impl Mode {
            /// Every mode, in the table's order.
            pub const ALL: &'static [Mode] = &[$(Mode::$variant,)+];

            /// The string a parent's `spec.mode` holds for this mode.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Mode::$variant => $name,)+
                }
            }
        }
    };
}

modes! {
    /// Apply ConfigMap `<name>-out`, status `{phase: Ready}`, condition `Ready=True` (the default).
    Ok = "ok",
    /// Spin forever (CPU deadline).
    Loop = "loop",
    /// Spin forever on parents whose name's bytes add up to an odd number (`x-0`, `x-2`, ...),
    /// else as `ok`: a plugin that fails slowly on half of its objects (the CPU share).
    SpinHalf = "spin-half",
    /// Allocate and touch 1 MiB chunks forever (memory cap).
    Oom = "oom",
    /// `panic!` (a trap).
    Panic = "panic",
    /// Execute the wasm `unreachable` instruction.
    Unreachable = "unreachable",
    /// Return a retryable error.
    Retryable = "retryable",
    /// Return a terminal error.
    Terminal = "terminal",
    /// A terminal error showing `{phase: Invalid}` and `Ready=False InvalidSpec`.
    Invalid = "invalid",
    /// Like `invalid`, with a condition reason the host refuses.
    InvalidShown = "invalid-shown",
    /// A child whose text is not JSON.
    BadJson = "bad-json",
    /// A child without `kind`.
    NoKind = "no-kind",
    /// A ConfigMap in `kube-system`.
    OtherNamespace = "other-namespace",
    /// A Secret, a kind the manifest does not declare.
    Undeclared = "undeclared",
    /// List the related ConfigMaps and report their names.
    Lookup = "lookup",
    /// `get` Secret `spec.name`.
    ReadSecret = "read-secret",
    /// List ConfigMaps of namespace `spec.namespace`.
    ReadNamespace = "read-namespace",
    /// List the other `Testbed` objects of its namespace.
    ReadParents = "read-parents",
    /// Log at every level, print to stdout and stderr, then like `ok`.
    Log = "log",
    /// Return `spec.count` ConfigMaps.
    Big = "big",
    /// One ConfigMap of `spec.bytes` bytes.
    Huge = "huge",
    /// One ConfigMap of about `spec.bytes` bytes of deeply structured JSON.
    Dense = "dense",
    /// Busy-wait `spec.millis` ms, then like `ok`.
    SleepMs = "sleep-ms",
    /// Like `ok`, with a child that changes on every call.
    HotLoop = "hot-loop",
    /// Log and print `spec.lines` lines of `spec.width` bytes, then like `ok`.
    LogFlood = "log-flood",
    /// Log and print messages imitating host log lines, then like `ok`.
    LogForge = "log-forge",
    /// Like `ok`, with `spec.bytes` bytes in the field `spec.field`.
    LongField = "long-field",
    /// A Deployment without `spec.replicas` (the `declares-deployments` build).
    Deployment = "deployment",
    /// Apply ConfigMap `spec.target` with the given `ownerReferences`.
    Take = "take",
    /// Delete ConfigMap `spec.target`.
    Delete = "delete",
    /// Like `ok`, plus a ClusterRole (the `declares-cluster-role` build).
    ClusterRole = "cluster-role",
    /// That ClusterRole with `metadata.namespace` set.
    ClusterRoleInNamespace = "cluster-role-in-namespace",
    /// Apply `<name>-renamed` instead of `<name>-out`.
    RenameOut = "rename-out",
    /// Try every way out of the sandbox and report each attempt.
    Escape = "escape",
    /// Recurse `spec.depth` levels of 1 KiB of guest stack, then like `ok`.
    Recurse = "recurse",
    /// Return nothing (capability attacks; the `twin` build's default).
    Idle = "idle",
    /// A Deployment with every host access, in `kube-system`.
    KubeSystemDeployment = "kube-system-deployment",
    /// Bind ClusterRole `spec.target` to `system:authenticated`.
    BindAuthenticated = "bind-authenticated",
    /// Take Lease `spec.target`.
    TakeLease = "take-lease",
    /// Apply ConfigMap `spec.target` owned by nobody (the `cluster-parent` build adopts).
    Adopt = "adopt",
    /// Set `Ready=True` with reason `Forged`.
    Forge = "forge",
    /// A Service whose Endpoints point at the API server (the `edge-kinds` build).
    EndpointsToApiserver = "endpoints-to-apiserver",
    /// A Service with `externalIPs` (the `edge-kinds` build).
    ExternalIps = "external-ips",
}

/// A `spec.mode` that names no [`Mode`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownMode(pub String);

impl fmt::Display for UnknownMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown spec.mode {:?}", self.0)
    }
}

impl std::error::Error for UnknownMode {}

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL.iter().copied().find(|mode| mode.name() == s).ok_or_else(|| UnknownMode(s.to_owned()))
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    use super::*;

    #[test]
    fn every_mode_parses_from_its_own_name_and_names_are_unique() {
        for mode in Mode::ALL {
            assert_eq!(mode.name().parse::<Mode>(), Ok(*mode));
        }
        let names: BTreeSet<&str> = Mode::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(names.len(), Mode::ALL.len(), "two modes share a name");
    }

    #[test]
    fn an_unknown_mode_is_an_error_naming_it() {
        let err = "nonsense".parse::<Mode>().unwrap_err();
        assert_eq!(err.to_string(), "unknown spec.mode \"nonsense\"");
        assert!("OK".parse::<Mode>().is_err(), "names are case-sensitive");
    }

    /// Every `.rs` file under `dir`.
    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// Whether `text` (a test file that mentions the testbed) passes `mode` to it: as a quoted
    /// string (`"mode": "loop"`, `testbed_cr("a", "loop", ..)`) or in YAML (`mode: loop`).
    fn uses(text: &str, mode: Mode) -> bool {
        let name = mode.name();
        text.contains(&format!("\"{name}\""))
            || [format!("mode: {name}"), format!("Mode: {name}")].iter().any(|yaml| {
                text.match_indices(yaml.as_str()).any(|(at, _)| {
                    !text[at + yaml.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                })
            })
    }

    #[test]
    fn every_mode_is_exercised_by_a_host_or_end_to_end_test() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        for dir in ["host/tests", "tests/tests"] {
            sources(&root.join(dir), &mut files);
        }
        let texts: Vec<String> = files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap())
            .filter(|text| text.contains("testbed") || text.contains("Testbed"))
            .collect();
        assert!(!texts.is_empty(), "no test mentions the testbed under {}", root.display());
        let unused: Vec<&str> =
            Mode::ALL.iter().filter(|mode| !texts.iter().any(|text| uses(text, **mode))).map(|m| m.name()).collect();
        assert!(unused.is_empty(), "testbed modes no test of host/tests or tests/tests uses: {unused:?}");
    }

    #[test]
    fn the_usage_scan_tells_a_mode_from_a_longer_one() {
        assert!(uses("spec: {mode: log}", Mode::Log));
        assert!(!uses("spec: {mode: log-flood}", Mode::Log));
        assert!(uses("testbed(\"a\", \"log\")", Mode::Log));
        assert!(!uses("\"log-forge\"", Mode::Log));
        assert!(uses("spec: {twinMode: idle}", Mode::Idle));
    }
}
