//! [`PluginConfig`]: the configuration a running plugin is given, kept in step with its source.
//!
//! The source is the host policy's ([`ConfigSource`]): none (`{}`), an inline object, or a
//! ConfigMap the host watches (one object, by a `metadata.name` field selector). Every
//! configuration read is checked against the serving version's schema ([`check`]); a valid one
//! that differs from the one in use replaces it and queues every parent; an invalid one (or a
//! ConfigMap deleted) changes nothing but the status: the last valid configuration stays in use,
//! and [`ConfigStatus::error`] says why the new one is not (the `WasmPlugin` shows it as
//! `ConfigValid=False`). Without any valid configuration a plugin does not start.

use std::pin::pin;
use std::sync::{Arc, Mutex, Weak};

use arc_swap::ArcSwap;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;

use super::check::{ConfigError, check, from_config_map};
use crate::contract::Manifest;
use crate::policy::{ConfigMapRef, ConfigSource};

/// What a plugin's configuration is, as its `WasmPlugin` and `wasmop inspect` show it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigStatus {
    /// Where it comes from: `none`, `policy`, `ConfigMap NAMESPACE/NAME`.
    pub source: String,
    /// The configuration in use: the last valid one (`None` when none ever was).
    pub in_use: Option<Value>,
    /// Why the latest configuration read is not in use, if it is not.
    pub error: Option<String>,
}

impl ConfigStatus {
    /// The status of a plugin refused for its configuration: nothing in use.
    pub fn refused(source: String, error: &ConfigError) -> Self {
        Self { source, in_use: None, error: Some(error.to_string()) }
    }
}

/// A running plugin's configuration: the one in use and its status.
pub struct PluginConfig {
    source: ConfigSource,
    current: ArcSwap<Value>,
    /// The latest configuration read that parsed, valid or not: a new version whose schema
    /// accepts it uses it ([`PluginConfig::reoffer`]).
    latest: Mutex<Option<Value>>,
    status: tokio::sync::watch::Sender<ConfigStatus>,
    watcher: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for PluginConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginConfig").field("source", &self.source).field("current", &self.current.load()).finish()
    }
}

impl PluginConfig {
    /// Read the configuration from `source` (a ConfigMap with one `get`) and check it against
    /// `manifest`.
    ///
    /// # Errors
    /// [`ConfigError`] when it cannot be read or is not valid: the plugin is not started.
    pub async fn load(source: ConfigSource, manifest: &Manifest, client: &kube::Client) -> Result<Self, ConfigError> {
        let config = match &source {
            ConfigSource::None => Value::Object(Default::default()),
            ConfigSource::Inline(value) => value.clone(),
            ConfigSource::ConfigMap(at) => read(client, at).await?,
        };
        check(manifest, &config)?;
        let status = ConfigStatus { source: source.to_string(), in_use: Some(config.clone()), error: None };
        Ok(Self {
            source,
            current: ArcSwap::from_pointee(config),
            latest: Mutex::default(),
            status: tokio::sync::watch::channel(status).0,
            watcher: Mutex::default(),
        })
    }

    /// Where the configuration comes from.
    pub fn source(&self) -> &ConfigSource {
        &self.source
    }

    /// The configuration in use.
    pub fn current(&self) -> Arc<Value> {
        self.current.load_full()
    }

    /// The current status.
    pub fn status(&self) -> ConfigStatus {
        self.status.borrow().clone()
    }

    /// The status now and after every change.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<ConfigStatus> {
        self.status.subscribe()
    }

    /// Whether a new version of the plugin (its `manifest`) accepts the configuration in use.
    ///
    /// # Errors
    /// [`ConfigError`] from [`check`]: the new version is not put in service.
    pub fn accepts(&self, manifest: &Manifest) -> Result<(), ConfigError> {
        check(manifest, &self.current())
    }

    /// Take a configuration just read (or why none could be) for the version `manifest`: a valid
    /// one is used from now on; an invalid one only changes the status. Returns whether the
    /// configuration in use changed.
    pub fn offer(&self, read: Result<Value, ConfigError>, manifest: &Manifest) -> bool {
        let source = self.source.to_string();
        if let Ok(config) = &read {
            *self.latest.lock().expect("latest config lock") = Some(config.clone());
        }
        match read.and_then(|config| check(manifest, &config).map(|()| config)) {
            Ok(config) => {
                let changed = *self.current.load_full() != config;
                if changed {
                    self.current.store(Arc::new(config.clone()));
                }
                self.set_status(ConfigStatus { source, in_use: Some(config), error: None });
                changed
            }
            Err(error) => {
                tracing::warn!(plugin = %manifest.name, %source, %error, "configuration not valid; the last valid one stays in use");
                self.set_status(ConfigStatus { source, in_use: Some((*self.current()).clone()), error: Some(error.to_string()) });
                false
            }
        }
    }

    /// Offer the latest configuration read again, to a new version (`manifest`) that may accept
    /// what the previous one refused. Returns whether the configuration in use changed.
    pub fn reoffer(&self, manifest: &Manifest) -> bool {
        let latest = self.latest.lock().expect("latest config lock").clone();
        match latest {
            Some(config) if *self.current() != config => self.offer(Ok(config), manifest),
            _ => false,
        }
    }

    fn set_status(&self, status: ConfigStatus) {
        self.status.send_if_modified(|s| {
            let changed = *s != status;
            *s = status;
            changed
        });
    }

    /// Follow a ConfigMap source from now on, feeding what it reads to `controller` (no-op for
    /// the other sources). Stops with [`PluginConfig::stop`] or when the controller is dropped.
    pub fn follow(&self, controller: Weak<dyn ConfigReader>, client: kube::Client) {
        let ConfigSource::ConfigMap(at) = &self.source else { return };
        let task = tokio::spawn(watch_config_map(client, at.clone(), controller));
        if let Some(old) = self.watcher.lock().expect("config watcher lock").replace(task) {
            old.abort();
        }
    }

    /// Stop following the source.
    pub fn stop(&self) {
        if let Some(task) = self.watcher.lock().expect("config watcher lock").take() {
            task.abort();
        }
    }
}

/// Told about every configuration read from a followed source (the plugin's controller).
pub trait ConfigReader: Send + Sync {
    /// A configuration was read from the source, or why none could be.
    fn config_read(&self, read: Result<Value, ConfigError>);
}

fn described(at: &ConfigMapRef) -> String {
    format!("ConfigMap {}/{}", at.namespace, at.name)
}

/// One `get` of the ConfigMap.
async fn read(client: &kube::Client, at: &ConfigMapRef) -> Result<Value, ConfigError> {
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), &at.namespace);
    let from = described(at);
    match api.get_opt(&at.name).await {
        Ok(Some(map)) => from_config_map(map.data.as_ref(), &from),
        Ok(None) => Err(ConfigError::Unavailable { from, message: "not found".into() }),
        Err(e) => Err(ConfigError::Unavailable { from, message: format!("cannot be read: {e}") }),
    }
}

/// Watch the ConfigMap `at` (and only it) and feed every version of it to `controller`.
async fn watch_config_map(client: kube::Client, at: ConfigMapRef, controller: Weak<dyn ConfigReader>) {
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, &at.namespace);
    let from = described(&at);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", at.name));
    let mut events = pin!(crate::watch::backoff::with_backoff(watcher::watcher(api, config)));
    let mut listed = false;
    while let Some(event) = events.next().await {
        let read = match event {
            Ok(Event::Apply(map) | Event::InitApply(map)) => {
                listed = true;
                Some(from_config_map(map.data.as_ref(), &from))
            }
            Ok(Event::Delete(_)) => Some(Err(ConfigError::Unavailable { from: from.clone(), message: "was deleted".into() })),
            Ok(Event::Init) => {
                listed = false;
                None
            }
            Ok(Event::InitDone) => {
                (!listed).then(|| Err(ConfigError::Unavailable { from: from.clone(), message: "not found".into() }))
            }
            Err(e) => {
                tracing::warn!(source = %from, error = %e, "cannot watch the plugin's configuration; retrying");
                None
            }
        };
        let Some(controller) = controller.upgrade() else { return };
        if let Some(read) = read {
            controller.config_read(read);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::contract::manifest::fixtures;

    fn manifest() -> Manifest {
        let schema = json!({"type": "object", "properties": {"image": {"type": "string"}}, "additionalProperties": false});
        Manifest { config_schema: Some(schema), ..fixtures::memcached("app=memcached") }
    }

    fn inline(config: Value) -> PluginConfig {
        let source = ConfigSource::Inline(config.clone());
        let status = ConfigStatus { source: source.to_string(), in_use: Some(config.clone()), error: None };
        PluginConfig {
            source,
            current: ArcSwap::from_pointee(config),
            latest: Mutex::default(),
            status: tokio::sync::watch::channel(status).0,
            watcher: Mutex::default(),
        }
    }

    #[test]
    fn a_valid_new_config_is_used_and_reported_as_changed() {
        let config = inline(json!({"image": "a"}));
        assert!(config.offer(Ok(json!({"image": "b"})), &manifest()));
        assert_eq!(*config.current(), json!({"image": "b"}));
        assert_eq!(config.status().error, None);
        assert!(!config.offer(Ok(json!({"image": "b"})), &manifest()), "the same config again changes nothing");
    }

    #[test]
    fn an_invalid_config_keeps_the_last_valid_one_and_says_why() {
        let config = inline(json!({"image": "a"}));
        assert!(!config.offer(Ok(json!({"image": 5})), &manifest()));
        assert_eq!(*config.current(), json!({"image": "a"}));
        let status = config.status();
        assert_eq!(status.in_use, Some(json!({"image": "a"})));
        assert_eq!(status.error.as_deref(), Some("invalid config at /image: 5 is not of type \"string\""));
        let gone = ConfigError::Unavailable { from: "ConfigMap ops/c".into(), message: "was deleted".into() };
        assert!(!config.offer(Err(gone), &manifest()));
        assert_eq!(config.status().error.as_deref(), Some("ConfigMap ops/c: was deleted"));
        assert!(!config.offer(Ok(json!({"image": "a"})), &manifest()), "back to the config in use: nothing to reconcile");
        assert_eq!(config.status().error, None, "but the error is cleared");
    }

    #[test]
    fn a_new_version_must_accept_the_config_in_use() {
        let config = inline(json!({"image": "a"}));
        assert_eq!(config.accepts(&manifest()), Ok(()));
        let stricter = Manifest { config_schema: Some(json!({"required": ["port"]})), ..manifest() };
        assert!(matches!(config.accepts(&stricter), Err(ConfigError::Invalid { .. })));
    }

    #[test]
    fn a_new_version_takes_the_latest_config_its_schema_accepts() {
        let config = inline(json!({"image": "a"}));
        assert!(!config.offer(Ok(json!({"image": "b", "port": 1})), &manifest()), "refused: v1 has no port");
        let v2 = Manifest { config_schema: Some(json!({"type": "object"})), ..manifest() };
        assert!(config.reoffer(&v2));
        assert_eq!(*config.current(), json!({"image": "b", "port": 1}));
        assert_eq!(config.status().error, None);
        assert!(!config.reoffer(&v2), "nothing newer");
    }

    #[tokio::test]
    async fn inline_and_absent_configs_load_without_a_cluster() {
        let client = || kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
        let loaded = PluginConfig::load(ConfigSource::Inline(json!({"image": "x"})), &manifest(), &client()).await.unwrap();
        assert_eq!(*loaded.current(), json!({"image": "x"}));
        let none = PluginConfig::load(ConfigSource::None, &manifest(), &client()).await.unwrap();
        assert_eq!((*none.current()).clone(), json!({}));
        assert_eq!(none.status().source, "none");
        let refused = PluginConfig::load(ConfigSource::Inline(json!({"port": 1})), &manifest(), &client()).await.unwrap_err();
        assert!(refused.to_string().starts_with("invalid config at /: Additional properties"), "{refused}");
    }
}
