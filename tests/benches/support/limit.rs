//! The limit run Z with Pods (`SIZE` > 0): the one status write each parent needs, made when
//! its Deployment is available.
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

use std::collections::{BTreeSet, HashMap, HashSet};
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
    /// Parents created and not yet written, with their generation.
    waiting: HashMap<String, i64>,
    /// Deployments (named like their parent) whose `availableReplicas` reached the size.
    available: HashSet<String>,
    /// Each parent's Pods, by name.
    pods: HashMap<String, BTreeSet<String>>,
}

impl Known {
    /// The status to write for `name` now, if its time has come (and never twice).
    fn due(&mut self, name: &str, size: usize) -> Option<(i64, Vec<String>)> {
        let pods = self.pods.get(name).map_or(0, BTreeSet::len);
        if !self.available.contains(name) || pods < size {
            return None;
        }
        let generation = self.waiting.remove(name)?;
        Some((generation, self.pods[name].iter().cloned().collect()))
    }
}

/// The limit's watches and status writes, on the runtime it was started on; stopped when
/// dropped.
pub struct StatusWriter {
    known: Arc<Mutex<Known>>,
    due: mpsc::UnboundedSender<(String, i64, Vec<String>)>,
    size: usize,
    tasks: Vec<JoinHandle<()>>,
}

impl StatusWriter {
    /// Watch the Deployments and Pods of `namespace` and write the statuses of `crs` (at most
    /// `inflight` patches in flight) for parents of `size` Pods.
    pub fn start(client: &kube::Client, crs: Api<DynamicObject>, namespace: &str, size: usize, inflight: usize) -> Self {
        let known = Arc::new(Mutex::new(Known::default()));
        let (due, rx) = mpsc::unbounded_channel::<(String, i64, Vec<String>)>();
        let writes = tokio::spawn(async move {
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) })
                .for_each_concurrent(inflight.max(1), |(name, generation, nodes)| {
                    let crs = crs.clone();
                    async move {
                        let message = format!("{}/{size} replicas available", nodes.len());
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
                    if usize::try_from(ready).unwrap_or(0) >= size {
                        let name = d.name_any();
                        let mut k = known.lock().expect("limit lock");
                        k.available.insert(name.clone());
                        send_due(&mut k, &due, &name, size);
                    }
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
                    send_due(&mut k, &due, &parent, size);
                }
            })
        };
        Self { known, due, size, tasks: vec![writes, deployments, pods] }
    }

    /// The parent `name` of `generation` was created and its Deployment applied: write its
    /// status once its Deployment is available.
    pub fn expect(&self, name: &str, generation: i64) {
        let mut k = self.known.lock().expect("limit lock");
        k.waiting.insert(name.to_owned(), generation);
        send_due(&mut k, &self.due, name, self.size);
    }
}

fn send_due(k: &mut Known, due: &mpsc::UnboundedSender<(String, i64, Vec<String>)>, name: &str, size: usize) {
    if let Some((generation, nodes)) = k.due(name, size) {
        let _ = due.send((name.to_owned(), generation, nodes));
    }
}

impl Drop for StatusWriter {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}
