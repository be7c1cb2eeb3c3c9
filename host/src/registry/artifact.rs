//! The CNCF Wasm OCI artifact layout: an OCI image manifest whose config has the media type
//! [`WASM_CONFIG_MEDIA_TYPE`] and whose one layer is the `.wasm` file, [`WASM_LAYER_MEDIA_TYPE`]
//! (what `wkg oci push` writes, and `oras push FILE:application/wasm`). [`push`] writes one,
//! [`pull`] reads one, checking every digest and size.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::client::{RegistryClient, sha256_digest};
use super::error::RegistryError;
use crate::policy::OciReference;

/// The OCI image manifest media type.
pub const OCI_MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Docker's v2 manifest, which OCI clients read like an OCI one.
const DOCKER_MANIFEST_MEDIA_TYPE: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// The config media type of a Wasm artifact.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of the Wasm layer.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The annotation naming a layer's file (what `oras pull` writes it as).
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";

/// A content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// What the content is.
    pub media_type: String,
    /// `sha256:HEX` of the content.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// Annotations (a layer's title).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// An OCI image manifest (the fields read and written here).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// [`OCI_MANIFEST_MEDIA_TYPE`] (optional in what others push).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers.
    pub layers: Vec<Descriptor>,
}

/// What a push stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// `sha256:HEX` of the manifest: the digest to pin (`oci://REG/REPO@DIGEST`).
    pub manifest_digest: String,
    /// `sha256:HEX` of the `.wasm` file (its layer).
    pub layer_digest: String,
}

/// A Wasm artifact as pulled and checked.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// `sha256:HEX` of the manifest (what a tag resolved to).
    pub manifest_digest: String,
    /// The Wasm layer's descriptor.
    pub layer: Descriptor,
    /// The layer's bytes, checked against its digest and size.
    pub wasm: Bytes,
}

/// The config blob of a Wasm artifact: the CNCF layout's fields that need no parsing of the
/// component (`architecture`, `os`, `layerDigests`). No creation time: the same file pushes
/// to the same digest.
fn config(layer_digest: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({"architecture": "wasm", "os": "wasip2", "layerDigests": [layer_digest]}))
        .expect("a JSON value serializes")
}

/// The manifest of a Wasm artifact whose layer is `wasm`, named `title`; its config blob too.
pub fn manifest(wasm: &[u8], title: &str) -> (Vec<u8>, Vec<u8>) {
    let layer_digest = sha256_digest(wasm);
    let config = config(&layer_digest);
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST_MEDIA_TYPE.into()),
        config: Descriptor {
            media_type: WASM_CONFIG_MEDIA_TYPE.into(),
            digest: sha256_digest(&config),
            size: config.len() as u64,
            annotations: BTreeMap::new(),
        },
        layers: vec![Descriptor {
            media_type: WASM_LAYER_MEDIA_TYPE.into(),
            digest: layer_digest,
            size: wasm.len() as u64,
            annotations: [(TITLE_ANNOTATION.to_owned(), title.to_owned())].into(),
        }],
    };
    (serde_json::to_vec(&manifest).expect("a manifest serializes"), config)
}

/// The one Wasm layer of a manifest.
///
/// # Errors
/// [`RegistryError::NotWasmArtifact`] for an image index, a manifest that does not parse, or
/// one without exactly one [`WASM_LAYER_MEDIA_TYPE`] layer (and no other).
pub fn wasm_layer(bytes: &[u8], media_type: &str) -> Result<Descriptor, RegistryError> {
    if media_type.contains("index") || media_type.contains("manifest.list") {
        return Err(RegistryError::NotWasmArtifact(format!(
            "the reference names an image index ({media_type}), not one artifact"
        )));
    }
    let manifest: Manifest =
        serde_json::from_slice(bytes).map_err(|e| RegistryError::NotWasmArtifact(format!("the manifest does not parse: {e}")))?;
    if let Some(t) = manifest.media_type.as_deref().filter(|t| *t != OCI_MANIFEST_MEDIA_TYPE && *t != DOCKER_MANIFEST_MEDIA_TYPE)
    {
        return Err(RegistryError::NotWasmArtifact(format!("manifest media type {t}")));
    }
    match manifest.layers.as_slice() {
        [layer] if layer.media_type == WASM_LAYER_MEDIA_TYPE => Ok(layer.clone()),
        layers => {
            let types: Vec<&str> = layers.iter().map(|l| l.media_type.as_str()).collect();
            Err(RegistryError::NotWasmArtifact(format!(
                "expected one {WASM_LAYER_MEDIA_TYPE} layer, found [{}] (config {})",
                types.join(", "),
                manifest.config.media_type
            )))
        }
    }
}

/// Push `wasm` as a Wasm artifact to `reference` (which must name a tag), its layer titled
/// `title`.
///
/// # Errors
/// [`RegistryError::NotWasmArtifact`] for a reference without a tag; any [`RegistryError`]
/// of the exchange.
pub async fn push(client: &RegistryClient, reference: &OciReference, wasm: Bytes, title: &str) -> Result<Pushed, RegistryError> {
    let tag = reference.tag.as_deref().ok_or_else(|| {
        RegistryError::NotWasmArtifact(format!("{reference}: a push needs a tag (oci://REGISTRY/REPOSITORY:TAG)"))
    })?;
    let (manifest, config) = manifest(&wasm, title);
    let repository = &reference.repository;
    let layer_digest = client.push_blob(repository, wasm).await?;
    client.push_blob(repository, Bytes::from(config)).await?;
    let manifest_digest = client.put_manifest(repository, tag, OCI_MANIFEST_MEDIA_TYPE, Bytes::from(manifest)).await?;
    if let Some(pinned) = reference.digest.as_deref().filter(|d| *d != manifest_digest) {
        return Err(RegistryError::DigestMismatch {
            what: format!("pushed manifest of {reference}"),
            expected: pinned.into(),
            actual: manifest_digest,
        });
    }
    Ok(Pushed { manifest_digest, layer_digest })
}

/// Resolve `reference` to a manifest and check it is a Wasm artifact whose layer is at most
/// `max_bytes`; the layer itself is not read ([`fetch_layer`]).
///
/// # Errors
/// [`RegistryError::TooLarge`] for a layer over `max_bytes`; see [`wasm_layer`] and
/// [`RegistryClient::get_manifest`].
pub async fn resolve(
    client: &RegistryClient,
    reference: &OciReference,
    max_bytes: u64,
) -> Result<(String, Descriptor), RegistryError> {
    let manifest = client.get_manifest(&reference.repository, reference.manifest_reference()).await?;
    let layer = wasm_layer(&manifest.bytes, &manifest.media_type)?;
    if layer.size > max_bytes {
        return Err(RegistryError::TooLarge {
            what: format!("the Wasm layer of {reference}"),
            size: Some(layer.size),
            limit: max_bytes,
        });
    }
    Ok((manifest.digest, layer))
}

/// Read the Wasm layer `layer` of `reference`'s repository, checked against its digest and
/// size, and check it is WebAssembly.
///
/// # Errors
/// [`RegistryError::NotWasm`] for bytes without the WebAssembly header; see
/// [`RegistryClient::get_blob`].
pub async fn fetch_layer(client: &RegistryClient, reference: &OciReference, layer: &Descriptor) -> Result<Bytes, RegistryError> {
    let wasm = client.get_blob(&reference.repository, &layer.digest, layer.size).await?;
    check_wasm(&wasm)?;
    Ok(wasm)
}

/// Whether `bytes` start like a WebAssembly component or core module.
///
/// # Errors
/// [`RegistryError::NotWasm`] naming what the first bytes are.
pub fn check_wasm(bytes: &[u8]) -> Result<(), RegistryError> {
    crate::runtime::detect(bytes).map(|_| ()).map_err(|e| RegistryError::NotWasm(e.to_string()))
}

/// Pull the Wasm artifact `reference`: [`resolve`], then [`fetch_layer`].
///
/// # Errors
/// See [`resolve`] and [`fetch_layer`].
pub async fn pull(client: &RegistryClient, reference: &OciReference, max_bytes: u64) -> Result<Pulled, RegistryError> {
    let (manifest_digest, layer) = resolve(client, reference, max_bytes).await?;
    let wasm = fetch_layer(client, reference, &layer).await?;
    Ok(Pulled { manifest_digest, layer, wasm })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pushed_manifest_is_the_cncf_wasm_layout_and_reads_back() {
        let wasm = b"\0asm\x0d\0\x01\0rest";
        let (bytes, config) = manifest(wasm, "memcached.wasm");
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(json["mediaType"], OCI_MANIFEST_MEDIA_TYPE);
        assert_eq!(json["config"]["mediaType"], WASM_CONFIG_MEDIA_TYPE);
        assert_eq!(json["config"]["digest"], sha256_digest(&config));
        assert_eq!(json["layers"][0]["annotations"][TITLE_ANNOTATION], "memcached.wasm");
        let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
        assert_eq!(config["layerDigests"][0], sha256_digest(wasm));
        let layer = wasm_layer(&bytes, OCI_MANIFEST_MEDIA_TYPE).unwrap();
        assert_eq!((layer.digest, layer.size), (sha256_digest(wasm), wasm.len() as u64));
        assert_eq!(manifest(wasm, "memcached.wasm").0, bytes, "the same file pushes to the same manifest");
    }

    #[test]
    fn a_manifest_without_exactly_one_wasm_layer_is_not_a_wasm_artifact() {
        let layer = |t: &str| serde_json::json!({"mediaType": t, "digest": "sha256:00", "size": 1});
        let two = serde_json::json!({"schemaVersion": 2, "config": layer("application/vnd.oci.empty.v1+json"),
            "layers": [layer(WASM_LAYER_MEDIA_TYPE), layer(WASM_LAYER_MEDIA_TYPE)]});
        let err = wasm_layer(two.to_string().as_bytes(), OCI_MANIFEST_MEDIA_TYPE).unwrap_err();
        assert_eq!(err.reason(), "NotWasmArtifact");
        let image = serde_json::json!({"schemaVersion": 2, "config": layer("application/vnd.oci.image.config.v1+json"),
            "layers": [layer("application/vnd.oci.image.layer.v1.tar+gzip")]});
        let err = wasm_layer(image.to_string().as_bytes(), OCI_MANIFEST_MEDIA_TYPE).unwrap_err();
        assert!(err.to_string().contains("found [application/vnd.oci.image.layer.v1.tar+gzip]"), "{err}");
        let err = wasm_layer(b"{}", "application/vnd.oci.image.index.v1+json").unwrap_err();
        assert!(err.to_string().contains("image index"), "{err}");
        assert_eq!(check_wasm(b"PK\x03\x04zip!").unwrap_err().reason(), "NotWasm");
    }
}
