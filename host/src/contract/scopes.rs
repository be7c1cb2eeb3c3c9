//! Whether a kind is namespaced or cluster-scoped, and its resource name (plural): the one
//! place the host looks this up.
//!
//! Online the answer comes from discovery ([`crate::cluster::Discovery`]
//! implements [`KindScopes`]); offline (`wasmop rbac`, `wasmop inspect`, `wasmop reconcile`)
//! from [`KnownKinds`]: a built-in table of Kubernetes' own kinds plus the
//! CustomResourceDefinitions given as files. A kind found in neither is unknown, never guessed
//! (lower-casing and pluralising a kind name gets irregular plurals wrong, and scope cannot be
//! guessed at all).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::kind::{Kind, Scope};

/// Why a kind could not be resolved offline, or a CRD file not read.
#[derive(Debug, thiserror::Error)]
pub enum KindsError {
    /// The kind is not a built-in Kubernetes kind and no CRD given defines it.
    #[error(
        "kind {kind} is unknown: it is not a built-in Kubernetes kind and no CustomResourceDefinition given defines it \
         (pass its CRD file or directory with --crds, or --kubeconfig to ask a cluster that serves it)"
    )]
    Unknown {
        /// The kind.
        kind: Kind,
    },
    /// A CRD file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file is not YAML/JSON, or a CustomResourceDefinition in it lacks what is needed.
    #[error("{path}: {message}")]
    BadCrd {
        /// The file.
        path: PathBuf,
        /// What is wrong (document number and field).
        message: String,
    },
}

/// What the host needs to know about a kind's resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindInfo {
    /// The resource name (`deployments`, `octopodes`): what RBAC rules and URLs use.
    pub plural: String,
    /// Namespaced or cluster-scoped.
    pub scope: Scope,
}

/// Answers "is `kind` namespaced or cluster-scoped, and what is its resource name?"; `None`
/// when it does not know.
pub trait KindScopes {
    /// The scope of `kind`, if known.
    fn scope_of(&self, kind: &Kind) -> Option<Scope>;
    /// The resource name (plural) of `kind`, if known.
    fn plural_of(&self, kind: &Kind) -> Option<String>;
}

/// Kinds known without a cluster: Kubernetes' own (see [`KnownKinds::builtin`]) plus those
/// defined by CRDs read with [`KnownKinds::add_crds`] or added with [`KnownKinds::insert`].
/// Keyed by group and kind: plural and scope do not depend on the version.
///
/// ```
/// use wasmop::contract::{Kind, KnownKinds, Scope};
/// let kinds = KnownKinds::builtin();
/// let role = kinds.resolve(&Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole")).unwrap();
/// assert_eq!((role.plural.as_str(), role.scope), ("clusterroles", Scope::Cluster));
/// assert_eq!(kinds.resolve(&Kind::new("", "v1", "Endpoints")).unwrap().plural, "endpoints");
/// assert!(kinds.resolve(&Kind::new("example.com", "v1", "Octopus")).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownKinds {
    kinds: BTreeMap<(String, String), KindInfo>,
    /// The versions each CRD read serves (`spec.versions[].served`); Kubernetes' own kinds are
    /// not listed here.
    crd_versions: BTreeMap<(String, String), Vec<String>>,
}

/// Kubernetes' own kinds (group, kind, plural, cluster-scoped?) that plugins may plausibly
/// declare, and the kinds the host itself uses. Review-only kinds (TokenReview, ...) are left
/// out: nothing reconciles them.
const BUILTIN: &[(&str, &str, &str, bool)] = &[
    ("", "Binding", "bindings", false),
    ("", "ComponentStatus", "componentstatuses", true),
    ("", "ConfigMap", "configmaps", false),
    ("", "Endpoints", "endpoints", false),
    ("", "Event", "events", false),
    ("", "LimitRange", "limitranges", false),
    ("", "Namespace", "namespaces", true),
    ("", "Node", "nodes", true),
    ("", "PersistentVolume", "persistentvolumes", true),
    ("", "PersistentVolumeClaim", "persistentvolumeclaims", false),
    ("", "Pod", "pods", false),
    ("", "PodTemplate", "podtemplates", false),
    ("", "ReplicationController", "replicationcontrollers", false),
    ("", "ResourceQuota", "resourcequotas", false),
    ("", "Secret", "secrets", false),
    ("", "Service", "services", false),
    ("", "ServiceAccount", "serviceaccounts", false),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", true),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", true),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", true),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", true),
    ("apiextensions.k8s.io", "CustomResourceDefinition", "customresourcedefinitions", true),
    ("apiregistration.k8s.io", "APIService", "apiservices", true),
    ("apps", "ControllerRevision", "controllerrevisions", false),
    ("apps", "DaemonSet", "daemonsets", false),
    ("apps", "Deployment", "deployments", false),
    ("apps", "ReplicaSet", "replicasets", false),
    ("apps", "StatefulSet", "statefulsets", false),
    ("autoscaling", "HorizontalPodAutoscaler", "horizontalpodautoscalers", false),
    ("batch", "CronJob", "cronjobs", false),
    ("batch", "Job", "jobs", false),
    ("certificates.k8s.io", "CertificateSigningRequest", "certificatesigningrequests", true),
    ("coordination.k8s.io", "Lease", "leases", false),
    ("discovery.k8s.io", "EndpointSlice", "endpointslices", false),
    ("events.k8s.io", "Event", "events", false),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema", "flowschemas", true),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration", "prioritylevelconfigurations", true),
    ("networking.k8s.io", "IPAddress", "ipaddresses", true),
    ("networking.k8s.io", "Ingress", "ingresses", false),
    ("networking.k8s.io", "IngressClass", "ingressclasses", true),
    ("networking.k8s.io", "NetworkPolicy", "networkpolicies", false),
    ("networking.k8s.io", "ServiceCIDR", "servicecidrs", true),
    ("node.k8s.io", "RuntimeClass", "runtimeclasses", true),
    ("policy", "PodDisruptionBudget", "poddisruptionbudgets", false),
    ("policy", "PodSecurityPolicy", "podsecuritypolicies", true),
    ("rbac.authorization.k8s.io", "ClusterRole", "clusterroles", true),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding", "clusterrolebindings", true),
    ("rbac.authorization.k8s.io", "Role", "roles", false),
    ("rbac.authorization.k8s.io", "RoleBinding", "rolebindings", false),
    ("resource.k8s.io", "DeviceClass", "deviceclasses", true),
    ("resource.k8s.io", "ResourceClaim", "resourceclaims", false),
    ("resource.k8s.io", "ResourceClaimTemplate", "resourceclaimtemplates", false),
    ("resource.k8s.io", "ResourceSlice", "resourceslices", true),
    ("scheduling.k8s.io", "PriorityClass", "priorityclasses", true),
    ("storage.k8s.io", "CSIDriver", "csidrivers", true),
    ("storage.k8s.io", "CSINode", "csinodes", true),
    ("storage.k8s.io", "CSIStorageCapacity", "csistoragecapacities", false),
    ("storage.k8s.io", "StorageClass", "storageclasses", true),
    ("storage.k8s.io", "VolumeAttachment", "volumeattachments", true),
    ("storage.k8s.io", "VolumeAttributesClass", "volumeattributesclasses", true),
    // The host's own kind (crds/wasmplugin.yaml).
    ("wasmop.dev", "WasmPlugin", "wasmplugins", true),
];

impl KnownKinds {
    /// Kubernetes' own kinds (core, apps, batch, RBAC, storage, networking, admission, ...)
    /// and the host's `WasmPlugin`; no CRD.
    pub fn builtin() -> Self {
        let kinds = BUILTIN
            .iter()
            .map(|&(group, kind, plural, cluster)| {
                let scope = if cluster { Scope::Cluster } else { Scope::Namespaced };
                ((group.to_owned(), kind.to_owned()), KindInfo { plural: plural.to_owned(), scope })
            })
            .collect();
        Self { kinds, crd_versions: BTreeMap::new() }
    }

    /// Add (or replace) what is known about `kind`, e.g. a discovery answer.
    pub fn insert(&mut self, kind: &Kind, info: KindInfo) {
        self.kinds.insert((kind.group.clone(), kind.kind.clone()), info);
    }

    /// What is known about `kind`, if anything.
    pub fn get(&self, kind: &Kind) -> Option<&KindInfo> {
        self.kinds.get(&(kind.group.clone(), kind.kind.clone()))
    }

    /// What is known about `kind`.
    ///
    /// # Errors
    /// [`KindsError::Unknown`] naming the kind and how to make it known.
    pub fn resolve(&self, kind: &Kind) -> Result<&KindInfo, KindsError> {
        self.get(kind).ok_or_else(|| KindsError::Unknown { kind: kind.clone() })
    }

    /// Add the kind a CustomResourceDefinition object defines (`spec.group`,
    /// `spec.names.kind`, `spec.names.plural`, `spec.scope`); `Ok(false)` when `object` is not
    /// a CRD.
    ///
    /// # Errors
    /// A CRD missing one of those fields, or with a scope other than `Namespaced`/`Cluster`;
    /// the message names the field.
    pub fn add_crd(&mut self, object: &Value) -> Result<bool, String> {
        let is_crd = object.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
            && object.get("apiVersion").and_then(Value::as_str).is_some_and(|v| v.starts_with("apiextensions.k8s.io/"));
        if !is_crd {
            return Ok(false);
        }
        let field =
            |pointer: &str| {
                object.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty()).ok_or_else(|| {
                    format!("CustomResourceDefinition has no {}", pointer.trim_start_matches('/').replace('/', "."))
                })
            };
        let (group, kind, plural) = (field("/spec/group")?, field("/spec/names/kind")?, field("/spec/names/plural")?);
        let scope = match field("/spec/scope")? {
            "Namespaced" => Scope::Namespaced,
            "Cluster" => Scope::Cluster,
            other => {
                return Err(format!(
                    "CustomResourceDefinition {plural}.{group} has spec.scope {other:?}, not Namespaced or Cluster"
                ));
            }
        };
        let versions = object
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|versions| {
                versions
                    .iter()
                    .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
                    .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        self.kinds.insert((group.to_owned(), kind.to_owned()), KindInfo { plural: plural.to_owned(), scope });
        self.crd_versions.insert((group.to_owned(), kind.to_owned()), versions);
        Ok(true)
    }

    /// Whether a cluster serving Kubernetes' own kinds and exactly the CRDs read here would serve
    /// `kind` at its version: the offline counterpart of discovery (`wasmop inspect --crds`).
    /// Kubernetes' own kinds are taken as served at any version.
    ///
    /// # Errors
    /// Why not, in one line: a kind neither built in nor defined by a CRD read, or a CRD that
    /// does not serve that version.
    pub fn serves(&self, kind: &Kind) -> Result<(), String> {
        let key = (kind.group.clone(), kind.kind.clone());
        if !self.kinds.contains_key(&key) {
            return Err(format!("{kind} is neither one of Kubernetes' own kinds nor defined by a CRD given"));
        }
        match self.crd_versions.get(&key) {
            Some(versions) if !versions.contains(&kind.version) => {
                Err(format!("{kind}: its CRD serves {}, not {}", list(versions), kind.version))
            }
            _ => Ok(()),
        }
    }

    /// Whether such a cluster serves the resource `resource` (a plural, optionally with a
    /// subresource) in `group`/`version`; `*` matches anything, as in a webhook rule.
    ///
    /// # Errors
    /// Why not, in one line.
    pub fn serves_resource(&self, group: &str, version: &str, resource: &str) -> Result<(), String> {
        let plural = resource.split('/').next().unwrap_or(resource);
        if [group, version, plural].contains(&"*") {
            return Ok(());
        }
        let gv = if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
        let found = self.kinds.iter().find(|((g, _), info)| g == group && info.plural == plural);
        match found {
            None => Err(format!("{gv} {plural} is neither one of Kubernetes' own resources nor defined by a CRD given")),
            Some((key, _)) => match self.crd_versions.get(key) {
                Some(versions) if !versions.iter().any(|v| v == version) => {
                    Err(format!("{gv} {plural}: its CRD serves {}, not {version}", list(versions)))
                }
                _ => Ok(()),
            },
        }
    }

    /// Add every CRD in `path`: a YAML/JSON file (documents separated by `---`), or a
    /// directory whose `*.yaml`, `*.yml` and `*.json` files are read (not its
    /// subdirectories). Other objects in those files are skipped. Returns how many CRDs were
    /// read.
    ///
    /// # Errors
    /// [`KindsError::Read`] when a file or the directory cannot be read; [`KindsError::BadCrd`]
    /// for a document that does not parse, a CRD missing a field, or a file given by name
    /// that holds no CRD at all.
    pub fn add_crds(&mut self, path: &Path) -> Result<usize, KindsError> {
        let read = |source| KindsError::Read { path: path.to_owned(), source };
        if !path.is_dir() {
            let found = self.add_crd_file(path)?;
            if found == 0 {
                return Err(KindsError::BadCrd {
                    path: path.to_owned(),
                    message: "no CustomResourceDefinition in the file".into(),
                });
            }
            return Ok(found);
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(read)?
            .map(|entry| entry.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(read)?;
        files.retain(|f| f.is_file() && f.extension().is_some_and(|e| e == "yaml" || e == "yml" || e == "json"));
        files.sort();
        let mut found = 0;
        for file in files {
            found += self.add_crd_file(&file)?;
        }
        Ok(found)
    }

    fn add_crd_file(&mut self, path: &Path) -> Result<usize, KindsError> {
        let text = std::fs::read_to_string(path).map_err(|source| KindsError::Read { path: path.to_owned(), source })?;
        let bad = |message: String| KindsError::BadCrd { path: path.to_owned(), message };
        let mut found = 0;
        for (i, document) in crate::yaml::documents::<Value>(&text).into_iter().enumerate() {
            let value = document.map_err(|e| bad(format!("document {} is not valid YAML: {e}", i + 1)))?;
            if self.add_crd(&value).map_err(|e| bad(format!("document {}: {e}", i + 1)))? {
                found += 1;
            }
        }
        Ok(found)
    }
}

/// `v1, v2` (or `no version`).
fn list(versions: &[String]) -> String {
    if versions.is_empty() { "no version".to_owned() } else { versions.join(", ") }
}

impl KindScopes for KnownKinds {
    fn scope_of(&self, kind: &Kind) -> Option<Scope> {
        self.get(kind).map(|info| info.scope)
    }

    fn plural_of(&self, kind: &Kind) -> Option<String> {
        self.get(kind).map(|info| info.plural.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OCTOPUS_CRD: &str = "\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: octopodes.sea.example.com}
spec:
  group: sea.example.com
  scope: Cluster
  names: {kind: Octopus, plural: octopodes, singular: octopus}
  versions: [{name: v1, served: true, storage: true}]
";

    #[test]
    fn offline_a_kind_is_served_when_built_in_or_defined_at_that_version_by_a_crd_given() {
        let mut kinds = KnownKinds::builtin();
        let octopus = |version: &str| Kind::new("sea.example.com", version, "Octopus");
        assert!(kinds.serves(&octopus("v1")).unwrap_err().contains("nor defined by a CRD given"));
        kinds.add_crd(&crate::yaml::from_str::<Value>(OCTOPUS_CRD).unwrap()).unwrap();
        assert_eq!(kinds.serves(&octopus("v1")), Ok(()));
        assert_eq!(kinds.serves(&octopus("v2")).unwrap_err(), "sea.example.com/v2/Octopus: its CRD serves v1, not v2");
        assert_eq!(kinds.serves(&Kind::new("apps", "v1", "Deployment")), Ok(()));
        assert_eq!(kinds.serves_resource("sea.example.com", "v1", "octopodes/status"), Ok(()));
        assert_eq!(kinds.serves_resource("", "v1", "pods"), Ok(()));
        assert_eq!(kinds.serves_resource("*", "*", "*"), Ok(()));
        assert_eq!(
            kinds.serves_resource("sea.example.com", "v2", "octopodes").unwrap_err(),
            "sea.example.com/v2 octopodes: its CRD serves v1, not v2"
        );
        assert!(kinds.serves_resource("sea.example.com", "v1", "squids").unwrap_err().contains("squids is neither"));
    }

    #[test]
    fn the_builtin_table_knows_the_cluster_scoped_core_kinds() {
        let kinds = KnownKinds::builtin();
        for (group, kind) in [
            ("", "Namespace"),
            ("", "Node"),
            ("", "PersistentVolume"),
            ("rbac.authorization.k8s.io", "ClusterRole"),
            ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
            ("storage.k8s.io", "StorageClass"),
            ("scheduling.k8s.io", "PriorityClass"),
            ("apiextensions.k8s.io", "CustomResourceDefinition"),
            ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
            ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
            ("apiregistration.k8s.io", "APIService"),
            ("storage.k8s.io", "CSIDriver"),
            ("networking.k8s.io", "IngressClass"),
            ("node.k8s.io", "RuntimeClass"),
        ] {
            assert_eq!(kinds.scope_of(&Kind::new(group, "v1", kind)), Some(Scope::Cluster), "{group}/{kind}");
        }
        for (group, kind, plural) in [
            ("", "ConfigMap", "configmaps"),
            ("apps", "Deployment", "deployments"),
            ("networking.k8s.io", "Ingress", "ingresses"),
        ] {
            let info = kinds.resolve(&Kind::new(group, "v1", kind)).unwrap();
            assert_eq!((info.plural.as_str(), info.scope), (plural, Scope::Namespaced));
        }
        assert_eq!(kinds.scope_of(&Kind::new("example.com", "v1", "Namespace")), None, "the group matters");
    }

    #[test]
    fn a_crd_gives_its_irregular_plural_and_its_scope() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("octopus.yaml"),
            format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\n---\n{OCTOPUS_CRD}"),
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not read").unwrap();
        let mut kinds = KnownKinds::builtin();
        assert_eq!(kinds.add_crds(dir.path()).unwrap(), 1);
        let octopus = kinds.resolve(&Kind::new("sea.example.com", "v1beta1", "Octopus")).unwrap();
        assert_eq!((octopus.plural.as_str(), octopus.scope), ("octopodes", Scope::Cluster));
    }

    #[test]
    fn unknown_kinds_and_bad_crds_are_errors_naming_them() {
        let err = KnownKinds::builtin().resolve(&Kind::new("sea.example.com", "v1", "Octopus")).unwrap_err();
        assert!(err.to_string().starts_with("kind sea.example.com/v1/Octopus is unknown"), "{err}");
        assert!(err.to_string().contains("--crds"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.yaml");
        std::fs::write(&file, OCTOPUS_CRD.replace("plural: octopodes, ", "")).unwrap();
        let err = KnownKinds::builtin().add_crds(&file).unwrap_err();
        assert_eq!(err.to_string(), format!("{}: document 1: CustomResourceDefinition has no spec.names.plural", file.display()));
        std::fs::write(&file, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n").unwrap();
        let err = KnownKinds::builtin().add_crds(&file).unwrap_err();
        assert!(err.to_string().ends_with("no CustomResourceDefinition in the file"), "{err}");
        let err = KnownKinds::builtin().add_crds(&dir.path().join("absent.yaml")).unwrap_err();
        assert!(matches!(err, KindsError::Read { .. }), "{err}");
    }
}
