//! The limit run Z with Pods (`SIZE` > 0): the one status write each parent needs, made when
//! its Deployment is available (after the bulk's creates, and after the rollout's resizes).
//!
//! Without Pods the limit writes `Available=True` right after the apply. With Pods the status
//! can only say so once kube-controller-manager, kube-scheduler and kwok have brought the
//! parent's Pods up, so the limit watches what any controller of the example must watch (the
//! Deployments and the Pods labelled `app=memcached`) and patches each parent's status once:
//! `Available=True` for its generation and `status.nodes` naming its Pods, as the plugin's
//! last status does. Nothing else is read or written: the pace this gives is the control
//! plane's own with Pods, the ceiling every controller's time to all `Available=True` is read
//! against.
//!
//! Included by path (`#[path = "support/limit.rs"] mod limit;`).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The label the example's Pods carry their parent's name in.
const PARENT_LABEL: &str = "memcached_cr";

/// What the writer knows of each parent.
#[derive(Debug, Default)]
struct Known {
    /// Parents whose status is not yet written: their generation and how many Pods they want.
    waiting: HashMap<String, (i64, usize)>,
    /// Each Deployment's (named like its parent) `availableReplicas`.
    available: HashMap<String, usize>,
    /// Each parent's Pods, by name.
    pods: HashMap<String, BTreeSet<String>>,
}

impl Known {
    /// The status to write for `name` now, if its time has come (once per generation).
    fn due(&mut self, name: &str) -> Option<Due> {
        let &(generation, size) = self.waiting.get(name)?;
        let pods = self.pods.get(name)?;
        let ready = self.available.get(name).copied().unwrap_or(0);
        if ready < size || pods.len() < size {
            return None;
        }
        self.waiting.remove(name);
        Some(Due { name: name.to_owned(), generation, size, ready, nodes: pods.iter().cloned().collect() })
    }
}

/// A status to write: `Available=True` for `generation`, `nodes` naming the parent's Pods.
#[derive(Debug)]
struct Due {
    name: String,
    generation: i64,
    size: usize,
    /// The Deployment's `availableReplicas`.
    ready: usize,
    nodes: Vec<String>,
}

/// The limit's watches and status writes, on the runtime it was started on; stopped when
/// dropped.
pub struct StatusWriter {
    known: Arc<Mutex<Known>>,
    due: mpsc::UnboundedSender<Due>,
    tasks: Vec<JoinHandle<()>>,
}

impl StatusWriter {
    /// Watch the Deployments and Pods of `namespace` and write the statuses of `crs` (at most
    /// `inflight` patches in flight).
    pub fn start(client: &kube::Client, crs: Api<DynamicObject>, namespace: &str, inflight: usize) -> Self {
        let known = Arc::new(Mutex::new(Known::default()));
        let (due, rx) = mpsc::unbounded_channel::<Due>();
        let writes = tokio::spawn(async move {
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) })
                .for_each_concurrent(inflight.max(1), |Due { name, generation, size, ready, nodes }| {
                    let crs = crs.clone();
                    async move {
                        let message = format!("{ready}/{size} replicas available");
                        let status = json!({"status": {"nodes": nodes, "conditions": [{"type": "Available",
                            "status": "True", "reason": "MinimumReplicasAvailable", "message": message,
                            "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
                        if let Err(e) = crs.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await {
                            eprintln!("[converge] the limit's status write of {name} failed: {e}");
                        }
                    }
                })
                .await;
        });
        let deployments = {
            let (known, due) = (Arc::clone(&known), due.clone());
            let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
            tokio::spawn(async move {
                let mut events = watcher(api, watcher::Config::default()).default_backoff().applied_objects().boxed();
                while let Some(event) = events.next().await {
                    let Ok(d) = event else { continue };
                    let ready = d.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0);
                    let name = d.name_any();
                    let mut k = known.lock().expect("limit lock");
                    k.available.insert(name.clone(), usize::try_from(ready).unwrap_or(0));
                    send_due(&mut k, &due, &name);
                }
            })
        };
        let pods = {
            let (known, due) = (Arc::clone(&known), due.clone());
            let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
            tokio::spawn(async move {
                let config = watcher::Config::default().labels("app=memcached");
                let mut events = watcher(api, config).default_backoff().boxed();
                while let Some(event) = events.next().await {
                    let (pod, gone) = match event {
                        Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => (p, false),
                        Ok(watcher::Event::Delete(p)) => (p, true),
                        _ => continue,
                    };
                    let Some(parent) = pod.labels().get(PARENT_LABEL).cloned() else { continue };
                    let mut k = known.lock().expect("limit lock");
                    let names = k.pods.entry(parent.clone()).or_default();
                    if gone {
                        names.remove(&pod.name_any());
                    } else {
                        names.insert(pod.name_any());
                    }
                    send_due(&mut k, &due, &parent);
                }
            })
        };
        Self { known, due, tasks: vec![writes, deployments, pods] }
    }

    /// The parent `name` at `generation` wants `size` Pods and its Deployment was applied:
    /// write its status once the Deployment has that many available.
    pub fn expect(&self, name: &str, generation: i64, size: usize) {
        let mut k = self.known.lock().expect("limit lock");
        k.waiting.insert(name.to_owned(), (generation, size));
        send_due(&mut k, &self.due, name);
    }
}

fn send_due(k: &mut Known, due: &mpsc::UnboundedSender<Due>, name: &str) {
    if let Some(d) = k.due(name) {
        let _ = due.send(d);
    }
}

impl Drop for StatusWriter {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}
