//! Where a plugin's file comes from when it is not dropped into the plugins directory by hand:
//! an OCI registry ([`PluginSource`], policy `plugins.NAME.source`). Plain data; the puller
//! (`crate::registry`) fetches it.

use std::fmt;
use std::time::Duration;

/// Default of `maxModuleBytes`: the largest plugin file the host pulls from a registry (64 MiB;
/// the Python and JavaScript components are 12–18 MB).
pub const DEFAULT_MAX_MODULE_BYTES: u64 = 64 << 20;

/// Shortest `pullInterval` accepted: 1 s.
pub const MIN_PULL_INTERVAL: Duration = Duration::from_secs(1);

/// An artifact in an OCI registry: `oci://REGISTRY/REPOSITORY:TAG` or
/// `oci://REGISTRY/REPOSITORY@sha256:HEX` (a digest pins the content; a tag is resolved).
///
/// ```
/// use wasmop::policy::OciReference;
/// let r = OciReference::parse("oci://127.0.0.1:5000/plugins/memcached:0.1.0").unwrap();
/// assert_eq!((r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()), ("127.0.0.1:5000", "plugins/memcached", Some("0.1.0")));
/// assert_eq!(r.to_string(), "oci://127.0.0.1:5000/plugins/memcached:0.1.0");
/// assert!(OciReference::parse("127.0.0.1:5000/memcached:1").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OciReference {
    /// `HOST` or `HOST:PORT`.
    pub registry: String,
    /// The repository: lowercase path components separated by `/`.
    pub repository: String,
    /// The tag, when the reference names one.
    pub tag: Option<String>,
    /// `sha256:HEX` of the manifest, when the reference pins one.
    pub digest: Option<String>,
}

impl OciReference {
    /// Parse `oci://REGISTRY/REPOSITORY(:TAG|@sha256:HEX)`.
    ///
    /// # Errors
    /// One line naming what is wrong: the scheme, an empty part, a repository or tag out of the
    /// OCI distribution grammar, a digest that is not sha256 with 64 lowercase hex digits, or
    /// neither a tag nor a digest.
    pub fn parse(text: &str) -> Result<Self, String> {
        let rest = text.strip_prefix("oci://").ok_or_else(|| format!("{text:?} does not start with oci://"))?;
        let (registry, path) = rest.split_once('/').ok_or_else(|| format!("{text:?} has no repository after the registry"))?;
        if registry.is_empty() || !registry.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
        {
            return Err(format!("registry {registry:?} is not HOST or HOST:PORT"));
        }
        let (path, digest) = match path.split_once('@') {
            Some((p, d)) => (p, Some(d)),
            None => (path, None),
        };
        // A tag follows the last ':' after the last '/'.
        let (repository, tag) = match path.rfind(':').filter(|&i| !path[i..].contains('/')) {
            Some(i) => (&path[..i], Some(&path[i + 1..])),
            None => (path, None),
        };
        if !is_repository(repository) {
            return Err(format!(
                "repository {repository:?} is not lowercase letters, digits and separators ('.', '_', '__', '-', '/')"
            ));
        }
        if let Some(tag) = tag.filter(|t| !is_tag(t)) {
            return Err(format!("tag {tag:?} is not 1 to 128 letters, digits, '_', '.' or '-' (not starting with '.' or '-')"));
        }
        if let Some(d) = digest.filter(|d| !is_sha256_digest(d)) {
            return Err(format!("digest {d:?} is not sha256: and 64 lowercase hex digits"));
        }
        if tag.is_none() && digest.is_none() {
            return Err(format!("{text:?} names neither a tag (:TAG) nor a digest (@sha256:...)"));
        }
        Ok(Self {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            tag: tag.map(str::to_owned),
            digest: digest.map(str::to_owned),
        })
    }

    /// The tag or digest a manifest is fetched by (the digest when both are given).
    pub fn manifest_reference(&self) -> &str {
        self.digest.as_deref().or(self.tag.as_deref()).expect("a parsed reference has a tag or a digest")
    }
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// Whether `d` is `sha256:` and 64 lowercase hex digits.
pub fn is_sha256_digest(d: &str) -> bool {
    d.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// The distribution spec's repository grammar: components of `[a-z0-9]+` joined by `.`, `_`,
/// `__` or `-`s, separated by `/`.
fn is_repository(r: &str) -> bool {
    !r.is_empty()
        && r.len() <= 255
        && r.split('/').all(|c| {
            let bytes = c.as_bytes();
            !c.is_empty()
                && bytes.first().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && bytes.last().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
                && !c.contains("..")
                && !c.contains("___")
        })
}

fn is_tag(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 128
        && !t.starts_with(['.', '-'])
        && t.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// A `kubernetes.io/dockerconfigjson` Secret by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SecretRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl SecretRef {
    /// Parse `NAMESPACE/NAME`.
    ///
    /// # Errors
    /// A message naming what is wrong: no `/`, an invalid namespace or name.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (namespace, name) = super::config_source::parse_namespaced_name(text)?;
        Ok(Self { namespace, name })
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A plugin whose file the host pulls from an OCI registry into its plugins directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSource {
    /// The artifact.
    pub reference: OciReference,
    /// How often a tag is resolved again (`None`: once, when the host starts). A digest never
    /// changes, so a pinned source is pulled once whatever this says.
    pub pull_interval: Option<Duration>,
    /// Plain HTTP instead of HTTPS (a registry on loopback).
    pub insecure: bool,
    /// The `kubernetes.io/dockerconfigjson` Secret holding the registry's credentials.
    pub credentials: Option<SecretRef>,
}
