//! [`RegistryClient`]: the OCI distribution API of one registry, over the host's own HTTP and
//! TLS stack (hyper, rustls with `ring`, the system's roots). Anonymous first; a `401` is
//! answered once with the challenge's scheme: `Basic` with the credentials, or `Bearer` with a
//! token fetched from the challenge's realm (with the credentials, if any).

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use sha2::{Digest, Sha256};

use super::credentials::Credentials;
use super::error::RegistryError;

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// Longest a request (and reading its answer) may take: 5 minutes, enough for a 64 MiB blob
/// on a slow link.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
/// The largest manifest read (the distribution spec's recommended limit).
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// Redirects followed for one blob (registries send blobs from a storage URL).
const MAX_REDIRECTS: usize = 5;

/// The HTTP client every registry client shares: HTTP/1.1, HTTPS with rustls (`ring`) and the
/// system's root certificates (`SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured), or plain HTTP.
fn http() -> Client<Https, Full<Bytes>> {
    static HTTP: OnceLock<Client<Https, Full<Bytes>>> = OnceLock::new();
    HTTP.get_or_init(|| {
        let mut roots = rustls::RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for error in &native.errors {
            tracing::debug!(%error, "a system root certificate could not be read");
        }
        let (added, ignored) = roots.add_parsable_certificates(native.certs);
        tracing::debug!(added, ignored, "root certificates for registries");
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let https = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_or_http().enable_http1().build();
        Client::builder(TokioExecutor::new()).build(https)
    })
    .clone()
}

/// A client of one registry (`HOST[:PORT]`).
pub struct RegistryClient {
    http: Client<Https, Full<Bytes>>,
    registry: String,
    scheme: &'static str,
    credentials: Option<Credentials>,
    /// The `Authorization` header the last challenge was answered with.
    auth: Mutex<Option<HeaderValue>>,
}

impl std::fmt::Debug for RegistryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryClient")
            .field("registry", &self.registry)
            .field("scheme", &self.scheme)
            .field("credentials", &self.credentials.as_ref().map(|c| &c.username))
            .finish_non_exhaustive()
    }
}

/// A manifest as read: its bytes, media type and digest (sha256 of the bytes).
#[derive(Debug, Clone)]
pub struct FetchedManifest {
    /// The bytes, as the registry sent them (the digest is over these).
    pub bytes: Bytes,
    /// `Content-Type` of the answer.
    pub media_type: String,
    /// `sha256:HEX` of `bytes`.
    pub digest: String,
}

impl RegistryClient {
    /// A client of `registry` (`HOST[:PORT]`), over plain HTTP when `insecure`, with
    /// `credentials` for a registry that asks for them.
    pub fn new(registry: &str, insecure: bool, credentials: Option<Credentials>) -> Self {
        Self {
            http: http(),
            registry: registry.to_owned(),
            scheme: if insecure { "http" } else { "https" },
            credentials,
            auth: Mutex::new(None),
        }
    }

    /// The registry this client talks to.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// Read the manifest `reference` (a tag or `sha256:...`) of `repository`, accepting OCI
    /// image manifests (and Docker's v2, which OCI clients read alike).
    ///
    /// # Errors
    /// [`RegistryError::NotFound`] when the repository or reference does not exist; a
    /// manifest whose digest is not the reference's, when that is a digest
    /// ([`RegistryError::DigestMismatch`]); any [`RegistryError`] of the exchange.
    pub async fn get_manifest(&self, repository: &str, reference: &str) -> Result<FetchedManifest, RegistryError> {
        let path = format!("/v2/{repository}/manifests/{reference}");
        let accept = HeaderValue::from_static(
            "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.index.v1+json",
        );
        let response = self.request(Method::GET, &path, &[(ACCEPT, accept)], Bytes::new()).await?;
        let response = self
            .expect(response, &[StatusCode::OK], &format!("GET {path}"), || format!("manifest {repository}:{reference}"))
            .await?;
        let media_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        let bytes =
            read_body(response, MAX_MANIFEST_BYTES, &format!("manifest {repository}:{reference}"), &self.registry).await?;
        let digest = sha256_digest(&bytes);
        if reference.starts_with("sha256:") && digest != reference {
            return Err(RegistryError::DigestMismatch {
                what: format!("manifest {repository}@{reference}"),
                expected: reference.to_owned(),
                actual: digest,
            });
        }
        Ok(FetchedManifest { bytes, media_type, digest })
    }

    /// Read the blob `digest` of `repository`, of exactly `size` bytes, and check both.
    ///
    /// # Errors
    /// [`RegistryError::TooLarge`] when the registry sends more than `size` bytes,
    /// [`RegistryError::DigestMismatch`] when the bytes are not `digest`'s (or fewer than
    /// `size`), [`RegistryError::NotFound`] for an unknown blob; any [`RegistryError`] of the
    /// exchange.
    pub async fn get_blob(&self, repository: &str, digest: &str, size: u64) -> Result<Bytes, RegistryError> {
        let what = format!("blob {repository}@{digest}");
        let mut url = self.url(&format!("/v2/{repository}/blobs/{digest}"));
        let mut response = self.request(Method::GET, &url, &[], Bytes::new()).await?;
        for _ in 0..MAX_REDIRECTS {
            if !response.status().is_redirection() {
                break;
            }
            let Some(location) = response.headers().get(LOCATION).and_then(|l| l.to_str().ok()) else { break };
            url = self.url(location);
            // The storage a registry redirects to authorizes by the URL itself: no credentials.
            response = self.send(Method::GET, &url, &[], Bytes::new(), None).await?;
        }
        let response = self.expect(response, &[StatusCode::OK], &format!("GET {url}"), || what.clone()).await?;
        let bytes = read_body(response, size, &what, &self.registry).await?;
        let actual = sha256_digest(&bytes);
        if actual != digest || bytes.len() as u64 != size {
            return Err(RegistryError::DigestMismatch {
                what,
                expected: format!("{digest} ({size} bytes)"),
                actual: format!("{actual} ({} bytes)", bytes.len()),
            });
        }
        Ok(bytes)
    }

    /// Upload `data` as a blob of `repository`, unless the registry has it already; returns
    /// its digest.
    ///
    /// # Errors
    /// Any [`RegistryError`] of the exchange (a registry that refuses the push included).
    pub async fn push_blob(&self, repository: &str, data: Bytes) -> Result<String, RegistryError> {
        let digest = sha256_digest(&data);
        let head = format!("/v2/{repository}/blobs/{digest}");
        if self.request(Method::HEAD, &head, &[], Bytes::new()).await?.status() == StatusCode::OK {
            return Ok(digest);
        }
        let start = format!("/v2/{repository}/blobs/uploads/");
        let response =
            self.request(Method::POST, &start, &[(CONTENT_LENGTH, HeaderValue::from_static("0"))], Bytes::new()).await?;
        let response = self
            .expect(response, &[StatusCode::ACCEPTED], &format!("POST {start}"), || format!("repository {repository}"))
            .await?;
        let location = response
            .headers()
            .get(LOCATION)
            .and_then(|l| l.to_str().ok())
            .ok_or_else(|| RegistryError::Protocol {
                registry: self.registry.clone(),
                request: format!("POST {start}"),
                status: 202,
                body: "no Location header".into(),
            })?
            .to_owned();
        let separator = if location.contains('?') { '&' } else { '?' };
        let put = format!("{location}{separator}digest={digest}");
        let headers = [
            (CONTENT_TYPE, HeaderValue::from_static("application/octet-stream")),
            (CONTENT_LENGTH, HeaderValue::from(data.len())),
        ];
        let response = self.request(Method::PUT, &put, &headers, data).await?;
        self.expect(response, &[StatusCode::CREATED], "PUT (blob upload)", || format!("repository {repository}")).await?;
        Ok(digest)
    }

    /// Store `manifest` (of `media_type`) as `reference` (a tag) of `repository`; returns its
    /// digest.
    ///
    /// # Errors
    /// Any [`RegistryError`] of the exchange (a manifest the registry refuses included).
    pub async fn put_manifest(
        &self,
        repository: &str,
        reference: &str,
        media_type: &str,
        manifest: Bytes,
    ) -> Result<String, RegistryError> {
        let digest = sha256_digest(&manifest);
        let path = format!("/v2/{repository}/manifests/{reference}");
        let content_type = HeaderValue::from_str(media_type)
            .map_err(|_| RegistryError::NotWasmArtifact(format!("media type {media_type:?}")))?;
        let headers = [(CONTENT_TYPE, content_type), (CONTENT_LENGTH, HeaderValue::from(manifest.len()))];
        let response = self.request(Method::PUT, &path, &headers, manifest).await?;
        self.expect(response, &[StatusCode::CREATED], &format!("PUT {path}"), || format!("repository {repository}")).await?;
        Ok(digest)
    }

    /// An absolute URL for a path (`/v2/...`) or a URL a registry sent.
    fn url(&self, path_or_url: &str) -> String {
        if path_or_url.starts_with("http://") || path_or_url.starts_with("https://") {
            path_or_url.to_owned()
        } else {
            format!("{}://{}{path_or_url}", self.scheme, self.registry)
        }
    }

    /// Send a request to the registry, answering one authentication challenge.
    async fn request(
        &self,
        method: Method,
        path_or_url: &str,
        headers: &[(http::HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<Response<Incoming>, RegistryError> {
        let url = self.url(path_or_url);
        let auth = self.auth.lock().expect("auth lock").clone();
        let response = self.send(method.clone(), &url, headers, body.clone(), auth.as_ref()).await?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let challenge = response.headers().get(WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        let header = self.answer(&challenge).await?;
        *self.auth.lock().expect("auth lock") = Some(header.clone());
        let response = self.send(method, &url, headers, body, Some(&header)).await?;
        if response.status() == StatusCode::UNAUTHORIZED {
            return Err(self.unauthorized("the registry refused the credentials"));
        }
        Ok(response)
    }

    /// One HTTP exchange, within [`REQUEST_TIMEOUT`] for the answer's head.
    async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(http::HeaderName, HeaderValue)],
        body: Bytes,
        auth: Option<&HeaderValue>,
    ) -> Result<Response<Incoming>, RegistryError> {
        let mut request = Request::builder().method(method).uri(url);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        if let Some(auth) = auth {
            request = request.header(AUTHORIZATION, auth);
        }
        let request = request.body(Full::new(body)).map_err(|e| self.unreachable(format!("invalid request to {url}: {e}")))?;
        match tokio::time::timeout(REQUEST_TIMEOUT, self.http.request(request)).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => Err(self.unreachable(error_chain(&e))),
            Err(_) => Err(self.unreachable(format!("no answer within {}s", REQUEST_TIMEOUT.as_secs()))),
        }
    }

    /// The `Authorization` header answering `challenge` (a `WWW-Authenticate` value).
    async fn answer(&self, challenge: &str) -> Result<HeaderValue, RegistryError> {
        let (scheme, params) = parse_challenge(challenge);
        let basic = self.credentials.as_ref().map(|c| {
            let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", c.username, c.password));
            HeaderValue::from_str(&format!("Basic {encoded}")).expect("base64 is a valid header value")
        });
        match scheme.to_ascii_lowercase().as_str() {
            "basic" => basic.ok_or_else(|| self.unauthorized("the registry asks for credentials and none are configured")),
            "bearer" => {
                let realm =
                    params.iter().find(|(k, _)| k == "realm").map(|(_, v)| v.clone()).ok_or_else(|| {
                        self.unauthorized(&format!("the registry's Bearer challenge has no realm: {challenge}"))
                    })?;
                let query: Vec<String> = params
                    .iter()
                    .filter(|(k, _)| k == "service" || k == "scope")
                    .map(|(k, v)| format!("{k}={}", percent_encode(v)))
                    .collect();
                let separator = if realm.contains('?') { '&' } else { '?' };
                let url = if query.is_empty() { realm } else { format!("{realm}{separator}{}", query.join("&")) };
                let response = self.send(Method::GET, &url, &[], Bytes::new(), basic.as_ref()).await?;
                if matches!(response.status(), StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
                    return Err(self.unauthorized("the registry's token service refused the credentials"));
                }
                let response = self.expect(response, &[StatusCode::OK], &format!("GET {url}"), || "token service".into()).await?;
                let body = read_body(response, 1 << 20, "token", &self.registry).await?;
                let token: serde_json::Value = serde_json::from_slice(&body)
                    .map_err(|e| self.unauthorized(&format!("the token service answered something else than JSON: {e}")))?;
                let token = token["token"]
                    .as_str()
                    .or(token["access_token"].as_str())
                    .ok_or_else(|| self.unauthorized("the token service's answer has no token"))?;
                HeaderValue::from_str(&format!("Bearer {token}"))
                    .map_err(|_| self.unauthorized("the token service sent an invalid token"))
            }
            _ => Err(self.unauthorized(&format!("unsupported authentication challenge {challenge:?}"))),
        }
    }

    /// `response` when its status is one of `ok`; else the matching error (its body, cut, in
    /// the message).
    async fn expect(
        &self,
        response: Response<Incoming>,
        ok: &[StatusCode],
        request: &str,
        what: impl FnOnce() -> String,
    ) -> Result<Response<Incoming>, RegistryError> {
        let status = response.status();
        if ok.contains(&status) {
            return Ok(response);
        }
        let body = read_body(response, 64 << 10, "error", &self.registry)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let body: String = body.trim().chars().take(300).collect();
        Err(match status {
            StatusCode::NOT_FOUND => RegistryError::NotFound { registry: self.registry.clone(), what: what(), body },
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => self.unauthorized(&format!("{request}: {status}: {body}")),
            _ => RegistryError::Protocol {
                registry: self.registry.clone(),
                request: request.to_owned(),
                status: status.as_u16(),
                body,
            },
        })
    }

    fn unreachable(&self, message: String) -> RegistryError {
        RegistryError::Unreachable { registry: self.registry.clone(), message }
    }

    fn unauthorized(&self, message: &str) -> RegistryError {
        RegistryError::Unauthorized {
            registry: self.registry.clone(),
            user: self.credentials.as_ref().map(|c| c.username.clone()),
            message: message.to_owned(),
        }
    }
}

/// `sha256:HEX` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The body of `response`, at most `limit` bytes.
async fn read_body(response: Response<Incoming>, limit: u64, what: &str, registry: &str) -> Result<Bytes, RegistryError> {
    if let Some(length) = response.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        && length > limit
    {
        return Err(RegistryError::TooLarge { what: what.to_owned(), size: Some(length), limit });
    }
    let limited = Limited::new(response.into_body(), usize::try_from(limit).unwrap_or(usize::MAX));
    match tokio::time::timeout(REQUEST_TIMEOUT, limited.collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(RegistryError::TooLarge { what: what.to_owned(), size: None, limit })
        }
        Ok(Err(e)) => Err(RegistryError::Unreachable { registry: registry.to_owned(), message: format!("reading {what}: {e}") }),
        Err(_) => Err(RegistryError::Unreachable {
            registry: registry.to_owned(),
            message: format!("reading {what}: not done within {}s", REQUEST_TIMEOUT.as_secs()),
        }),
    }
}

/// The scheme and `key=value` parameters of a `WWW-Authenticate` value (quoted values may hold
/// commas).
fn parse_challenge(challenge: &str) -> (String, Vec<(String, String)>) {
    let challenge = challenge.trim();
    let (scheme, rest) = challenge.split_once(' ').unwrap_or((challenge, ""));
    let mut params = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect::<String>().trim().to_ascii_lowercase();
        if key.is_empty() {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            let mut escaped = false;
            for c in chars.by_ref() {
                match (escaped, c) {
                    (false, '\\') => escaped = true,
                    (false, '"') => break,
                    _ => {
                        value.push(c);
                        escaped = false;
                    }
                }
            }
        } else {
            value = chars.by_ref().take_while(|c| *c != ',').collect::<String>().trim().to_owned();
        }
        params.push((key, value));
    }
    (scheme.to_owned(), params)
}

/// `s` with every byte but the URL-unreserved ones percent-encoded.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An error and its sources on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_challenge_is_read_with_commas_inside_quotes() {
        let (scheme, params) = parse_challenge(
            r#"Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull,push""#,
        );
        assert_eq!(scheme, "Bearer");
        let get = |k: &str| params.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("realm"), Some("https://auth.example.com/token"));
        assert_eq!(get("service"), Some("registry.example.com"));
        assert_eq!(get("scope"), Some("repository:a/b:pull,push"));
        let (scheme, params) = parse_challenge(r#"Basic realm="basic-realm""#);
        assert_eq!((scheme.as_str(), params), ("Basic", vec![("realm".to_owned(), "basic-realm".to_owned())]));
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(percent_encode("repository:a/b:pull,push"), "repository%3Aa%2Fb%3Apull%2Cpush");
    }
}
