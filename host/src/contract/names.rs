//! Kubernetes' rules for names, namespaces, label keys and label values, as its API server
//! checks them (`k8s.io/apimachinery/pkg/util/validation`). The host checks a plugin's output
//! against them before writing, so a refusal names the field instead of surfacing as an API
//! error on one object halfway through a reconcile.

/// Longest DNS-1123 subdomain (object names, label key prefixes).
pub const MAX_SUBDOMAIN: usize = 253;
/// Longest label selector a manifest may declare (a related kind's, a webhook's namespace or
/// object selector), in bytes.
pub const MAX_SELECTOR: usize = 1024;
/// Longest label value, and longest name part of a label key.
pub const MAX_LABEL_VALUE: usize = 63;
/// Longest total size of an object's annotations, keys and values together (Kubernetes'
/// `TotalAnnotationSizeLimitB`).
pub const MAX_ANNOTATIONS: usize = 256 << 10;
/// API group whose kinds accept path-segment names such as `system:controller:foo`.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// What a name must look like, for error messages.
pub const SUBDOMAIN_RULE: &str =
    "a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending alphanumeric, at most 253 characters)";
/// What a path-segment name (RBAC kinds) must look like.
pub const PATH_SEGMENT_RULE: &str = "a path segment name (not '.' or '..', no '/' or '%', at most 253 characters)";
/// What a namespace must look like.
pub const NAMESPACE_RULE: &str =
    "a DNS-1123 label (lowercase letters, digits and '-', starting and ending alphanumeric, at most 63 characters)";
/// What a label or annotation key must look like.
pub const QUALIFIED_NAME_RULE: &str = "a qualified name (an optional DNS-1123 subdomain prefix and '/', then at most 63 letters, \
     digits, '-', '_' or '.', starting and ending alphanumeric)";
/// What a label value must look like.
pub const LABEL_VALUE_RULE: &str =
    "a label value (empty, or at most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric)";

/// Whether `s` is a DNS-1123 label: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Whether `s` is a DNS-1123 subdomain: dot-separated parts of `[a-z0-9]([-a-z0-9]*[a-z0-9])?`,
/// at most 253 characters in all.
///
/// ```
/// use wasmop::contract::names::is_dns1123_subdomain;
/// assert!(is_dns1123_subdomain("web-1.example.com"));
/// assert!(!is_dns1123_subdomain("Web") && !is_dns1123_subdomain("a..b") && !is_dns1123_subdomain(""));
/// ```
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= MAX_SUBDOMAIN
        && s.split('.').all(|part| {
            !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// Whether `s` is a valid name for objects of `group`: a path segment name for RBAC kinds
/// (Kubernetes allows `system:foo` there), a DNS-1123 subdomain for every other kind. Both are
/// at most 253 characters here.
pub fn is_object_name(group: &str, s: &str) -> bool {
    if group == RBAC_GROUP {
        !s.is_empty() && s.len() <= MAX_SUBDOMAIN && s != "." && s != ".." && !s.contains(['/', '%'])
    } else {
        is_dns1123_subdomain(s)
    }
}

/// The rule [`is_object_name`] applies to `group`, for error messages.
pub fn object_name_rule(group: &str) -> &'static str {
    if group == RBAC_GROUP { PATH_SEGMENT_RULE } else { SUBDOMAIN_RULE }
}

/// What an `apiVersion` and `kind` must look like.
pub const TYPE_RULE: &str = "`[group/]version` and a kind (the group a DNS-1123 subdomain, the version a DNS-1123 label, \
     the kind a letter then letters and digits, at most 63 characters)";

/// Whether `api_version` (`[group/]version`) and `kind` can name a Kubernetes type: the group
/// a DNS-1123 subdomain, the version a DNS-1123 label, the kind at most 63 ASCII letters and
/// digits starting with a letter.
///
/// ```
/// use wasmop::contract::names::is_type;
/// assert!(is_type("apps/v1", "Deployment") && is_type("v1", "ConfigMap"));
/// assert!(!is_type("apps/v1/x", "Deployment") && !is_type("v1", "Config Map") && !is_type("", "Pod"));
/// ```
pub fn is_type(api_version: &str, kind: &str) -> bool {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    (group.is_empty() || is_dns1123_subdomain(group))
        && is_dns1123_label(version)
        && kind.len() <= MAX_LABEL_VALUE
        && kind.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && kind.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Whether `s` is a namespace name: a DNS-1123 label.
pub fn is_namespace(s: &str) -> bool {
    is_dns1123_label(s)
}

/// Whether `s` is a qualified name (label and annotation keys): `[prefix/]name`, the prefix a
/// DNS-1123 subdomain and the name a non-empty label value.
///
/// ```
/// use wasmop::contract::names::is_qualified_name;
/// assert!(is_qualified_name("app.kubernetes.io/name") && is_qualified_name("Tier_1"));
/// assert!(!is_qualified_name("a/b/c") && !is_qualified_name("/x") && !is_qualified_name("-x"));
/// ```
pub fn is_qualified_name(s: &str) -> bool {
    let name = match s.split_once('/') {
        Some((prefix, name)) => {
            if !is_dns1123_subdomain(prefix) {
                return false;
            }
            name
        }
        None => s,
    };
    !name.is_empty() && is_label_value(name)
}

/// Whether `s` is a label value: empty, or at most 63 characters of
/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
pub fn is_label_value(s: &str) -> bool {
    s.is_empty()
        || (s.len() <= MAX_LABEL_VALUE
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric()))
}

/// `s` for an error message: quoted, and cut to 64 bytes with its full length when longer, so
/// a refusal of a 5 MB name does not itself carry 5 MB into logs, events and conditions.
///
/// ```
/// use wasmop::contract::names::preview;
/// assert_eq!(preview("web"), "\"web\"");
/// assert_eq!(preview(&"x".repeat(100)), format!("\"{}\"… (100 bytes)", "x".repeat(64)));
/// ```
pub fn preview(s: &str) -> String {
    const SHOWN: usize = 64;
    if s.len() <= SHOWN {
        return format!("{s:?}");
    }
    let mut end = SHOWN;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}… ({} bytes)", &s[..end], s.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains_allow_dots_and_cap_at_253() {
        assert!(is_dns1123_subdomain("a") && is_dns1123_subdomain("a-b.c1"));
        assert!(is_dns1123_subdomain(&"a".repeat(253)));
        assert!(!is_dns1123_subdomain(&"a".repeat(254)));
        assert!(!is_dns1123_subdomain("a.") && !is_dns1123_subdomain(".a") && !is_dns1123_subdomain("a-.b"));
        assert!(!is_dns1123_subdomain("a_b") && !is_dns1123_subdomain("a\nb"));
    }

    #[test]
    fn rbac_kinds_accept_path_segment_names() {
        assert!(is_object_name(RBAC_GROUP, "system:controller:foo"));
        assert!(!is_object_name("", "system:controller:foo"));
        for bad in ["", ".", "..", "a/b", "a%2f"] {
            assert!(!is_object_name(RBAC_GROUP, bad), "{bad:?}");
        }
        assert!(!is_object_name(RBAC_GROUP, &"a".repeat(254)));
    }

    #[test]
    fn label_values_follow_kubernetes() {
        assert!(is_label_value("") && is_label_value("v1.2_3-x") && is_label_value(&"a".repeat(63)));
        assert!(!is_label_value(&"a".repeat(64)) && !is_label_value("-a") && !is_label_value("a b") && !is_label_value("é"));
    }

    #[test]
    fn qualified_names_have_an_optional_subdomain_prefix() {
        assert!(is_qualified_name("example.com/Key_1"));
        assert!(!is_qualified_name("Example.com/key") && !is_qualified_name("example.com/") && !is_qualified_name(""));
        assert!(!is_qualified_name(&"k".repeat(64)));
    }

    #[test]
    fn previews_cut_on_a_character_boundary() {
        let long = "é".repeat(40);
        assert!(preview(&long).ends_with("… (80 bytes)"), "{}", preview(&long));
    }
}
