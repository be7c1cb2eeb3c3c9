//! `wasi:http` linked, every outgoing request denied.
//!
//! Some language runtimes import `wasi:http` whether or not a plugin uses it (the default
//! componentize-js build of StarlingMonkey does, for `fetch`). Such a component links: its
//! requests fail with `HTTP-request-denied`, the same answer an embedder gives a guest that is
//! not allowed the network. No connection is ever opened.

use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

/// The hooks of a sandbox without network: [`WasiHttpHooks::send_request`] always answers
/// `HttpRequestDenied`.
#[derive(Debug, Default, Clone, Copy)]
pub struct DenyOutgoingHttp;

/// What `send_request` returns: the response and a future of its transmission.
type Sent = Result<(http::Response<WasiBody>, Box<dyn Future<Output = Result<(), Error>> + Send>), Error>;

impl WasiHttpHooks for DenyOutgoingHttp {
    fn send_request(
        &mut self,
        _request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        Box::new(async { Err(Error::HttpRequestDenied) })
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;

    use http_body_util::BodyExt;

    use super::*;

    #[tokio::test]
    async fn every_outgoing_request_is_denied() {
        let body = http_body_util::Empty::new().map_err(|never| match never {}).boxed_unsync();
        let request = http::Request::get("https://example.com/").body(body).unwrap();
        let sent = DenyOutgoingHttp.send_request(request, None, Box::new(async { Ok(()) }));
        let outcome = Pin::from(sent).await;
        assert!(matches!(outcome, Err(Error::HttpRequestDenied)), "{:?}", outcome.err());
    }
}
