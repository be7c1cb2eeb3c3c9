//! Registry credentials: a user name and password, as a `kubernetes.io/dockerconfigjson`
//! Secret holds them (`.dockerconfigjson`: `{"auths": {"REGISTRY": {"auth": base64(user:password)}}}`,
//! or `username` and `password` fields), the format `kubectl create secret docker-registry`
//! writes.

use base64::Engine as _;

/// A user name and password for a registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password (or token).
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("username", &self.username).finish_non_exhaustive()
    }
}

/// The type of a Secret holding registry credentials.
pub const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
/// The key of its data.
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";

impl Credentials {
    /// The credentials a Docker config (`.dockerconfigjson`) holds for `registry`
    /// (`HOST[:PORT]`); an entry's key may also be a URL (`https://HOST/v1/`).
    ///
    /// ```
    /// use wasmop::registry::Credentials;
    /// let config = br#"{"auths": {"https://r.example.com/v1/": {"auth": "dXNlcjpwYXNz"}}}"#;
    /// let c = Credentials::from_docker_config(config, "r.example.com").unwrap();
    /// assert_eq!((c.username.as_str(), c.password.as_str()), ("user", "pass"));
    /// assert!(Credentials::from_docker_config(config, "other.example.com").is_err());
    /// ```
    ///
    /// # Errors
    /// One line: not JSON, no `auths`, no entry for `registry`, an entry without a user and
    /// password.
    pub fn from_docker_config(json: &[u8], registry: &str) -> Result<Self, String> {
        let config: serde_json::Value = serde_json::from_slice(json).map_err(|e| format!("is not JSON: {e}"))?;
        let auths = config.get("auths").and_then(|a| a.as_object()).ok_or("has no \"auths\" object")?;
        let host = |key: &str| -> String {
            let key = key.strip_prefix("https://").or_else(|| key.strip_prefix("http://")).unwrap_or(key);
            key.split('/').next().unwrap_or_default().to_owned()
        };
        let entry = auths
            .iter()
            .find(|(key, _)| host(key) == registry)
            .map(|(_, entry)| entry)
            .ok_or_else(|| format!("has no entry for registry {registry}"))?;
        if let (Some(username), Some(password)) =
            (entry.get("username").and_then(|u| u.as_str()), entry.get("password").and_then(|p| p.as_str()))
        {
            return Ok(Self { username: username.to_owned(), password: password.to_owned() });
        }
        let auth = entry
            .get("auth")
            .and_then(|a| a.as_str())
            .ok_or_else(|| format!("the entry of {registry} has neither auth nor username and password"))?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|e| format!("the auth of {registry} is not base64: {e}"))?;
        let decoded = String::from_utf8(decoded).map_err(|_| format!("the auth of {registry} is not UTF-8"))?;
        let (username, password) =
            decoded.split_once(':').ok_or_else(|| format!("the auth of {registry} is not USER:PASSWORD"))?;
        Ok(Self { username: username.to_owned(), password: password.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_found_by_host_and_port_with_either_field_form() {
        let config = br#"{"auths": {"127.0.0.1:5000": {"username": "u", "password": "p:w"}, "other:1": {"auth": "YTpi"}}}"#;
        let c = Credentials::from_docker_config(config, "127.0.0.1:5000").unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("u", "p:w"));
        let c = Credentials::from_docker_config(config, "other:1").unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("a", "b"));
        assert_eq!(Credentials::from_docker_config(config, "127.0.0.1").unwrap_err(), "has no entry for registry 127.0.0.1");
        assert_eq!(Credentials::from_docker_config(b"{}", "x").unwrap_err(), "has no \"auths\" object");
        assert!(!format!("{c:?}").contains('b'), "the password is not printed: {c:?}");
    }
}
