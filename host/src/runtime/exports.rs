//! [`Exports`]: which WIT version and which interfaces a plugin component implements, and the
//! calls into them, one arm per version.

use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, Instance, InstancePre, TypedFunc};

use super::bindings::{v0_1, v0_2};
use super::convert;
use super::error::{CallError, LoadError, MAX_PLUGIN_MESSAGE};
use super::log_budget::one_line;
use super::state::HostState;
use crate::contract::{Manifest, RawResponse, RawVerdict, Request};
use wasmop_types::AdmissionRequest;

/// The WIT package version a plugin was built against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WitVersion {
    /// `wasmop:plugin@0.1.0`: reconcile only.
    V0_1,
    /// `wasmop:plugin@0.2.0`: reconcile, admission, or both.
    V0_2,
}

impl std::fmt::Display for WitVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WitVersion::V0_1 => "0.1.0",
            WitVersion::V0_2 => "0.2.0",
        })
    }
}

/// Where a component's exported functions are, by WIT version.
pub(super) enum Exports {
    /// 0.1.0: one interface with `manifest` and `reconcile`.
    V0_1(v0_1::guest::GuestIndices),
    /// 0.2.0: `plugin`, and `reconciler` and/or `admission`, with the index of the function
    /// each call uses ([`Exports::reconcile`], [`Exports::admit`]).
    V0_2 {
        plugin: v0_2::plugin::GuestIndices,
        reconciler: Option<(v0_2::reconciler::GuestIndices, ComponentExportIndex)>,
        admission: Option<(v0_2::admission::GuestIndices, ComponentExportIndex)>,
    },
}

/// What `reconcile` of 0.2.0 returns, as the bindings lift it.
type ReconcileResult = (Result<v0_2::reconciler::Response, v0_2::reconciler::ReconcileError>,);
/// What `admit` of 0.2.0 returns, as the bindings lift it.
type AdmitResult = (Result<v0_2::admission::Verdict, v0_2::admission::AdmissionError>,);

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
        if has(v0_2::PLUGIN) {
            // The function a call uses, inside its interface (bindgen's indices keep theirs private).
            let function = |interface: &str, name: &str| {
                let interface = component.get_export_index(None, interface);
                component
                    .get_export_index(interface.as_ref(), name)
                    .ok_or_else(|| LoadError::WrongWorld(format!("{interface:?} exports no function {name}")))
            };
            let reconciler = if has(v0_2::RECONCILER) {
                let indices = v0_2::reconciler::GuestIndices::new(pre).map_err(wrong_world)?;
                Some((indices, function(v0_2::RECONCILER, "reconcile")?))
            } else {
                None
            };
            let admission = if has(v0_2::ADMISSION) {
                let indices = v0_2::admission::GuestIndices::new(pre).map_err(wrong_world)?;
                Some((indices, function(v0_2::ADMISSION, "admit")?))
            } else {
                None
            };
            let exports =
                Exports::V0_2 { plugin: v0_2::plugin::GuestIndices::new(pre).map_err(wrong_world)?, reconciler, admission };
            if !exports.reconciles() && !exports.admits() {
                return Err(LoadError::WrongWorld(format!(
                    "exports {} but neither {} nor {}",
                    v0_2::PLUGIN,
                    v0_2::RECONCILER,
                    v0_2::ADMISSION
                )));
            }
            return Ok(exports);
        }
        Err(LoadError::WrongWorld(format!("exports neither {} nor {}", v0_1::RECONCILER, v0_2::PLUGIN)))
    }

    pub(super) fn version(&self) -> WitVersion {
        match self {
            Exports::V0_1(_) => WitVersion::V0_1,
            Exports::V0_2 { .. } => WitVersion::V0_2,
        }
    }

    pub(super) fn reconciles(&self) -> bool {
        matches!(self, Exports::V0_1(_) | Exports::V0_2 { reconciler: Some(_), .. })
    }

    pub(super) fn admits(&self) -> bool {
        matches!(self, Exports::V0_2 { admission: Some(_), .. })
    }

    /// Type-check every export of an instance against the bindings. [`Plugin::new`](super::Plugin)
    /// does it once per loaded version, before any other call: the types of a component's
    /// exports are the same in all its instances, so the calls then skip the check.
    ///
    /// # Errors
    /// [`LoadError::WrongWorld`] for the first function whose type differs.
    pub(super) fn check(&self, store: &mut Store<HostState>, instance: &Instance) -> Result<(), LoadError> {
        let wrong_world = |e: wasmtime::Error| LoadError::WrongWorld(format!("{e:#}"));
        match self {
            Exports::V0_1(guest) => guest.load(&mut *store, instance).map(drop).map_err(wrong_world),
            Exports::V0_2 { plugin, reconciler, admission } => {
                plugin.load(&mut *store, instance).map_err(wrong_world)?;
                if let Some((r, _)) = reconciler {
                    r.load(&mut *store, instance).map_err(wrong_world)?;
                }
                if let Some((a, _)) = admission {
                    a.load(&mut *store, instance).map_err(wrong_world)?;
                }
                Ok(())
            }
        }
    }

    /// Ask for the manifest and validate it.
    pub(super) async fn describe(&self, store: &mut Store<HostState>, instance: &Instance) -> Wasm<Result<Manifest, LoadError>> {
        Ok(match self {
            Exports::V0_1(guest) => {
                let raw = guest.load(&mut *store, instance)?.call_manifest(store).await?;
                convert::v0_1::manifest(raw).map_err(LoadError::from)
            }
            Exports::V0_2 { plugin, .. } => {
                let raw = plugin.load(&mut *store, instance)?.call_manifest(store).await?;
                convert::v0_2::manifest(raw).map_err(LoadError::from)
            }
        })
    }

    /// Call `reconcile`; the response is not validated yet.
    pub(super) async fn reconcile(
        &self,
        store: &mut Store<HostState>,
        instance: &Instance,
        request: &Request,
    ) -> Wasm<Result<RawResponse, CallError>> {
        let message = |m: String| one_line(&m, MAX_PLUGIN_MESSAGE);
        Ok(match self {
            Exports::V0_1(guest) => {
                let raw = convert::v0_1::request(request);
                match guest.load(&mut *store, instance)?.call_reconcile(store, &raw).await? {
                    Ok(response) => Ok(convert::v0_1::response(response)),
                    Err(v0_1::guest::ReconcileError::Retryable(m)) => Err(CallError::Retryable(message(m))),
                    Err(v0_1::guest::ReconcileError::Terminal(m)) => Err(CallError::Terminal(message(m))),
                }
            }
            Exports::V0_2 { reconciler: Some((_, reconcile)), .. } => {
                let raw = convert::v0_2::request(request);
                let func = instance.get_func(&mut *store, reconcile).ok_or_else(|| missing("reconcile"))?;
                // SAFETY: `check` type-checked this export of this component against these
                // bindings when the version was loaded (every instance has the same types).
                let typed = unsafe { TypedFunc::<(&v0_2::reconciler::Request,), ReconcileResult>::new_unchecked(func) };
                match typed.call_async(&mut *store, (&raw,)).await?.0 {
                    Ok(response) => Ok(convert::v0_2::response(response)),
                    Err(v0_2::reconciler::ReconcileError::Retryable(m)) => Err(CallError::Retryable(message(m))),
                    Err(v0_2::reconciler::ReconcileError::Terminal(m)) => Err(CallError::Terminal(message(m))),
                }
            }
            Exports::V0_2 { reconciler: None, .. } => {
                Err(CallError::Host(format!("the plugin does not reconcile (it exports no {})", v0_2::RECONCILER)))
            }
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
        let Exports::V0_2 { admission: Some((_, admit)), .. } = self else {
            return Ok(Err(CallError::NoSuchWebhook(webhook.to_owned())));
        };
        let raw = convert::v0_2::admission_request(request);
        let func = instance.get_func(&mut *store, admit).ok_or_else(|| missing("admit"))?;
        // SAFETY: as in `reconcile`: `check` type-checked this export when the version was loaded.
        let typed = unsafe { TypedFunc::<(&str, &v0_2::admission::AdmissionRequest), AdmitResult>::new_unchecked(func) };
        Ok(match typed.call_async(&mut *store, (webhook, &raw)).await?.0 {
            Ok(verdict) => Ok(convert::v0_2::verdict(verdict)),
            Err(v0_2::admission::AdmissionError::UnknownWebhook(_)) => Err(CallError::NoSuchWebhook(webhook.to_owned())),
            Err(v0_2::admission::AdmissionError::Failed(m)) => Err(CallError::Terminal(one_line(&m, MAX_PLUGIN_MESSAGE))),
        })
    }
}

/// An export found at load time that an instance lacks: not possible for instances of the
/// same component, so a host error.
fn missing(function: &str) -> wasmtime::Error {
    wasmtime::Error::msg(format!("the instance has no export {function}"))
}
