//! Plugins from OCI registries: the distribution API client ([`RegistryClient`]), the CNCF Wasm
//! OCI artifact layout ([`push`], [`pull`]), registry credentials from
//! `kubernetes.io/dockerconfigjson` Secrets, and the [`Puller`] that fills the plugins
//! directory from the sources the host policy names (`plugins.NAME.source`) — the reloader
//! then takes over as for any file dropped there.
//!
//! A pulled file is checked before it reaches the plugins directory: the manifest against a
//! pinned digest, the layer against the manifest's digest and size, the size against the
//! policy's `maxModuleBytes`, the signatures against the policy's trusted keys
//! (`verification:`, cosign's keyed layout), the content for the WebAssembly header. The reloader then
//! compiles and type-checks it before it replaces anything (docs/registries.md).

mod artifact;
mod cache;
mod client;
mod credentials;
mod error;
mod puller;
mod signature;

pub use artifact::{
    Descriptor, Manifest, OCI_MANIFEST_MEDIA_TYPE, Pulled, Pushed, TITLE_ANNOTATION, WASM_CONFIG_MEDIA_TYPE,
    WASM_LAYER_MEDIA_TYPE, check_wasm, fetch_layer, manifest, pull, push, resolve, wasm_layer,
};
pub use cache::{PullCache, write_atomically};
pub use client::{FetchedManifest, MAX_MANIFEST_BYTES, REQUEST_TIMEOUT, RegistryClient, sha256_digest};
pub use credentials::{Credentials, DOCKER_CONFIG_JSON_KEY, DOCKER_CONFIG_JSON_TYPE};
pub use error::RegistryError;
pub use puller::{MAX_RETRY, Pull, PullContext, PullMetrics, PullTarget, Puller, pull_once};
pub use signature::{
    SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE, Signed, SigningKey, fetch_signatures, payload, sign, signature_tag, verify,
};
