//! Where a plugin's configuration comes from: [`ConfigSource`]. Plain data read from the policy
//! file; reading a ConfigMap and checking against the plugin's schema is
//! [`plugin_config`](crate::plugin_config)'s.
//!
//! ```yaml
//! plugins:
//!   memcached:
//!     config: {image: "memcached:1.6.38-alpine"}   # inline, fixed for the host's life
//!   other:
//!     configMap: operators/other-config            # NAMESPACE/NAME, watched
//! ```
//!
//! A plugin has one source or none (`{}`): `config` and `configMap` together are refused, and
//! neither may appear under `defaults` (a configuration belongs to one plugin).

use serde_json::Value;

use crate::contract::{is_dns1123_label, names};

/// The keys of a ConfigMap the configuration is read from (exactly one of them): YAML, or
/// JSON.
pub const CONFIG_MAP_KEYS: [&str; 2] = ["config.yaml", "config.json"];

/// Where a plugin's configuration comes from.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum ConfigSource {
    /// No configuration: the plugin is given `{}`.
    #[default]
    None,
    /// `plugins.NAME.config`: a JSON object, fixed for the host's life.
    Inline(Value),
    /// `plugins.NAME.configMap`: the `config.yaml` or `config.json` key of a ConfigMap, watched.
    ConfigMap(ConfigMapRef),
}

/// A ConfigMap by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMapRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::Inline(_) => f.write_str("policy"),
            Self::ConfigMap(r) => write!(f, "ConfigMap {}/{}", r.namespace, r.name),
        }
    }
}

impl ConfigMapRef {
    /// Parse `NAMESPACE/NAME`.
    ///
    /// # Errors
    /// A message naming what is wrong: no `/`, an invalid namespace or name.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (namespace, name) = parse_namespaced_name(text)?;
        Ok(Self { namespace, name })
    }
}

impl ConfigSource {
    /// The source an entry's `config` and `configMap` fields name.
    ///
    /// # Errors
    /// A message for both set, a `config` that is not a mapping, or a malformed `configMap`.
    pub(super) fn from_entry(
        config: Option<&serde_json::Value>,
        config_map: Option<&str>,
    ) -> Result<Self, (&'static str, String)> {
        match (config, config_map) {
            (None, None) => Ok(Self::None),
            (Some(_), Some(_)) => {
                Err(("configMap", "config and configMap are exclusive: a plugin's configuration has one source".into()))
            }
            (Some(yaml), None) => {
                let value = serde_json::to_value(yaml).map_err(|e| ("config", format!("not representable as JSON: {e}")))?;
                if !value.is_object() {
                    return Err(("config", "must be a mapping (a JSON object)".into()));
                }
                Ok(Self::Inline(value))
            }
            (None, Some(text)) => ConfigMapRef::parse(text).map(Self::ConfigMap).map_err(|e| ("configMap", e)),
        }
    }
}

/// `NAMESPACE/NAME` split and checked: a namespace that is a DNS-1123 label, a name that is a
/// DNS-1123 subdomain.
///
/// # Errors
/// A message naming what is wrong: no `/`, an invalid namespace or name.
pub(crate) fn parse_namespaced_name(text: &str) -> Result<(String, String), String> {
    let Some((namespace, name)) = text.split_once('/') else {
        return Err(format!("{text:?} is not NAMESPACE/NAME"));
    };
    if !is_dns1123_label(namespace) {
        return Err(format!("namespace {namespace:?} is not {}", names::NAMESPACE_RULE));
    }
    if !names::is_dns1123_subdomain(name) {
        return Err(format!("name {name:?} is not {}", names::SUBDOMAIN_RULE));
    }
    Ok((namespace.to_owned(), name.to_owned()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn yaml(text: &str) -> serde_json::Value {
        crate::yaml::from_str(text).unwrap()
    }

    #[test]
    fn an_inline_mapping_becomes_a_json_object() {
        let source = ConfigSource::from_entry(Some(&yaml("{image: x, port: 1}")), None).unwrap();
        assert_eq!(source, ConfigSource::Inline(json!({"image": "x", "port": 1})));
        assert_eq!(source.to_string(), "policy");
    }

    #[test]
    fn a_config_map_is_namespace_slash_name() {
        let source = ConfigSource::from_entry(None, Some("ops/memcached-config")).unwrap();
        let want = ConfigMapRef { namespace: "ops".into(), name: "memcached-config".into() };
        assert_eq!(source, ConfigSource::ConfigMap(want));
        assert_eq!(source.to_string(), "ConfigMap ops/memcached-config");
    }

    #[test]
    fn malformed_sources_say_what_is_wrong() {
        assert_eq!(ConfigSource::from_entry(Some(&yaml("[1]")), None).unwrap_err().1, "must be a mapping (a JSON object)");
        assert_eq!(ConfigSource::from_entry(None, Some("x")).unwrap_err(), ("configMap", "\"x\" is not NAMESPACE/NAME".into()));
        assert!(ConfigSource::from_entry(None, Some("Ops/x")).unwrap_err().1.starts_with("namespace \"Ops\" is not a DNS-1123"));
        assert!(ConfigSource::from_entry(None, Some("ops/")).unwrap_err().1.starts_with("name \"\" is not a DNS-1123"));
        let both = ConfigSource::from_entry(Some(&yaml("{}")), Some("a/b")).unwrap_err();
        assert!(both.1.starts_with("config and configMap are exclusive"), "{both:?}");
    }

    #[test]
    fn no_source_is_none() {
        assert_eq!(ConfigSource::from_entry(None, None).unwrap(), ConfigSource::None);
        assert_eq!(ConfigSource::None.to_string(), "none");
    }
}
