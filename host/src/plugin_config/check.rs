//! A plugin's configuration checked against its manifest: [`check`] validates a JSON object
//! against the declared `configSchema`, [`parse_text`] and [`from_config_map`] read one from a
//! file or a ConfigMap. `wasmop run` ([`super::watch`]), `wasmop reconcile --config`
//! and `wasmop inspect` all go through these, so they agree on what is valid.
//!
//! A plugin that declares no schema takes no configuration: `{}` (the default) is accepted,
//! anything else is refused, because a setting nothing reads is a mistake (a typo in the
//! plugin name, or the wrong plugin) that should not pass silently.
//!
//! The schema is compiled only when the configuration needs it: `{}` against a schema whose
//! top-level keywords cannot reject an empty object (`type: object`, `properties`,
//! `additionalProperties`, annotations) is accepted as is, so a host whose plugins run with
//! their default configuration never runs the JSON Schema compiler (about 1.3 MiB of the
//! executable's code that would otherwise be paged in at every start). Such a
//! schema is compiled, and so checked, with the first configuration that is not empty.

use serde_json::Value;

use crate::contract::Manifest;
use crate::contract::schema_bounds::{self, PATTERN_SIZE_LIMIT};
use crate::policy::{CONFIG_MAP_KEYS, ConfigSource};

/// Why a configuration is not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The plugin's `configSchema` is not a JSON Schema the validator accepts (a `$ref` to
    /// another document counts: nothing is fetched).
    #[error("plugin {plugin} declares a configSchema that is not a valid JSON Schema: {message}")]
    BadSchema {
        /// The plugin.
        plugin: String,
        /// The validator's complaint.
        message: String,
    },
    /// A non-empty configuration for a plugin that declares no schema.
    #[error(
        "plugin {plugin} declares no configSchema, so it takes no configuration (remove it, or use a version that declares one)"
    )]
    NoSchema {
        /// The plugin.
        plugin: String,
    },
    /// The configuration does not match the schema: the validator's first error.
    #[error("invalid config at {path}: {message}")]
    Invalid {
        /// JSON pointer of the offending value (`/` for the whole object).
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// The text is not YAML (or JSON), or not an object.
    #[error("{from}: {message}")]
    Syntax {
        /// Where the text came from (a file, a ConfigMap key).
        from: String,
        /// What is wrong.
        message: String,
    },
    /// The ConfigMap does not hold exactly one of [`CONFIG_MAP_KEYS`].
    #[error("{from}: {message}")]
    Key {
        /// The ConfigMap.
        from: String,
        /// Which keys it has.
        message: String,
    },
    /// The ConfigMap does not exist, or could not be read.
    #[error("{from}: {message}")]
    Unavailable {
        /// The ConfigMap.
        from: String,
        /// Not found, or the API error.
        message: String,
    },
}

/// Check `config` against the configuration schema `manifest` declares.
///
/// `{}` against a schema that [cannot reject it](accepts_empty_object) is accepted without
/// compiling the schema: a schema with an error below such a top level (in `properties`) is
/// reported with the first configuration that is not empty.
///
/// # Errors
/// [`ConfigError::Invalid`] with the validator's first error (its path and message),
/// [`ConfigError::NoSchema`] for a non-empty configuration without a schema,
/// [`ConfigError::BadSchema`] when the schema does not compile.
pub fn check(manifest: &Manifest, config: &Value) -> Result<(), ConfigError> {
    let empty = config.as_object().is_some_and(serde_json::Map::is_empty);
    let Some(schema) = &manifest.config_schema else {
        return if empty { Ok(()) } else { Err(ConfigError::NoSchema { plugin: manifest.name.clone() }) };
    };
    if empty && accepts_empty_object(schema) {
        return Ok(());
    }
    let validator = compile(manifest, schema)?;
    match validator.iter_errors(config).next() {
        None => Ok(()),
        Some(error) => {
            let path = error.instance_path().as_str();
            Err(ConfigError::Invalid { path: if path.is_empty() { "/".into() } else { path.into() }, message: error.to_string() })
        }
    }
}

/// Compile the configuration schema `manifest` declares (if any), to report a broken one before
/// a configuration needs it: [`check`] compiles it only then. `wasmop inspect` calls this.
///
/// # Errors
/// [`ConfigError::BadSchema`] when the schema does not compile.
pub fn compile_schema(manifest: &Manifest) -> Result<(), ConfigError> {
    let Some(schema) = &manifest.config_schema else { return Ok(()) };
    compile(manifest, schema).map(drop)
}

/// The validator of `schema`, the configuration schema of `manifest`: within the host's
/// [bounds](crate::contract::schema_bounds) (a manifest loaded by the runtime was checked at
/// load; this holds for every other caller), each regular expression compiled under
/// [`PATTERN_SIZE_LIMIT`].
fn compile(manifest: &Manifest, schema: &Value) -> Result<jsonschema::Validator, ConfigError> {
    let bad = |message: String| ConfigError::BadSchema { plugin: manifest.name.clone(), message };
    schema_bounds::check(schema).map_err(|e| bad(e.to_string()))?;
    let patterns = jsonschema::PatternOptions::fancy_regex().size_limit(PATTERN_SIZE_LIMIT).dfa_size_limit(PATTERN_SIZE_LIMIT);
    jsonschema::options().with_pattern_options(patterns).build(schema).map_err(|e| bad(e.to_string()))
}

/// Top-level keywords of a schema that cannot make `{}` invalid: they constrain properties an
/// empty object does not have, or only annotate.
const EMPTY_OBJECT_KEYWORDS: &[&str] =
    &["properties", "patternProperties", "additionalProperties", "title", "description", "default", "examples", "$comment"];

/// Whether `{}` is valid against `schema` whatever its subschemas say: an object whose `type`
/// is `"object"` (or a list holding it) and whose other keywords are all
/// [`EMPTY_OBJECT_KEYWORDS`]. Anything else (`required`, `minProperties`, `$ref`, `allOf`,
/// `$schema`, no `type`…) answers `false`: the validator decides.
fn accepts_empty_object(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else { return false };
    let object_type = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => false,
    };
    object_type && map.keys().all(|key| key == "type" || EMPTY_OBJECT_KEYWORDS.contains(&key.as_str()))
}

/// The configuration `source` gives without a cluster: `{}` for none, the inline object;
/// `None` for a ConfigMap (only `wasmop run` reads it).
pub fn offline(source: &ConfigSource) -> Option<Value> {
    match source {
        ConfigSource::None => Some(Value::Object(Default::default())),
        ConfigSource::Inline(config) => Some(config.clone()),
        ConfigSource::ConfigMap(_) => None,
    }
}

/// Parse a configuration document: YAML (JSON is YAML) holding one object. `from` names it
/// in errors. An empty document is `{}`.
///
/// # Errors
/// [`ConfigError::Syntax`] for YAML errors and anything but an object.
pub fn parse_text(text: &str, from: &str) -> Result<Value, ConfigError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    let value: Value = crate::yaml::from_str(text)
        .map_err(|e| ConfigError::Syntax { from: from.to_owned(), message: format!("not valid YAML or JSON: {e}") })?;
    if !value.is_object() {
        return Err(ConfigError::Syntax { from: from.to_owned(), message: "the configuration must be an object".into() });
    }
    Ok(value)
}

/// The configuration a ConfigMap holds: its `config.yaml` or `config.json` key (exactly one).
/// `from` names it in errors (`ConfigMap ops/memcached-config`).
///
/// # Errors
/// [`ConfigError::Key`] when neither or both keys are present, [`ConfigError::Syntax`] when
/// the text does not parse.
pub fn from_config_map(data: Option<&std::collections::BTreeMap<String, String>>, from: &str) -> Result<Value, ConfigError> {
    let present: Vec<(&str, &String)> =
        CONFIG_MAP_KEYS.iter().filter_map(|key| data.and_then(|d| d.get(*key)).map(|text| (*key, text))).collect();
    match present.as_slice() {
        [(key, text)] => parse_text(text, &format!("{from} key {key}")),
        [] => Err(ConfigError::Key {
            from: from.to_owned(),
            message: format!("has no data key {} (the configuration goes there)", CONFIG_MAP_KEYS.join(" or ")),
        }),
        _ => Err(ConfigError::Key {
            from: from.to_owned(),
            message: format!("has both {}: keep one", CONFIG_MAP_KEYS.join(" and ")),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::contract::manifest::fixtures;

    fn memcached() -> Manifest {
        fixtures::memcached("app=memcached")
    }

    fn with_schema(schema: Value) -> Manifest {
        Manifest { config_schema: Some(schema), ..memcached() }
    }

    fn image_and_port() -> Manifest {
        with_schema(json!({
            "type": "object",
            "properties": {"image": {"type": "string", "minLength": 1}, "port": {"type": "integer", "minimum": 1, "maximum": 65535}},
            "additionalProperties": false,
        }))
    }

    #[test]
    fn a_config_matching_the_schema_is_valid() {
        assert_eq!(check(&image_and_port(), &json!({"image": "memcached:1.6", "port": 11211})), Ok(()));
        assert_eq!(check(&image_and_port(), &json!({})), Ok(()));
    }

    #[test]
    fn the_first_error_names_its_path() {
        let err = check(&image_and_port(), &json!({"image": "m", "port": "high"})).unwrap_err();
        assert_eq!(err, ConfigError::Invalid { path: "/port".into(), message: "\"high\" is not of type \"integer\"".into() });
        assert_eq!(err.to_string(), "invalid config at /port: \"high\" is not of type \"integer\"");
        let err = check(&image_and_port(), &json!({"imag": "m"})).unwrap_err();
        assert!(matches!(&err, ConfigError::Invalid { path, .. } if path == "/"), "{err}");
        assert!(err.to_string().contains("imag"), "{err}");
    }

    #[test]
    fn without_a_schema_only_the_empty_config_is_accepted() {
        assert_eq!(check(&memcached(), &json!({})), Ok(()));
        let err = check(&memcached(), &json!({"image": "x"})).unwrap_err();
        assert_eq!(err, ConfigError::NoSchema { plugin: "memcached".into() });
    }

    #[test]
    fn a_schema_that_does_not_compile_or_refers_elsewhere_is_refused() {
        let err = check(&with_schema(json!({"type": "no-such-type"})), &json!({})).unwrap_err();
        assert!(matches!(err, ConfigError::BadSchema { .. }), "{err}");
        let remote = with_schema(json!({"$ref": "https://example.com/schema.json"}));
        assert!(matches!(check(&remote, &json!({})), Err(ConfigError::BadSchema { .. })));
        let file = with_schema(json!({"$ref": "file:///etc/passwd"}));
        assert!(matches!(check(&file, &json!({})), Err(ConfigError::BadSchema { .. })));
    }

    #[test]
    fn an_empty_config_against_an_object_schema_is_accepted_without_compiling_it() {
        let nested_error = with_schema(json!({"type": "object", "properties": {"port": {"type": "no-such-type"}}}));
        assert_eq!(check(&nested_error, &json!({})), Ok(()));
        assert!(matches!(check(&nested_error, &json!({"port": 1})), Err(ConfigError::BadSchema { .. })));
        assert_eq!(check(&image_and_port(), &json!({})), Ok(()));
        assert!(matches!(compile_schema(&nested_error), Err(ConfigError::BadSchema { .. })), "inspect still reports it");
        assert_eq!(compile_schema(&image_and_port()), Ok(()));
    }

    #[test]
    fn an_empty_config_is_checked_when_the_schema_could_reject_it() {
        for schema in [
            json!({"type": "object", "required": ["image"]}),
            json!({"type": "object", "minProperties": 1}),
            json!({"type": "array", "properties": {}}),
            json!({"type": ["object"], "not": {"type": "object"}}),
        ] {
            let err = check(&with_schema(schema.clone()), &json!({})).unwrap_err();
            assert!(matches!(err, ConfigError::Invalid { .. }), "{schema}: {err}");
        }
        let unknown_draft = with_schema(json!({"$schema": "https://example.com/no-such-draft", "type": "object"}));
        assert!(matches!(check(&unknown_draft, &json!({})), Err(ConfigError::BadSchema { .. })));
    }

    #[test]
    fn a_schema_beyond_the_hosts_bounds_is_refused_before_compiling() {
        let mut defs = serde_json::Map::new();
        defs.insert("d0".into(), json!({"type": "string"}));
        for i in 1..=60 {
            let previous = format!("#/$defs/d{}", i - 1);
            defs.insert(format!("d{i}"), json!({"allOf": [{"$ref": previous}, {"$ref": previous}]}));
        }
        let bomb = with_schema(json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/d60"}}, "$defs": defs}));
        let started = std::time::Instant::now();
        let err = check(&bomb, &json!({"x": "y"})).unwrap_err();
        assert!(err.to_string().contains("with every $ref followed it has more than 100000 subschemas"), "{err}");
        assert!(matches!(compile_schema(&bomb), Err(ConfigError::BadSchema { .. })));
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
    }

    #[test]
    fn a_regular_expression_too_large_to_compile_small_is_refused() {
        // Small as text, large compiled: `\p{L}` is a Unicode class of hundreds of ranges.
        let schema =
            with_schema(json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "[\\p{L}\\p{N}]{20}"}}}));
        let err = check(&schema, &json!({"a": "x"})).unwrap_err();
        assert!(matches!(err, ConfigError::BadSchema { .. }), "{err}");
    }

    #[test]
    fn offline_sources_are_the_empty_or_inline_object() {
        assert_eq!(offline(&ConfigSource::None), Some(json!({})));
        assert_eq!(offline(&ConfigSource::Inline(json!({"a": 1}))), Some(json!({"a": 1})));
        let at = crate::policy::ConfigMapRef::parse("ops/c").unwrap();
        assert_eq!(offline(&ConfigSource::ConfigMap(at)), None);
    }

    #[test]
    fn text_is_yaml_or_json_holding_an_object() {
        assert_eq!(parse_text("image: x\nport: 1\n", "f").unwrap(), json!({"image": "x", "port": 1}));
        assert_eq!(parse_text("{\"image\": \"x\"}", "f").unwrap(), json!({"image": "x"}));
        assert_eq!(parse_text("  \n", "f").unwrap(), json!({}));
        assert_eq!(parse_text("- 1", "f.yaml").unwrap_err().to_string(), "f.yaml: the configuration must be an object");
        assert!(parse_text("a: [", "f.yaml").unwrap_err().to_string().starts_with("f.yaml: not valid YAML or JSON"));
    }

    #[test]
    fn a_config_map_holds_exactly_one_config_key() {
        let data =
            |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect::<BTreeMap<_, _>>();
        let from = "ConfigMap ops/c";
        assert_eq!(from_config_map(Some(&data(&[("config.yaml", "image: x")])), from).unwrap(), json!({"image": "x"}));
        assert_eq!(from_config_map(Some(&data(&[("config.json", "{\"port\": 2}")])), from).unwrap(), json!({"port": 2}));
        let none = from_config_map(Some(&data(&[("other", "")])), from).unwrap_err();
        assert_eq!(
            none.to_string(),
            "ConfigMap ops/c: has no data key config.yaml or config.json (the configuration goes there)"
        );
        assert!(matches!(from_config_map(None, from), Err(ConfigError::Key { .. })));
        let both = from_config_map(Some(&data(&[("config.yaml", ""), ("config.json", "{}")])), from).unwrap_err();
        assert_eq!(both.to_string(), "ConfigMap ops/c: has both config.yaml and config.json: keep one");
        let bad = from_config_map(Some(&data(&[("config.json", "[")])), from).unwrap_err();
        assert!(bad.to_string().starts_with("ConfigMap ops/c key config.json: not valid YAML"), "{bad}");
    }
}
