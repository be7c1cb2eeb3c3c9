//! Label selectors in kubectl syntax: [`LabelSelector`].

use std::collections::BTreeSet;
use std::fmt;

/// Why a label selector did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A requirement has no key.
    #[error("label selector {selector:?}: empty key in requirement {requirement:?}")]
    EmptyKey {
        /// The whole selector.
        selector: String,
        /// The offending requirement.
        requirement: String,
    },
    /// A set-based requirement (`in`, `notin`) is not closed or has no values.
    #[error("label selector {selector:?}: malformed set requirement {requirement:?}")]
    MalformedSet {
        /// The whole selector.
        selector: String,
        /// The offending requirement.
        requirement: String,
    },
    /// A key or value contains characters a label cannot have.
    #[error("label selector {selector:?}: invalid label key or value in {requirement:?}")]
    InvalidLabel {
        /// The whole selector.
        selector: String,
        /// The offending requirement.
        requirement: String,
    },
}

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector: all requirements must hold. The empty selector matches everything.
///
/// ```
/// use wasmop_types::LabelSelector;
/// let sel = LabelSelector::parse("app=memcached, tier in (cache, db), !canary").unwrap();
/// let labels = serde_json::json!({"app": "memcached", "tier": "cache"});
/// assert!(sel.matches(labels.as_object()));
/// assert!(!sel.matches(None));
/// assert!(LabelSelector::parse("").unwrap().matches(None));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parse kubectl selector syntax: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`,
    /// `k`, `!k`, separated by commas.
    ///
    /// # Errors
    /// [`SelectorError`] naming the requirement that does not parse.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for raw in split_top_level(selector) {
            let req = raw.trim();
            if req.is_empty() {
                if selector.trim().is_empty() {
                    continue;
                }
                return Err(SelectorError::EmptyKey { selector: selector.into(), requirement: raw.into() });
            }
            requirements.push(parse_requirement(selector, req)?);
        }
        Ok(Self { requirements })
    }

    /// Whether an object's labels (`metadata.labels`) satisfy every requirement.
    pub fn matches(&self, labels: Option<&serde_json::Map<String, serde_json::Value>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(|v| v.as_str());
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.contains(x)),
            Requirement::NotIn(k, vs) => !get(k).is_some_and(|x| vs.contains(x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }

    /// Whether a JSON object's `metadata.labels` satisfy the selector.
    pub fn matches_object(&self, object: &serde_json::Value) -> bool {
        // `get` rather than `Value::pointer`, which allocates a string per path segment: this
        // runs once per candidate object of every reconcile.
        self.matches(object.get("metadata").and_then(|m| m.get("labels")).and_then(|l| l.as_object()))
    }

    /// The labels the selector requires to have one value (`k=v`, `k==v`, `k in (v)`), as
    /// `(key, value)` in the selector's order: every object it matches carries each of them, so
    /// an index by one of these labels holds every match.
    ///
    /// ```
    /// use wasmop_types::LabelSelector;
    /// let sel = LabelSelector::parse("app=web, tier in (db), zone in (a,b), !canary").unwrap();
    /// assert_eq!(sel.required_values().collect::<Vec<_>>(), [("app", "web"), ("tier", "db")]);
    /// ```
    pub fn required_values(&self) -> impl Iterator<Item = (&str, &str)> {
        self.requirements.iter().filter_map(|r| match r {
            Requirement::Equals(k, v) => Some((k.as_str(), v.as_str())),
            Requirement::In(k, vs) if vs.len() == 1 => vs.first().map(|v| (k.as_str(), v.as_str())),
            _ => None,
        })
    }

    /// Whether this selector has no requirement (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |vs: &BTreeSet<String>| vs.iter().cloned().collect::<Vec<_>>().join(",");
        let parts: Vec<String> = self
            .requirements
            .iter()
            .map(|r| match r {
                Requirement::Equals(k, v) => format!("{k}={v}"),
                Requirement::NotEquals(k, v) => format!("{k}!={v}"),
                Requirement::In(k, vs) => format!("{k} in ({})", set(vs)),
                Requirement::NotIn(k, vs) => format!("{k} notin ({})", set(vs)),
                Requirement::Exists(k) => k.clone(),
                Requirement::DoesNotExist(k) => format!("!{k}"),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// Split on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn parse_requirement(selector: &str, req: &str) -> Result<Requirement, SelectorError> {
    let err_label = || SelectorError::InvalidLabel { selector: selector.into(), requirement: req.into() };
    let key = |k: &str| -> Result<String, SelectorError> {
        let k = k.trim();
        if k.is_empty() {
            return Err(SelectorError::EmptyKey { selector: selector.into(), requirement: req.into() });
        }
        if is_label_key(k) { Ok(k.to_owned()) } else { Err(err_label()) }
    };
    let value = |v: &str| -> Result<String, SelectorError> {
        let v = v.trim();
        if is_label_value(v) { Ok(v.to_owned()) } else { Err(err_label()) }
    };
    if let Some((k, v)) = req.split_once("!=") {
        return Ok(Requirement::NotEquals(key(k)?, value(v)?));
    }
    if let Some((k, v)) = req.split_once("==").or_else(|| req.split_once('=')) {
        return Ok(Requirement::Equals(key(k)?, value(v)?));
    }
    let words: Vec<&str> = req.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let rest = words[1].trim_start();
        let (op, set) = if let Some(s) = rest.strip_prefix("notin") {
            ("notin", s)
        } else if let Some(s) = rest.strip_prefix("in") {
            ("in", s)
        } else {
            return Err(err_label());
        };
        let malformed = || SelectorError::MalformedSet { selector: selector.into(), requirement: req.into() };
        let inner = set.trim().strip_prefix('(').and_then(|s| s.strip_suffix(')')).ok_or_else(malformed)?;
        let values = inner.split(',').map(value).collect::<Result<BTreeSet<_>, _>>()?;
        if values.is_empty() || inner.trim().is_empty() {
            return Err(malformed());
        }
        let k = key(words[0])?;
        return Ok(if op == "in" { Requirement::In(k, values) } else { Requirement::NotIn(k, values) });
    }
    match req.strip_prefix('!') {
        Some(k) => Ok(Requirement::DoesNotExist(key(k)?)),
        None => Ok(Requirement::Exists(key(req)?)),
    }
}

/// A label key: optional DNS-subdomain prefix and `/`, then a name of alphanumerics, `-`,
/// `_`, `.`.
fn is_label_key(k: &str) -> bool {
    let name = match k.split_once('/') {
        None => k,
        Some((prefix, name)) => {
            let dns = |p: &str| {
                !p.is_empty()
                    && p.len() <= 253
                    && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
                    && p.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
                    && p.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
            };
            if dns(prefix) { name } else { "" }
        }
    };
    !name.is_empty() && name.len() <= 63 && is_label_value(name)
}

/// A label value: empty, or alphanumerics with `-`, `_`, `.` inside, at most 63 characters.
fn is_label_value(v: &str) -> bool {
    v.len() <= 63
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && v.bytes().next().is_none_or(|b| b.is_ascii_alphanumeric())
        && v.bytes().last().is_none_or(|b| b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn equality_and_inequality() {
        let sel = LabelSelector::parse("app=memcached,env!=prod").unwrap();
        assert!(sel.matches(Some(&labels(json!({"app": "memcached"})))));
        assert!(!sel.matches(Some(&labels(json!({"app": "memcached", "env": "prod"})))));
        assert!(LabelSelector::parse("app==x").unwrap().matches(Some(&labels(json!({"app": "x"})))));
    }

    #[test]
    fn set_based_requirements() {
        let sel = LabelSelector::parse("tier in (cache, db),zone notin (a)").unwrap();
        assert!(sel.matches(Some(&labels(json!({"tier": "db", "zone": "b"})))));
        assert!(!sel.matches(Some(&labels(json!({"tier": "web"})))));
        assert!(!sel.matches(Some(&labels(json!({"tier": "db", "zone": "a"})))));
    }

    #[test]
    fn existence_requirements() {
        let sel = LabelSelector::parse("app,!canary").unwrap();
        assert!(sel.matches(Some(&labels(json!({"app": ""})))));
        assert!(!sel.matches(Some(&labels(json!({"app": "x", "canary": "1"})))));
        assert!(!sel.matches(None));
    }

    #[test]
    fn malformed_selectors_are_errors() {
        assert!(matches!(LabelSelector::parse("a in (b"), Err(SelectorError::MalformedSet { .. })));
        assert!(matches!(LabelSelector::parse("=b"), Err(SelectorError::EmptyKey { .. })));
        assert!(matches!(LabelSelector::parse("a=b,,c"), Err(SelectorError::EmptyKey { .. })));
        assert!(matches!(LabelSelector::parse("a=$(x)"), Err(SelectorError::InvalidLabel { .. })));
        assert!(matches!(LabelSelector::parse("a in ()"), Err(SelectorError::MalformedSet { .. })));
    }

    #[test]
    fn display_round_trips() {
        let text = "app=x,tier in (a,b),!canary";
        assert_eq!(LabelSelector::parse(text).unwrap().to_string(), text);
        assert!(LabelSelector::parse("  ").unwrap().is_empty());
    }

    #[test]
    fn prefixed_keys_are_labels() {
        assert!(LabelSelector::parse("app.kubernetes.io/name=x").is_ok());
        assert!(LabelSelector::parse("/name=x").is_err());
        assert!(LabelSelector::parse("a/b/c=x").is_err());
    }

    #[test]
    fn prefixes_must_be_dns_subdomains() {
        // Found by the property test: "(=/a==" used to parse as key "(=/a".
        assert!(LabelSelector::parse("(=/a==").is_err());
        assert!(LabelSelector::parse("Bad_Prefix/a=b").is_err());
    }
}
