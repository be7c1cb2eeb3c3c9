//! The least-privilege RBAC for a host running a set of plugins (`wasmop rbac`): the rules
//! ([`rules`]) and the documents that bind them to the host ([`render`], [`render_namespaced`],
//! [`render_metrics`]).
//!
//! Resource names (and scopes) are never guessed from kind names: Kubernetes' own kinds come
//! from a built-in table ([`KnownKinds::builtin`](crate::contract::KnownKinds::builtin)), custom kinds from the CRD files given with
//! `--crds`, and what neither knows from discovery on the cluster of `--kubeconfig` (or the
//! default kubeconfig): the caller gathers them into a
//! [`KnownKinds`](crate::contract::KnownKinds). A kind found nowhere is
//! an error naming it.
//!
//! For a host run with `--namespace` (see [`InstallScope`](crate::cluster::InstallScope)),
//! `wasmop rbac --namespace NS...` prints a Role and RoleBinding per namespace instead of the
//! ClusterRole, plus only the rights such a host needs outside its namespaces, each with a
//! comment saying why ([`render_namespaced`]).

mod documents;
mod rules;

pub use documents::{pull_secrets, render, render_metrics, render_namespaced};
pub use rules::{kinds_of, left_out, namespace_write_rules, rules};

/// Kinds the tests resolve.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::path::{Path, PathBuf};

    use crate::contract::KnownKinds;

    /// The built-in kinds and the repository's CRDs (Memcached).
    pub(crate) fn kinds() -> KnownKinds {
        let mut kinds = KnownKinds::builtin();
        kinds.add_crds(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds")).unwrap();
        kinds
    }

    /// A CRD file in `dir` for `sea.example.com/v1` `Octopus`, plural `octopodes`.
    pub(crate) fn octopus_crd(dir: &Path) -> PathBuf {
        let file = dir.join("octopus.yaml");
        let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: octopodes.sea.example.com}\n\
                   spec: {group: sea.example.com, scope: Namespaced, names: {kind: Octopus, plural: octopodes}, versions: []}\n";
        std::fs::write(&file, crd).unwrap();
        file
    }
}
