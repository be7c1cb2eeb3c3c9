//! [`Handler`]: one HTTP request to the admission server, from path and body to the answer.
//!
//! Every review that reaches a plugin is answered with HTTP 200 and an `AdmissionReview`: the
//! plugin's verdict, or — when the plugin failed (timeout, trap, memory, a mutation that
//! changes the object's identity, a malformed answer) — a denial naming the reason (fail
//! closed). When the host does not call the plugin at all because the plugin's circuit breaker
//! is open or too many requests are in flight, the webhook is unavailable, not wrong: the
//! answer is HTTP 503, and the API server applies the webhook's `failurePolicy` (so a
//! `failurePolicy: Ignore` webhook, like SidecarSet's Pod injection, never blocks the cluster
//! because its plugin's reconciles tripped the breaker). Requests that are not reviews get a
//! plain-text error with the HTTP status saying what is wrong (404 unknown path or webhook, 405
//! not a POST, 413 too large, 400 malformed); the API server then applies `failurePolicy` too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::{Method, StatusCode};
use serde_json::Value;
use tokio::sync::Semaphore;
use wasmop_types::{AdmissionRequest, Verdict, Webhook, WebhookType};

use super::admitter::{Admitter, CallFailure};
use super::metrics::{AdmissionMetrics, AdmissionOutcome};
use super::mutated_content::content_refusal;
use super::patch::mutation_patch;
use super::review::{self, Answer, ReviewError};

/// The prefix of every webhook path: `/admission/<plugin>/<webhook>`.
pub const PATH_PREFIX: &str = "/admission/";

/// Admission requests served at once by default; more wait, up to their deadline.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;

/// The path the webhook `webhook` of `plugin` is served at.
pub fn webhook_path(plugin: &str, webhook: &str) -> String {
    format!("{PATH_PREFIX}{plugin}/{webhook}")
}

/// The deadline of one plugin call for a webhook the API server waits `timeout_seconds` for:
/// half of it, so that the answer (or the host's denial) always reaches the API server in time.
/// The plugin's own deadline (its limits) applies too; the shorter wins.
pub fn call_deadline(timeout_seconds: u32) -> Duration {
    Duration::from_millis(u64::from(timeout_seconds.max(1)) * 500)
}

/// What the server sends back.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// HTTP 200 with an `AdmissionReview`.
    Review(Value),
    /// An HTTP error with a one-line plain-text message.
    Error(StatusCode, String),
}

impl Reply {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Review(_) => StatusCode::OK,
            Self::Error(status, _) => *status,
        }
    }
}

/// Why a request is not a review the host answers.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The path is not `/admission/<plugin>/<webhook>`.
    #[error("unknown path {0:?}: webhooks are served at {PATH_PREFIX}<plugin>/<webhook>")]
    UnknownPath(String),
    /// Not a POST.
    #[error("method {0} not allowed: admission reviews are POSTed")]
    Method(Method),
    /// The body could not be read (too large, or the connection failed).
    #[error(transparent)]
    Body(#[from] ReviewError),
}

/// Answers admission requests with the plugins an [`Admitter`] serves.
#[derive(Clone)]
pub struct Handler {
    admitter: Arc<dyn Admitter>,
    metrics: AdmissionMetrics,
    in_flight: Arc<Semaphore>,
}

impl std::fmt::Debug for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handler").field("available", &self.in_flight.available_permits()).finish_non_exhaustive()
    }
}

impl Handler {
    /// At most `max_in_flight` plugin calls at once.
    pub fn new(admitter: Arc<dyn Admitter>, metrics: AdmissionMetrics, max_in_flight: usize) -> Self {
        Self { admitter, metrics, in_flight: Arc::new(Semaphore::new(max_in_flight.max(1))) }
    }

    /// Answer one request: `body` is the body read (at most [`review::MAX_REVIEW_BYTES`]), or
    /// why it could not be.
    pub async fn handle(&self, method: &Method, path: &str, body: Result<&[u8], ReviewError>) -> Reply {
        let started = Instant::now();
        // Paths of served webhooks only: a client cannot grow the metrics with made-up paths.
        let served = parse_path(path).is_some_and(|(p, w)| self.admitter.find(p, w).is_ok());
        let label = if served { path } else { "(unmatched)" };
        let _counted = self.metrics.start(label);
        let reply = self.route(method, path, body).await;
        self.metrics.answered(label, reply.status().as_u16(), started.elapsed().as_secs_f64());
        reply
    }

    async fn route(&self, method: &Method, path: &str, body: Result<&[u8], ReviewError>) -> Reply {
        let Some((plugin, webhook)) = parse_path(path) else {
            return error(StatusCode::NOT_FOUND, &RequestError::UnknownPath(path.into()));
        };
        if method != Method::POST {
            return error(StatusCode::METHOD_NOT_ALLOWED, &RequestError::Method(method.clone()));
        }
        let declared = match self.admitter.find(plugin, webhook) {
            Ok(w) => w,
            Err(e) => return error(StatusCode::NOT_FOUND, &e),
        };
        let request = match body.and_then(review::parse) {
            Ok(r) => r,
            Err(e @ ReviewError::TooLarge { .. }) => return error(StatusCode::PAYLOAD_TOO_LARGE, &e),
            Err(e) => return error(StatusCode::BAD_REQUEST, &e),
        };
        match self.answer(plugin, &declared, request).await {
            Ok(answer) => Reply::Review(answer.to_review()),
            Err(failure) => error(StatusCode::SERVICE_UNAVAILABLE, &format!("wasmop: {}", failure.message)),
        }
    }

    /// The answer to `request` for `plugin`'s `webhook`: the plugin's verdict after the host's
    /// checks (a validating webhook's object unchanged; a mutation's identity, owners,
    /// finalizers and host labels unchanged, its content allowed by the plugin's grants), or a
    /// denial naming why the plugin failed (fail closed). `wasmop run` answers the API server
    /// with it and `wasmop admit` prints it: both judge a verdict through this one function.
    ///
    /// # Errors
    /// The [`CallFailure`] of a call the host did not make ([`CallFailure::is_unavailable`]):
    /// the webhook is unavailable and the API server applies its `failurePolicy`.
    pub async fn answer(&self, plugin: &str, webhook: &Webhook, request: AdmissionRequest) -> Result<Answer, CallFailure> {
        let uid = request.uid.clone();
        let name = webhook.name.as_str();
        match self.admit(plugin, webhook, request).await {
            Ok(answer) => Ok(answer),
            Err(failure) if failure.is_unavailable() => {
                tracing::warn!(plugin, webhook = name, reason = failure.reason, error = %failure.message,
                    "admission webhook unavailable; the API server applies its failurePolicy");
                self.metrics.outcome(plugin, name, AdmissionOutcome::Error, failure.reason);
                Err(failure)
            }
            Err(failure) => {
                tracing::warn!(plugin, webhook = name, reason = failure.reason, error = %failure.message, "admission call failed; request denied");
                self.metrics.outcome(plugin, name, AdmissionOutcome::Error, failure.reason);
                Ok(Answer::deny(&uid, 500, format!("denied by wasmop (fail closed): {}", failure.message)))
            }
        }
    }

    /// Call the plugin and turn its verdict into an answer; a failure or an unacceptable answer
    /// is a [`CallFailure`].
    async fn admit(&self, plugin: &str, webhook: &Webhook, request: AdmissionRequest) -> Result<Answer, CallFailure> {
        let deadline = call_deadline(webhook.timeout_seconds);
        let started = Instant::now();
        let _slot =
            tokio::time::timeout(deadline, self.in_flight.acquire()).await.ok().and_then(Result::ok).ok_or_else(|| {
                CallFailure { reason: "TooManyRequests", message: "too many admission requests in flight on this host".into() }
            })?;
        let left = deadline.saturating_sub(started.elapsed());
        let (uid, original) = (request.uid.clone(), request.object.clone());
        let verdict = self.admitter.call(plugin, &webhook.name, request, left).await?;
        let name = &webhook.name;
        let record = |outcome, reason| self.metrics.outcome(plugin, name, outcome, reason);
        match verdict {
            Verdict::Denied { code, message, warnings } => {
                record(AdmissionOutcome::Denied, "Denied");
                let code = if (400..=599).contains(&code) { code } else { 403 };
                Ok(Answer { warnings, ..Answer::deny(&uid, code, message) })
            }
            Verdict::Allowed { warnings, mutated } => {
                let patch = match &mutated {
                    None => None,
                    Some(m) if webhook.type_ == WebhookType::Validating && original.as_ref() != Some(m) => {
                        return Err(CallFailure {
                            reason: "InvalidMutation",
                            message: format!("plugin {plugin}: the validating webhook {name} answered a changed object"),
                        });
                    }
                    Some(m) => {
                        let patch = mutation_patch(original.as_ref(), m)
                            .map_err(|e| CallFailure { reason: "InvalidMutation", message: format!("plugin {plugin}: {e}") })?;
                        if patch.is_some()
                            && let Some(refusal) = content_refusal(&self.admitter.grants(plugin), original.as_ref(), m)
                        {
                            return Err(CallFailure {
                                reason: "InvalidMutation",
                                message: format!("plugin {plugin}: {refusal}"),
                            });
                        }
                        patch
                    }
                };
                record(AdmissionOutcome::Allowed, if patch.is_some() { "Mutated" } else { "Allowed" });
                Ok(Answer { uid, allowed: true, status: None, warnings, patch })
            }
        }
    }
}

fn error(status: StatusCode, e: &dyn std::fmt::Display) -> Reply {
    Reply::Error(status, e.to_string())
}

/// `(plugin, webhook)` of `/admission/<plugin>/<webhook>`.
fn parse_path(path: &str) -> Option<(&str, &str)> {
    let (plugin, webhook) = path.strip_prefix(PATH_PREFIX)?.split_once('/')?;
    let name =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    (name(plugin) && name(webhook)).then_some((plugin, webhook))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use futures::future::BoxFuture;
    use serde_json::json;
    use wasmop_types::{FailurePolicy, SideEffects};

    /// One plugin `p` with a mutating webhook `m` and a validating one `v`, answering `verdict`
    /// after `delay` (or failing with `failure`).
    struct Fake {
        verdict: Verdict,
        delay: Duration,
        failure: Option<CallFailure>,
    }

    fn webhook(name: &str, type_: WebhookType) -> Webhook {
        Webhook {
            name: name.into(),
            type_,
            rules: vec![],
            namespace_selector: String::new(),
            object_selector: String::new(),
            failure_policy: FailurePolicy::Fail,
            side_effects: SideEffects::None,
            timeout_seconds: 1,
            match_conditions: Vec::new(),
        }
    }

    impl Admitter for Fake {
        fn find(&self, plugin: &str, name: &str) -> Result<Webhook, super::super::admitter::NotServed> {
            use super::super::admitter::NotServed;
            match (plugin, name) {
                ("p", "m") => Ok(webhook("m", WebhookType::Mutating)),
                ("p", "v") => Ok(webhook("v", WebhookType::Validating)),
                ("p", _) => Err(NotServed::NoWebhook { plugin: plugin.into(), webhook: name.into() }),
                _ => Err(NotServed::NoPlugin(plugin.into())),
            }
        }

        fn call(
            &self,
            _: &str,
            _: &str,
            _: AdmissionRequest,
            deadline: Duration,
        ) -> BoxFuture<'static, Result<Verdict, CallFailure>> {
            let (verdict, delay, failure) = (self.verdict.clone(), self.delay, self.failure.clone());
            Box::pin(async move {
                if delay > deadline {
                    tokio::time::sleep(deadline).await;
                    return Err(CallFailure { reason: "PluginTimeout", message: "plugin p: past its deadline".into() });
                }
                failure.map_or(Ok(verdict), Err)
            })
        }

        fn webhooks(&self) -> Vec<(String, Vec<Webhook>)> {
            vec![]
        }
    }

    fn serve(fake: Fake) -> (Handler, Metrics) {
        let registry = Metrics::new();
        (Handler::new(Arc::new(fake), AdmissionMetrics::new(&registry), 4), registry)
    }

    fn allow(mutated: Option<Value>) -> Fake {
        Fake { verdict: Verdict::Allowed { warnings: vec![], mutated }, delay: Duration::ZERO, failure: None }
    }

    fn pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"}})
    }

    fn body() -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE", "namespace": "default", "name": "web", "object": pod()}}))
        .unwrap()
    }

    async fn post(handler: &Handler, path: &str) -> Reply {
        handler.handle(&Method::POST, path, Ok(&body())).await
    }

    fn answer_of(reply: Reply) -> Value {
        match reply {
            Reply::Review(review) => review["response"].clone(),
            Reply::Error(status, message) => panic!("{status}: {message}"),
        }
    }

    #[tokio::test]
    async fn a_mutation_is_answered_with_its_patch_and_counted() {
        let mut labelled = pod();
        labelled["metadata"]["labels"] = json!({"injected": "yes"});
        let (handler, registry) = serve(allow(Some(labelled)));
        let response = answer_of(post(&handler, "/admission/p/m").await);
        assert_eq!((response["uid"].as_str(), response["allowed"].as_bool()), (Some("u-1"), Some(true)));
        assert_eq!(response["patchType"], "JSONPatch");
        let text = registry.render();
        assert!(
            text.contains(r#"wasmop_admission_outcomes_total{plugin="p",webhook="m",outcome="allowed",reason="Mutated"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"controller_runtime_webhook_requests_total{webhook="/admission/p/m",code="200"} 1"#), "{text}");
    }

    #[tokio::test]
    async fn a_validating_webhook_may_not_mutate_and_no_webhook_may_rename() {
        let mut labelled = pod();
        labelled["metadata"]["labels"] = json!({"x": "y"});
        let (handler, _) = serve(allow(Some(labelled)));
        let response = answer_of(post(&handler, "/admission/p/v").await);
        assert_eq!(response["allowed"], false);
        assert_eq!(
            response["status"]["message"],
            "denied by wasmop (fail closed): plugin p: the validating webhook v answered a changed object"
        );
        let mut renamed = pod();
        renamed["metadata"]["name"] = json!("other");
        let (handler, registry) = serve(allow(Some(renamed)));
        let response = answer_of(post(&handler, "/admission/p/m").await);
        assert_eq!(response["allowed"], false);
        assert!(response["status"]["message"].as_str().unwrap().contains("changes the object's metadata.name"), "{response}");
        assert!(registry.render().contains(r#"outcome="error",reason="InvalidMutation"} 1"#));
    }

    #[tokio::test]
    async fn a_mutation_adding_an_owner_is_denied_with_the_reason() {
        let mut owned = pod();
        owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u"}]);
        let (handler, _) = serve(allow(Some(owned)));
        let response = answer_of(post(&handler, "/admission/p/m").await);
        assert_eq!(response["allowed"], false);
        assert_eq!(
            response["status"]["message"],
            "denied by wasmop (fail closed): plugin p: the mutation changes the object's metadata.ownerReferences; \
             a webhook may not change who owns an object or what the host keeps on it"
        );
    }

    #[tokio::test]
    async fn a_denial_keeps_the_plugins_message_and_a_code_out_of_range_becomes_403() {
        let fake = Fake {
            verdict: Verdict::Denied { code: 200, message: "no".into(), warnings: vec![] },
            delay: Duration::ZERO,
            failure: None,
        };
        let (handler, _) = serve(fake);
        let response = answer_of(post(&handler, "/admission/p/m").await);
        assert_eq!(response["status"], json!({"code": 403, "message": "no"}));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_or_slow_call_is_a_denial_in_time_with_the_reason() {
        let failure = CallFailure { reason: "PluginTrapped", message: "plugin p: plugin trapped: unreachable".into() };
        let (handler, registry) = serve(Fake { failure: Some(failure), ..allow(None) });
        let response = answer_of(post(&handler, "/admission/p/m").await);
        assert_eq!(response["status"]["code"], 500);
        assert_eq!(response["status"]["message"], "denied by wasmop (fail closed): plugin p: plugin trapped: unreachable");
        assert!(registry.render().contains(r#"outcome="error",reason="PluginTrapped"} 1"#));
        let (handler, _) = serve(Fake { delay: Duration::from_secs(60), ..allow(None) });
        let started = tokio::time::Instant::now();
        let response = answer_of(post(&handler, "/admission/p/m").await);
        assert_eq!(started.elapsed(), call_deadline(1), "half of the webhook's timeoutSeconds");
        assert_eq!(response["allowed"], false);
    }

    #[tokio::test]
    async fn an_open_breaker_makes_the_webhook_unavailable_so_its_failure_policy_decides() {
        let failure = CallFailure {
            reason: "CircuitBreakerOpen",
            message: "plugin p's circuit breaker is open: wrote on 50 consecutive reconciles".into(),
        };
        let (handler, registry) = serve(Fake { failure: Some(failure), ..allow(None) });
        assert_eq!(
            post(&handler, "/admission/p/m").await,
            Reply::Error(
                StatusCode::SERVICE_UNAVAILABLE,
                "wasmop: plugin p's circuit breaker is open: wrote on 50 consecutive reconciles".into()
            )
        );
        let text = registry.render();
        assert!(text.contains(r#"outcome="error",reason="CircuitBreakerOpen"} 1"#), "{text}");
        assert!(text.contains(r#"controller_runtime_webhook_requests_total{webhook="/admission/p/m",code="503"} 1"#), "{text}");
    }

    #[tokio::test]
    async fn requests_that_are_not_reviews_get_an_http_error_naming_the_problem() {
        let (handler, registry) = serve(allow(None));
        let cases = [
            (
                Method::POST,
                "/admission/p",
                Ok(&b"{}"[..]),
                404,
                "unknown path \"/admission/p\": webhooks are served at /admission/<plugin>/<webhook>",
            ),
            (Method::POST, "/admission/q/m", Ok(&b"{}"[..]), 404, "no plugin named \"q\" is loaded"),
            (Method::POST, "/admission/p/x", Ok(&b"{}"[..]), 404, "plugin \"p\" declares no webhook named \"x\""),
            (Method::GET, "/admission/p/m", Ok(&b""[..]), 405, "method GET not allowed: admission reviews are POSTed"),
            (
                Method::POST,
                "/admission/p/m",
                Ok(&b"[]"[..]),
                400,
                "not an admission.k8s.io/v1 AdmissionReview: apiVersion \"\", kind \"\"",
            ),
            (
                Method::POST,
                "/admission/p/m",
                Err(ReviewError::TooLarge { size: 1 << 30 }),
                413,
                "admission review too large: 1073741824 bytes, at most 8388608 accepted",
            ),
        ];
        for (method, path, body, status, message) in cases {
            assert_eq!(
                handler.handle(&method, path, body).await,
                Reply::Error(StatusCode::from_u16(status).unwrap(), message.into())
            );
        }
        let text = registry.render();
        assert!(text.contains(r#"controller_runtime_webhook_requests_total{webhook="/admission/p/m",code="405"} 1"#), "{text}");
        assert!(text.contains(r#"controller_runtime_webhook_requests_total{webhook="(unmatched)",code="404"} 3"#), "{text}");
    }
}
