//! [`Exports`]: which WIT version and which interfaces a plugin component implements, and the
//! calls into them, one arm per version.

use wasmtime::Store;
use wasmtime::component::{Instance, InstancePre};

use super::bindings::{v0_1, v0_2, v0_3};
use super::convert;
use super::error::{CallError, LoadError, MAX_PLUGIN_MESSAGE};
use super::log_budget::one_line;
use super::state::HostState;
use crate::contract::{Failure, Manifest, RawFailure, RawResponse, RawVerdict, Request, schema_bounds};
use wasmop_types::AdmissionRequest;

/// The WIT package version a plugin was built against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WitVersion {
    /// `wasmop:plugin@0.1.0`: reconcile only.
    V0_1,
    /// `wasmop:plugin@0.2.0`: reconcile, admission, or both.
    V0_2,
    /// `wasmop:plugin@0.3.0`: as 0.2.0; failures carry status and conditions, webhooks match
    /// conditions.
    V0_3,
}

impl std::fmt::Display for WitVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WitVersion::V0_1 => "0.1.0",
            WitVersion::V0_2 => "0.2.0",
            WitVersion::V0_3 => "0.3.0",
        })
    }
}

/// Where a component's exported functions are, by WIT version.
pub(super) enum Exports {
    /// 0.1.0: one interface with `manifest` and `reconcile`.
    V0_1(v0_1::guest::GuestIndices),
    /// 0.2.0: `plugin`, and `reconciler` and/or `admission`.
    V0_2 {
        plugin: v0_2::plugin::GuestIndices,
        reconciler: Option<v0_2::reconciler::GuestIndices>,
        admission: Option<v0_2::admission::GuestIndices>,
    },
    /// 0.3.0: as 0.2.0.
    V0_3 {
        plugin: v0_3::plugin::GuestIndices,
        reconciler: Option<v0_3::reconciler::GuestIndices>,
        admission: Option<v0_3::admission::GuestIndices>,
    },
}

/// What a reconcile call returned, not validated yet.
pub(super) enum Reconciled {
    /// A response.
    Response(RawResponse),
    /// The plugin's own error: whether to retry, and what it carries (a message only, before
    /// WIT 0.3.0).
    Failed {
        /// Retryable (backoff) or terminal (wait for a change).
        retryable: bool,
        /// Its message, status and conditions.
        failure: RawFailure,
    },
}

impl Reconciled {
    /// A failure of a plugin whose WIT version carries only a message.
    fn message_only(retryable: bool, message: String) -> Self {
        Reconciled::Failed {
            retryable,
            failure: RawFailure { message: one_line(&message, MAX_PLUGIN_MESSAGE), ..RawFailure::default() },
        }
    }
}

type Wasm<T> = wasmtime::Result<T>;

impl Exports {
    /// Find the exports of a linked component.
    ///
    /// # Errors
    /// [`LoadError::WrongWorld`] naming the worlds the host accepts when the component exports
    /// none of them.
    pub(super) fn find(pre: &InstancePre<HostState>) -> Result<Self, LoadError> {
        let component = pre.component();
        let has = |name: &str| component.get_export_index(None, name).is_some();
        let wrong_world = |e: wasmtime::Error| LoadError::WrongWorld(format!("{e:#}"));
        if has(v0_1::RECONCILER) {
            return v0_1::guest::GuestIndices::new(pre).map(Exports::V0_1).map_err(wrong_world);
        }
        // A 0.2.0 or 0.3.0 plugin exports `plugin` and at least one of the other two.
        let (exports, [plugin, reconciler, admission]) = if has(v0_3::PLUGIN) {
            let reconciler = has(v0_3::RECONCILER).then(|| v0_3::reconciler::GuestIndices::new(pre)).transpose();
            let admission = has(v0_3::ADMISSION).then(|| v0_3::admission::GuestIndices::new(pre)).transpose();
            let exports = Exports::V0_3 {
                plugin: v0_3::plugin::GuestIndices::new(pre).map_err(wrong_world)?,
                reconciler: reconciler.map_err(wrong_world)?,
                admission: admission.map_err(wrong_world)?,
            };
            (exports, [v0_3::PLUGIN, v0_3::RECONCILER, v0_3::ADMISSION])
        } else if has(v0_2::PLUGIN) {
            let reconciler = has(v0_2::RECONCILER).then(|| v0_2::reconciler::GuestIndices::new(pre)).transpose();
            let admission = has(v0_2::ADMISSION).then(|| v0_2::admission::GuestIndices::new(pre)).transpose();
            let exports = Exports::V0_2 {
                plugin: v0_2::plugin::GuestIndices::new(pre).map_err(wrong_world)?,
                reconciler: reconciler.map_err(wrong_world)?,
                admission: admission.map_err(wrong_world)?,
            };
            (exports, [v0_2::PLUGIN, v0_2::RECONCILER, v0_2::ADMISSION])
        } else {
            return Err(LoadError::WrongWorld(format!(
                "exports none of {}, {} and {}",
                v0_1::RECONCILER,
                v0_2::PLUGIN,
                v0_3::PLUGIN
            )));
        };
        if !exports.reconciles() && !exports.admits() {
            return Err(LoadError::WrongWorld(format!("exports {plugin} but neither {reconciler} nor {admission}")));
        }
        Ok(exports)
    }

    pub(super) fn version(&self) -> WitVersion {
        match self {
            Exports::V0_1(_) => WitVersion::V0_1,
            Exports::V0_2 { .. } => WitVersion::V0_2,
            Exports::V0_3 { .. } => WitVersion::V0_3,
        }
    }

    pub(super) fn reconciles(&self) -> bool {
        matches!(self, Exports::V0_1(_) | Exports::V0_2 { reconciler: Some(_), .. } | Exports::V0_3 { reconciler: Some(_), .. })
    }

    pub(super) fn admits(&self) -> bool {
        matches!(self, Exports::V0_2 { admission: Some(_), .. } | Exports::V0_3 { admission: Some(_), .. })
    }

    /// Type-check every export of an instance against the bindings.
    ///
    /// # Errors
    /// [`LoadError::WrongWorld`] for the first function whose type differs.
    pub(super) fn check(&self, store: &mut Store<HostState>, instance: &Instance) -> Result<(), LoadError> {
        let wrong_world = |e: wasmtime::Error| LoadError::WrongWorld(format!("{e:#}"));
        match self {
            Exports::V0_1(guest) => guest.load(&mut *store, instance).map(drop).map_err(wrong_world),
            Exports::V0_2 { plugin, reconciler, admission } => {
                plugin.load(&mut *store, instance).map_err(wrong_world)?;
                if let Some(r) = reconciler {
                    r.load(&mut *store, instance).map_err(wrong_world)?;
                }
                if let Some(a) = admission {
                    a.load(&mut *store, instance).map_err(wrong_world)?;
                }
                Ok(())
            }
            Exports::V0_3 { plugin, reconciler, admission } => {
                plugin.load(&mut *store, instance).map_err(wrong_world)?;
                if let Some(r) = reconciler {
                    r.load(&mut *store, instance).map_err(wrong_world)?;
                }
                if let Some(a) = admission {
                    a.load(&mut *store, instance).map_err(wrong_world)?;
                }
                Ok(())
            }
        }
    }

    /// Ask for the manifest and validate it, its configuration schema within the host's bounds.
    pub(super) async fn describe(&self, store: &mut Store<HostState>, instance: &Instance) -> Wasm<Result<Manifest, LoadError>> {
        let manifest = match self {
            Exports::V0_1(guest) => {
                let raw = guest.load(&mut *store, instance)?.call_manifest(store).await?;
                convert::v0_1::manifest(raw).map_err(LoadError::from)
            }
            Exports::V0_2 { plugin, .. } => {
                let raw = plugin.load(&mut *store, instance)?.call_manifest(store).await?;
                convert::v0_2::manifest(raw).map_err(LoadError::from)
            }
            Exports::V0_3 { plugin, .. } => {
                let raw = plugin.load(&mut *store, instance)?.call_manifest(store).await?;
                convert::v0_3::manifest(raw).map_err(LoadError::from)
            }
        };
        Ok(manifest.and_then(|m| match &m.config_schema {
            Some(schema) => schema_bounds::check(schema).map(|()| m).map_err(LoadError::ConfigSchema),
            None => Ok(m),
        }))
    }

    /// Call `reconcile`; the response or failure is not validated yet.
    pub(super) async fn reconcile(
        &self,
        store: &mut Store<HostState>,
        instance: &Instance,
        request: &Request,
    ) -> Wasm<Result<Reconciled, CallError>> {
        let does_not_reconcile = |name: &str| CallError::Host(format!("the plugin does not reconcile (it exports no {name})"));
        Ok(match self {
            Exports::V0_1(guest) => {
                let raw = convert::v0_1::request(request);
                Ok(match guest.load(&mut *store, instance)?.call_reconcile(store, &raw).await? {
                    Ok(response) => Reconciled::Response(convert::v0_1::response(response)),
                    Err(v0_1::guest::ReconcileError::Retryable(m)) => Reconciled::message_only(true, m),
                    Err(v0_1::guest::ReconcileError::Terminal(m)) => Reconciled::message_only(false, m),
                })
            }
            Exports::V0_2 { reconciler: Some(guest), .. } => {
                let raw = convert::v0_2::request(request);
                Ok(match guest.load(&mut *store, instance)?.call_reconcile(store, &raw).await? {
                    Ok(response) => Reconciled::Response(convert::v0_2::response(response)),
                    Err(v0_2::reconciler::ReconcileError::Retryable(m)) => Reconciled::message_only(true, m),
                    Err(v0_2::reconciler::ReconcileError::Terminal(m)) => Reconciled::message_only(false, m),
                })
            }
            Exports::V0_3 { reconciler: Some(guest), .. } => {
                let raw = convert::v0_3::request(request);
                Ok(match guest.load(&mut *store, instance)?.call_reconcile(store, &raw).await? {
                    Ok(response) => Reconciled::Response(convert::v0_3::response(response)),
                    Err(e) => {
                        let (retryable, failure) = convert::v0_3::failure(e);
                        Reconciled::Failed { retryable, failure }
                    }
                })
            }
            Exports::V0_2 { reconciler: None, .. } => Err(does_not_reconcile(v0_2::RECONCILER)),
            Exports::V0_3 { reconciler: None, .. } => Err(does_not_reconcile(v0_3::RECONCILER)),
        })
    }

    /// Call `admit`; the verdict is not validated yet.
    pub(super) async fn admit(
        &self,
        store: &mut Store<HostState>,
        instance: &Instance,
        webhook: &str,
        request: &AdmissionRequest,
    ) -> Wasm<Result<RawVerdict, CallError>> {
        let failed = |m: String| CallError::Terminal(Failure::message(one_line(&m, MAX_PLUGIN_MESSAGE)));
        Ok(match self {
            Exports::V0_2 { admission: Some(guest), .. } => {
                let raw = convert::v0_2::admission_request(request);
                match guest.load(&mut *store, instance)?.call_admit(store, webhook, &raw).await? {
                    Ok(verdict) => Ok(convert::v0_2::verdict(verdict)),
                    Err(v0_2::admission::AdmissionError::UnknownWebhook(_)) => Err(CallError::NoSuchWebhook(webhook.to_owned())),
                    Err(v0_2::admission::AdmissionError::Failed(m)) => Err(failed(m)),
                }
            }
            Exports::V0_3 { admission: Some(guest), .. } => {
                let raw = convert::v0_3::admission_request(request);
                match guest.load(&mut *store, instance)?.call_admit(store, webhook, &raw).await? {
                    Ok(verdict) => Ok(convert::v0_3::verdict(verdict)),
                    Err(v0_3::admission::AdmissionError::UnknownWebhook(_)) => Err(CallError::NoSuchWebhook(webhook.to_owned())),
                    Err(v0_3::admission::AdmissionError::Failed(m)) => Err(failed(m)),
                }
            }
            _ => Err(CallError::NoSuchWebhook(webhook.to_owned())),
        })
    }
}
