//! The bounds of a plugin's configuration schema, checked on the parsed schema before any JSON
//! Schema compiler sees it: what compiling and validating against it may cost the host.
//!
//! - **Subschemas with every `$ref` followed** ([`MAX_EXPANDED_NODES`]): a schema of 3 KB whose
//!   definitions each `allOf` the previous one twice has 2^60 paths; a compiler or validator
//!   following them never ends. The count is computed once per location (memoized), so the
//!   check itself is linear in the schema's size; a `$ref` cycle counts once (recursion is
//!   the validator's business, bounded by the instance).
//! - **References** must resolve inside the schema (a JSON pointer, an `$anchor`, an `$id`):
//!   nothing is fetched, and a reference the check cannot follow is one whose cost it cannot
//!   bound.
//! - **Regular expressions** (`pattern` and `patternProperties` keys): at most
//!   [`MAX_PATTERNS`] of at most [`MAX_PATTERN_BYTES`] together; each is compiled under
//!   [`PATTERN_SIZE_LIMIT`] (a few hundred Unicode classes grew a host to 3.1 GB).
//!
//! The raw size ([`MAX_CONFIG_SCHEMA`](super::manifest::MAX_CONFIG_SCHEMA)) is checked on the
//! bytes the plugin returned, before they are parsed.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

/// Most subschemas (JSON values) of a schema counted with every `$ref` replaced by its target.
pub const MAX_EXPANDED_NODES: u64 = 100_000;
/// Deepest chain of nested values and references followed.
pub const MAX_DEPTH: usize = 512;
/// Most regular expressions (`pattern` values and `patternProperties` keys) in a schema.
pub const MAX_PATTERNS: usize = 64;
/// Most bytes of all the regular expressions of a schema together.
pub const MAX_PATTERN_BYTES: usize = 16 << 10;
/// Approximate size limit of one compiled regular expression, in bytes (and of its lazy DFA's
/// cache): the regex engine refuses a pattern that would need more.
pub const PATTERN_SIZE_LIMIT: usize = 256 << 10;

/// Why a configuration schema costs more than the host accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaBoundError {
    /// Following every `$ref` gives more subschemas than [`MAX_EXPANDED_NODES`].
    #[error("with every $ref followed it has more than {limit} subschemas")]
    TooManySubschemas {
        /// The limit.
        limit: u64,
    },
    /// Values and references nest deeper than [`MAX_DEPTH`].
    #[error("its subschemas and $refs nest deeper than {limit}")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// A `$ref` that does not resolve inside the schema.
    #[error("$ref {reference:?} does not resolve inside the schema (nothing is fetched)")]
    UnresolvedRef {
        /// The reference.
        reference: String,
    },
    /// More regular expressions than [`MAX_PATTERNS`].
    #[error("it has {count} regular expressions, more than the limit of {limit}")]
    TooManyPatterns {
        /// How many.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// The regular expressions add up to more than [`MAX_PATTERN_BYTES`].
    #[error("its regular expressions have {bytes} bytes, more than the limit of {limit}")]
    PatternBytes {
        /// Their bytes.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
}

/// Keywords that refer to another subschema.
///
/// Every value is walked, data (`enum`, `const`, `default`) included: a key means a keyword or a
/// property name depending on where it is, and a walk that skipped "data" by key would skip a
/// property named `default` holding a subschema. Counting data as subschemas only errs on the
/// safe side.
const REF_KEYWORDS: [&str; 3] = ["$ref", "$recursiveRef", "$dynamicRef"];

/// Check `schema` against every bound of this module.
///
/// # Errors
/// [`SchemaBoundError`]: the first bound it blows.
pub fn check(schema: &Value) -> Result<(), SchemaBoundError> {
    check_patterns(schema)?;
    let mut walk = Walk { root: schema, targets: targets(schema), memo: HashMap::new(), open: HashSet::new() };
    walk.size(schema, String::new(), 0).map(drop)
}

/// Every `pattern` value and `patternProperties` key, counted and measured.
fn check_patterns(schema: &Value) -> Result<(), SchemaBoundError> {
    let (mut count, mut bytes) = (0usize, 0usize);
    let mut stack = vec![schema];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    match (key.as_str(), child) {
                        ("pattern", Value::String(p)) => (count, bytes) = (count + 1, bytes + p.len()),
                        ("patternProperties", Value::Object(patterns)) => {
                            count += patterns.len();
                            bytes += patterns.keys().map(String::len).sum::<usize>();
                        }
                        _ => {}
                    }
                    stack.push(child);
                }
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    if count > MAX_PATTERNS {
        return Err(SchemaBoundError::TooManyPatterns { count, limit: MAX_PATTERNS });
    }
    if bytes > MAX_PATTERN_BYTES {
        return Err(SchemaBoundError::PatternBytes { bytes, limit: MAX_PATTERN_BYTES });
    }
    Ok(())
}

/// The JSON pointers of the locations named by `$id`, `$anchor` and `$dynamicAnchor` (a draft-7
/// `$id: "#name"` is an anchor), by the name a `$ref` uses: `#name` for anchors, the id itself.
fn targets(schema: &Value) -> HashMap<String, String> {
    let mut found = HashMap::new();
    let mut stack = vec![(schema, String::new())];
    while let Some((value, pointer)) = stack.pop() {
        match value {
            Value::Object(map) => {
                for key in ["$anchor", "$dynamicAnchor"] {
                    if let Some(Value::String(name)) = map.get(key) {
                        found.insert(format!("#{name}"), pointer.clone());
                    }
                }
                if let Some(Value::String(id)) = map.get("$id") {
                    found.insert(id.clone(), pointer.clone());
                }
                for (key, child) in map {
                    stack.push((child, format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"))));
                }
            }
            Value::Array(items) => stack.extend(items.iter().enumerate().map(|(i, v)| (v, format!("{pointer}/{i}")))),
            _ => {}
        }
    }
    found
}

/// The expanded size of every location, computed once each.
struct Walk<'a> {
    root: &'a Value,
    targets: HashMap<String, String>,
    memo: HashMap<String, u64>,
    /// Locations being measured: a `$ref` back to one of them is a cycle, counted once.
    open: HashSet<String>,
}

impl Walk<'_> {
    fn size(&mut self, value: &Value, pointer: String, depth: usize) -> Result<u64, SchemaBoundError> {
        if depth > MAX_DEPTH {
            return Err(SchemaBoundError::TooDeep { limit: MAX_DEPTH });
        }
        if let Some(size) = self.memo.get(&pointer) {
            return Ok(*size);
        }
        if !self.open.insert(pointer.clone()) {
            return Ok(1);
        }
        let mut total: u64 = 1;
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    let size = match child {
                        Value::String(reference) if REF_KEYWORDS.contains(&key.as_str()) => {
                            let target = self.resolve(reference)?;
                            let root = self.root;
                            let target_value = root.pointer(&target).ok_or_else(|| unresolved(reference))?;
                            self.size(target_value, target, depth + 1)?
                        }
                        _ => self.size(child, format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1")), depth + 1)?,
                    };
                    total = total.saturating_add(size);
                    if total > MAX_EXPANDED_NODES {
                        return Err(SchemaBoundError::TooManySubschemas { limit: MAX_EXPANDED_NODES });
                    }
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    total = total.saturating_add(self.size(item, format!("{pointer}/{i}"), depth + 1)?);
                    if total > MAX_EXPANDED_NODES {
                        return Err(SchemaBoundError::TooManySubschemas { limit: MAX_EXPANDED_NODES });
                    }
                }
            }
            _ => {}
        }
        self.open.remove(&pointer);
        self.memo.insert(pointer, total);
        Ok(total)
    }

    /// The JSON pointer (from the root) `reference` names.
    fn resolve(&self, reference: &str) -> Result<String, SchemaBoundError> {
        if let Some(pointer) = self.targets.get(reference) {
            return Ok(pointer.clone());
        }
        let (base, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let base_pointer = match base {
            "" => String::new(),
            id => self.targets.get(id).cloned().ok_or_else(|| unresolved(reference))?,
        };
        if fragment.is_empty() || fragment.starts_with('/') {
            return Ok(format!("{base_pointer}{}", percent_decode(fragment)));
        }
        self.targets.get(&format!("#{fragment}")).cloned().ok_or_else(|| unresolved(reference))
    }
}

fn unresolved(reference: &str) -> SchemaBoundError {
    SchemaBoundError::UnresolvedRef { reference: reference.to_owned() }
}

/// `%XX` escapes of a URI fragment decoded (a JSON pointer in a `$ref` is URI-encoded).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Definitions `d0`..`d<levels>`, each `allOf` the previous one twice: 2^levels paths.
    pub(crate) fn doubling(levels: usize) -> Value {
        let mut defs = serde_json::Map::new();
        defs.insert("d0".into(), json!({"type": "string"}));
        for i in 1..=levels {
            let previous = format!("#/$defs/d{}", i - 1);
            defs.insert(format!("d{i}"), json!({"allOf": [{"$ref": previous}, {"$ref": previous}]}));
        }
        json!({"type": "object", "properties": {"x": {"$ref": format!("#/$defs/d{levels}")}}, "$defs": defs})
    }

    #[test]
    fn an_ordinary_schema_is_within_bounds() {
        let schema = json!({
            "type": "object",
            "properties": {
                "image": {"type": "string", "pattern": "^[a-z0-9./:-]+$"},
                "port": {"$ref": "#/$defs/port"},
                "tags": {"type": "array", "items": {"$ref": "#tag"}},
                "node": {"$ref": "#/$defs/node"},
            },
            "$defs": {
                "port": {"type": "integer", "minimum": 1, "enum": [80, 443]},
                "tag": {"$anchor": "tag", "type": "string"},
                "node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}},
            },
        });
        assert_eq!(check(&schema), Ok(()));
        assert_eq!(check(&doubling(10)), Ok(()), "2^10 paths is fine");
    }

    #[test]
    fn a_schema_with_exponentially_many_ref_paths_is_refused_at_once() {
        let started = std::time::Instant::now();
        assert_eq!(check(&doubling(60)), Err(SchemaBoundError::TooManySubschemas { limit: MAX_EXPANDED_NODES }));
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?}", started.elapsed());
        assert!(serde_json::to_string(&doubling(60)).unwrap().len() < 4096, "the attack is a few KB");
    }

    #[test]
    fn a_ref_that_does_not_resolve_inside_the_schema_is_refused() {
        for reference in ["https://example.com/s.json", "#/$defs/missing", "#nowhere", "other.json#/a"] {
            let schema = json!({"properties": {"a": {"$ref": reference}}, "$defs": {}});
            assert_eq!(check(&schema), Err(SchemaBoundError::UnresolvedRef { reference: reference.into() }), "{reference}");
        }
        let by_id = json!({"$defs": {"a": {"$id": "urn:a", "$defs": {"b": {"type": "string"}}}},
            "properties": {"x": {"$ref": "urn:a"}, "y": {"$ref": "urn:a#/$defs/b"}, "z": {"$ref": "#/%24defs/a"}}});
        assert_eq!(check(&by_id), Ok(()));
    }

    #[test]
    fn too_many_or_too_large_regular_expressions_are_refused() {
        let properties: serde_json::Map<String, Value> =
            (0..=MAX_PATTERNS).map(|i| (format!("p{i}"), json!({"type": "string", "pattern": "\\w+"}))).collect();
        assert_eq!(
            check(&json!({"properties": properties})),
            Err(SchemaBoundError::TooManyPatterns { count: MAX_PATTERNS + 1, limit: MAX_PATTERNS })
        );
        let keys: serde_json::Map<String, Value> = (0..40).map(|i| (format!("^\\p{{L}}{i}$"), json!({}))).collect();
        assert_eq!(check(&json!({"patternProperties": keys})), Ok(()));
        let long = "\\p{L}".repeat(MAX_PATTERN_BYTES / 5 + 1);
        assert!(matches!(check(&json!({"pattern": long})), Err(SchemaBoundError::PatternBytes { .. })));
        assert!(
            matches!(
                check(&json!({"enum": [{"pattern": "x".repeat(MAX_PATTERN_BYTES * 2)}]})),
                Err(SchemaBoundError::PatternBytes { .. })
            ),
            "data is counted too: on the safe side"
        );
    }

    #[test]
    fn a_bomb_under_a_property_named_like_a_data_keyword_is_still_found() {
        let mut bomb = doubling(60);
        let hidden = bomb["properties"]["x"].take();
        bomb["properties"] = json!({"default": hidden, "enum": {"type": "string"}});
        assert_eq!(check(&bomb), Err(SchemaBoundError::TooManySubschemas { limit: MAX_EXPANDED_NODES }));
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_refused_without_overflowing_the_stack() {
        let mut defs = serde_json::Map::new();
        for i in 0..=MAX_DEPTH {
            defs.insert(format!("d{i}"), json!({"$ref": format!("#/$defs/d{}", i + 1)}));
        }
        defs.insert(format!("d{}", MAX_DEPTH + 1), json!({}));
        assert_eq!(check(&json!({"$ref": "#/$defs/d0", "$defs": defs})), Err(SchemaBoundError::TooDeep { limit: MAX_DEPTH }));
    }
}
