//! Conversions between the generated bindings and [`crate::contract`] types, one module per
//! WIT version.

pub(super) mod v0_1;
pub(super) mod v0_2;
pub(super) mod v0_3;

use crate::contract::ManifestError;
use crate::contract::manifest::MAX_CONFIG_SCHEMA;

/// The configuration schema a plugin returned as text, its size checked on the raw bytes before
/// anything parses it (a 20 MB schema once cost the host 374 MB to parse and then refuse).
fn config_schema(text: &str) -> Result<serde_json::Value, ManifestError> {
    if text.len() > MAX_CONFIG_SCHEMA {
        return Err(ManifestError::TooLarge { field: "configSchema".into(), size: text.len(), limit: MAX_CONFIG_SCHEMA });
    }
    serde_json::from_str(text).map_err(|e| ManifestError::InvalidConfigSchema(format!("{e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_over_the_limit_is_refused_on_its_bytes_before_parsing() {
        // Not JSON at all: a parse would fail differently, so the size was checked first.
        let huge = "[".repeat(MAX_CONFIG_SCHEMA + 1);
        assert_eq!(
            config_schema(&huge),
            Err(ManifestError::TooLarge { field: "configSchema".into(), size: MAX_CONFIG_SCHEMA + 1, limit: MAX_CONFIG_SCHEMA })
        );
        assert_eq!(config_schema("{\"type\": \"object\"}"), Ok(serde_json::json!({"type": "object"})));
        assert!(matches!(config_schema("{"), Err(ManifestError::InvalidConfigSchema(_))));
    }
}
