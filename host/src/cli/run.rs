//! `wasmop run`: the operator host.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use super::RuntimeArgs;
use crate::units;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::admission::{Admission, AdmissionConfig, CertSource, Endpoint, HostObjects, Lifetimes};
use crate::cluster::InstallScope;
use crate::cluster::install_scope::namespace_name;
use crate::controller::{ControllerConfig, Manager};
use crate::leader::{LeaderElector, LeaseConfig};
use crate::policy::limits_json;
use crate::registry::{PullCache, PullContext, PullMetrics, PullTarget, Puller};
use crate::reload::{ReloadConfig, Reloader};
use crate::runtime::{Compiler, Subprocess};
use crate::server::{MetricsCerts, MetricsConfig, ServeContext};
use crate::shard::{Membership, Sharder, shard_name};
use crate::watch::InitialList;

/// Arguments of `wasmop run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Directory of plugins (`*.wasm`).
    #[arg(long, env = "WASMOP_PLUGINS")]
    pub plugins: PathBuf,
    /// Watch and write only in this namespace (repeatable; comma-separated in the variable)
    /// [default: every namespace]. Plugins declaring a cluster-scoped kind are then not
    /// started; `wasmop rbac --namespace` prints the Roles such a host needs.
    #[arg(long = "namespace", value_name = "NS", env = "WASMOP_NAMESPACES", value_delimiter = ',', value_parser = namespace_name)]
    pub namespaces: Vec<String>,
    /// Kubeconfig file (default: `$KUBECONFIG`, `~/.kube/config`, or the in-cluster config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Reconciles of one plugin running at once (1 to 256, the runtime's instance slots).
    #[arg(long, default_value_t = 8, value_parser = |s: &str| units::count_in(s, 1, 256))]
    pub concurrency: usize,
    /// Address of `/metrics` (`none` disables), and of `/healthz` and `/readyz` too unless
    /// metrics are secure or `--probe-addr` is given.
    #[arg(long, default_value = "127.0.0.1:8080", value_parser = parse_addr)]
    pub metrics_addr: MetricsAddr,
    /// Serve `/metrics` over HTTPS and check every scrape's bearer token with a TokenReview,
    /// then a SubjectAccessReview (`get` on the non-resource URL `/metrics`): no or an unknown
    /// token is refused with 401, a user without the right with 403. The probes move to
    /// `--probe-addr`. The host needs `create` on tokenreviews and subjectaccessreviews
    /// (`wasmop rbac --metrics-secure`).
    #[arg(long)]
    pub metrics_secure: bool,
    /// With `--metrics-secure`: serve the certificate of `tls.crt` and `tls.key` in this
    /// directory (a mounted cert-manager Secret), re-read every 10s [default: a self-signed
    /// certificate generated at start].
    #[arg(long, value_name = "DIR", requires = "metrics_secure")]
    pub metrics_cert_dir: Option<PathBuf>,
    /// Address of `/healthz` and `/readyz` on their own plain HTTP port [default: with plain
    /// metrics, on `--metrics-addr`; with `--metrics-secure`, 127.0.0.1:8081].
    #[arg(long, value_name = "ADDR")]
    pub probe_addr: Option<std::net::SocketAddr>,
    /// Only the holder of a Lease writes to the cluster (reconciles, WasmPlugin reports); every
    /// replica loads its plugins and syncs its caches, and is Ready, leader or not.
    #[arg(long)]
    pub leader_elect: bool,
    /// Namespace of the leader Lease (default: `$POD_NAMESPACE`, else `default`).
    #[arg(long)]
    pub leader_elect_namespace: Option<String>,
    /// Name of the leader Lease.
    #[arg(long, default_value = "wasmop")]
    pub leader_elect_name: String,
    /// How long the Lease stays valid without renewal (1s to 1h; the Lease stores seconds).
    #[arg(long, default_value = "15s", value_parser = |s: &str| units::duration_in(s, SECOND, HOUR))]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader tries to renew before giving up (100ms to 1h).
    #[arg(long, default_value = "10s", value_parser = |s: &str| units::duration_in(s, 100 * MILLI, HOUR))]
    pub leader_elect_renew_deadline: Duration,
    /// Pause between acquire or renew attempts (100ms to 1h).
    #[arg(long, default_value = "2s", value_parser = |s: &str| units::duration_in(s, 100 * MILLI, HOUR))]
    pub leader_elect_retry_period: Duration,
    /// Share the parents of every plugin among the replicas running with it: each renews a
    /// Lease of its own (`wasmop-shard-<name>` in the leader Lease's namespace), the leader
    /// labels each parent `wasmop.dev/shard=<name>` for one live replica (consistent hashing),
    /// and each replica watches and reconciles only its own. Turns on leader election (the
    /// leader assigns; the Lease timings above are also the shard Leases').
    #[arg(long, env = "WASMOP_SHARDING")]
    pub sharding: bool,
    /// This replica's shard name with `--sharding` [default: `$POD_NAME`, else `$HOSTNAME`]:
    /// lowercase letters, digits, '-' and '.', at most 50 characters.
    #[arg(long, env = "WASMOP_SHARD_NAME", value_parser = shard_name)]
    pub shard_name: Option<String>,
    /// Re-queue every parent this often (1s to 168h; `0s` disables).
    #[arg(long, default_value = "10m", value_parser = resync_period)]
    pub resync: Duration,
    /// How long a change of a child or related object waits before its parent's reconcile, so
    /// that the changes arriving meanwhile fold into one reconcile (0s to 10s; `0s` reconciles
    /// at every change). A change of the parent itself is reconciled at once.
    #[arg(long, default_value = "100ms", value_parser = |s: &str| units::duration_in(s, Duration::ZERO, 10 * SECOND))]
    pub fold_window: Duration,
    /// How watches make their initial list: `auto` streams it (WatchList, Kubernetes 1.34+)
    /// where the server serves it by default, `paged` always lists, `streaming` always streams.
    #[arg(long, default_value = "auto", value_name = "MODE", value_parser = initial_list)]
    pub initial_list: InitialList,
    /// Cache of the plugin files pulled from registries (the host policy's `source`s), kept
    /// across restarts [default: `PLUGINS.pull-cache` beside the plugins directory].
    #[arg(long, env = "WASMOP_PLUGIN_CACHE", value_name = "DIR")]
    pub plugin_cache: Option<PathBuf>,
    /// Write the audit trail — every write the host makes for a plugin and every refused
    /// response, one JSON line each — to this file (`-`: stderr) [default: off].
    #[arg(long, value_name = "PATH", env = "WASMOP_AUDIT_LOG")]
    pub audit_log: Option<PathBuf>,
    /// Size at which the audit log is renamed to `PATH.1` (replacing the previous one) and
    /// started anew (1Ki to 1Ti).
    #[arg(long, value_name = "SIZE", default_value = "64Mi", value_parser = |s: &str| units::bytes_in(s, 1 << 10, 1 << 40))]
    pub audit_log_max_bytes: u64,
    /// Admission webhooks: where the API server reaches them, how they are served.
    #[command(flatten)]
    pub admission: AdmissionArgs,
}

/// The admission flags of `wasmop run`. Admission is on when the API server can reach the host:
/// with `--admission-service` (in a cluster) or `--admission-url-base` (outside one).
#[derive(Debug, clap::Args)]
pub struct AdmissionArgs {
    /// Serve admission webhooks behind this Service: `NAME` (in `$POD_NAMESPACE`, else
    /// `default`) or `NAMESPACE/NAME`. The webhook configurations point at it, and the
    /// generated certificate is for its DNS names.
    #[arg(long, value_name = "[NAMESPACE/]NAME", conflicts_with = "admission_url_base")]
    pub admission_service: Option<String>,
    /// The Service port the webhooks are reached on.
    #[arg(long, default_value_t = 443)]
    pub admission_service_port: u16,
    /// Serve admission webhooks at this base URL (`https://host:port`), for a host outside the
    /// cluster; the generated certificate is for `localhost` and `127.0.0.1` (use
    /// `--admission-cert-dir` for other names).
    #[arg(long, value_name = "URL")]
    pub admission_url_base: Option<String>,
    /// Where the HTTPS admission server listens.
    #[arg(long, default_value = "0.0.0.0:9443")]
    pub admission_bind: std::net::SocketAddr,
    /// Take the serving certificate from `tls.crt`, `tls.key` (and `ca.crt`) of this directory
    /// (a mounted cert-manager Secret), re-read every 10s, instead of generating one.
    #[arg(long, value_name = "DIR")]
    pub admission_cert_dir: Option<PathBuf>,
    /// The Secret (in the Service's namespace) holding the generated CA and certificate,
    /// created if absent and shared by replicas.
    #[arg(long, default_value = crate::admission::certs::ADMISSION_SECRET)]
    pub admission_cert_secret: String,
    /// With `--admission-url-base`: the host's own namespace, where that Secret is kept
    /// [default: the Leases' namespace: `--leader-elect-namespace`, else `$POD_NAMESPACE`, else
    /// `default`]. A host started before it exists waits for it. (With `--admission-service`
    /// the Secret is in the Service's namespace.)
    #[arg(long, env = "WASMOP_ADMISSION_CERT_NAMESPACE", value_name = "NAMESPACE")]
    pub admission_cert_namespace: Option<String>,
    /// Name of the host's ValidatingWebhookConfiguration and MutatingWebhookConfiguration.
    #[arg(long, default_value = "wasmop")]
    pub admission_configuration_name: String,
    /// Admission plugin calls served at once (1 to 4096); more wait up to their deadline.
    #[arg(long, default_value_t = crate::admission::handler::DEFAULT_MAX_IN_FLIGHT,
        value_parser = |s: &str| units::count_in(s, 1, 4096))]
    pub admission_max_in_flight: usize,
    /// Lifetime of a generated admission CA (3s to 100 years); it is rolled over when a third
    /// is left. Hidden: for tests of rotation; the default is what a cluster wants.
    #[arg(long, hide = true, default_value = "8760h", value_parser = |s: &str| units::duration_in(s, 3 * SECOND, 876_000 * HOUR))]
    pub admission_ca_lifetime: Duration,
    /// Lifetime of a generated admission serving certificate (3s to a third of the CA's); it is
    /// renewed when a third is left. Hidden, as `--admission-ca-lifetime`.
    #[arg(long, hide = true, default_value = "2160h", value_parser = |s: &str| units::duration_in(s, 3 * SECOND, 876_000 * HOUR))]
    pub admission_cert_lifetime: Duration,
}

impl AdmissionArgs {
    /// The admission configuration these flags describe; `None` when admission is off. A host
    /// outside the cluster keeps its certificate Secret in `--admission-cert-namespace`, else
    /// `lease_namespace` (its Leases' namespace).
    ///
    /// # Errors
    /// A Service reference that is not `NAME` or `NAMESPACE/NAME`.
    pub fn config(&self, lease_namespace: &str) -> anyhow::Result<Option<AdmissionConfig>> {
        let pod_namespace = || std::env::var("POD_NAMESPACE").unwrap_or_else(|_| "default".into());
        let own_namespace = || self.admission_cert_namespace.clone().unwrap_or_else(|| lease_namespace.to_owned());
        let (endpoint, namespace, names) = match (&self.admission_service, &self.admission_url_base) {
            (Some(service), _) => {
                let (namespace, name) = match service.split_once('/') {
                    Some((ns, name)) => (ns.to_owned(), name.to_owned()),
                    None => (pod_namespace(), service.clone()),
                };
                if namespace.is_empty() || name.is_empty() || name.contains('/') {
                    anyhow::bail!("--admission-service {service:?}: expected NAME or NAMESPACE/NAME");
                }
                let names = crate::admission::certs::service_names(&namespace, &name);
                let endpoint = Endpoint::Service { namespace: namespace.clone(), name, port: self.admission_service_port };
                (endpoint, namespace, names)
            }
            (None, Some(url)) => (Endpoint::Url(url.clone()), own_namespace(), vec!["localhost".into(), "127.0.0.1".into()]),
            (None, None) => return Ok(None),
        };
        let certs = match &self.admission_cert_dir {
            Some(dir) => CertSource::Dir(dir.clone()),
            None => CertSource::Secret { namespace, name: self.admission_cert_secret.clone(), names },
        };
        Ok(Some(AdmissionConfig {
            bind: self.admission_bind,
            endpoint: Some(endpoint),
            configuration_name: self.admission_configuration_name.clone(),
            host: HostObjects {
                namespace: None,
                lease_namespace: pod_namespace(),
                secret: match &certs {
                    CertSource::Secret { namespace, name, .. } => Some((namespace.clone(), name.clone())),
                    CertSource::Dir(_) => None,
                },
            },
            certs,
            cert_lifetimes: Lifetimes::new(self.admission_ca_lifetime, self.admission_cert_lifetime)?,
            max_in_flight: self.admission_max_in_flight,
        }))
    }
}

/// The address of `/metrics`, or `None` (`none` on the command line). An alias, so that clap
/// takes `parse_addr`'s result as the value rather than making the flag optional.
pub type MetricsAddr = Option<std::net::SocketAddr>;

const MILLI: Duration = Duration::from_millis(1);
const SECOND: Duration = Duration::from_secs(1);
const HOUR: Duration = Duration::from_secs(3600);

/// `0s` (off), or a period from 1s to a week.
fn resync_period(s: &str) -> Result<Duration, String> {
    if units::parse_duration(s)?.is_zero() { Ok(Duration::ZERO) } else { units::duration_in(s, SECOND, 168 * HOUR) }
}

fn parse_addr(s: &str) -> Result<Option<std::net::SocketAddr>, String> {
    if s == "none" {
        return Ok(None);
    }
    s.parse().map(Some).map_err(|e| format!("invalid address {s:?}: {e}"))
}

/// A client from an explicit kubeconfig, or kube's default inference.
///
/// # Errors
/// When no usable configuration is found.
pub async fn client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            // The error's text already carries its cause: no context chain, or it prints twice.
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| anyhow::anyhow!("cannot use kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await.context("no Kubernetes configuration found (use --kubeconfig)")?,
    };
    Ok(kube::Client::try_from(config)?)
}

impl RunArgs {
    /// Where and how metrics and probes are served, as these flags describe.
    pub fn metrics_config(&self) -> MetricsConfig {
        let secure = self.metrics_secure.then(|| match &self.metrics_cert_dir {
            Some(dir) => MetricsCerts::Dir(dir.clone()),
            None => MetricsCerts::generated(),
        });
        MetricsConfig { metrics_addr: self.metrics_addr, secure, probe_addr: self.probe_addr, ..MetricsConfig::default() }
    }

    /// The controller configuration these flags describe.
    pub fn controller_config(&self) -> ControllerConfig {
        ControllerConfig {
            concurrency: self.concurrency,
            resync: (!self.resync.is_zero()).then_some(self.resync),
            fold_window: self.fold_window,
            install: self.install_scope(),
            initial_list: self.initial_list,
            ..ControllerConfig::default()
        }
    }

    /// This replica's shard name with `--sharding` (`None` without it): `--shard-name`, else
    /// `$POD_NAME`, else `$HOSTNAME`.
    ///
    /// # Errors
    /// When none is set, or the one from the environment is not a shard name.
    pub fn shard(&self) -> anyhow::Result<Option<String>> {
        if !self.sharding {
            return Ok(None);
        }
        if let Some(name) = &self.shard_name {
            return Ok(Some(name.clone()));
        }
        let (var, value) = ["POD_NAME", "HOSTNAME"]
            .into_iter()
            .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()).map(|v| (var, v)))
            .context("--sharding needs a shard name: set --shard-name, $POD_NAME or $HOSTNAME")?;
        shard_name(&value).map(Some).map_err(|e| anyhow::anyhow!("${var}: {e} (set --shard-name)"))
    }

    /// The namespaces of `--namespace`, or the whole cluster without it.
    pub fn install_scope(&self) -> InstallScope {
        if self.namespaces.is_empty() {
            InstallScope::Cluster
        } else {
            InstallScope::Namespaces(self.namespaces.iter().cloned().collect())
        }
    }
}

fn initial_list(text: &str) -> Result<InitialList, String> {
    match text {
        "auto" => Ok(InitialList::Auto),
        "paged" => Ok(InitialList::Paged),
        "streaming" => Ok(InitialList::Streaming),
        other => Err(format!("{other:?}: expected auto, paged or streaming")),
    }
}

pub(super) async fn run(args: RunArgs, runtime: &RuntimeArgs) -> anyhow::Result<()> {
    let client = client(args.kubeconfig.as_deref()).await?;
    if !args.plugins.is_dir() {
        anyhow::bail!("plugins directory {} does not exist", args.plugins.display());
    }
    // A server too old is refused now; one not reachable yet is waited for by discovery.
    match client.apiserver_version().await {
        Ok(version) => {
            crate::cluster::server_version::check(&version)?;
            tracing::info!(kubernetes = %version.git_version, "API server");
        }
        Err(e) => tracing::warn!(error = %e, "cannot read the API server's version yet"),
    }
    let policy = runtime.host_policy()?;
    // Compiling in a child process: what Cranelift uses goes back to the system when it exits.
    let compiler = match std::env::current_exe() {
        Ok(exe) => Compiler::Subprocess(Subprocess::new(exe)),
        Err(e) => {
            tracing::warn!(error = %e, "cannot find this program's binary; compiling plugins in the host's process");
            Compiler::InProcess
        }
    };
    let runtime = runtime.builder()?.compiler(compiler).build()?;
    let shard = args.shard()?;
    tracing::info!(scope = %args.install_scope(), "where the host watches and writes");
    tracing::info!(defaults = %limits_json(&policy.defaults().limits), plugin_entries = ?policy.plugin_names(),
        "host policy: per-call limits by default, and plugins with entries of their own");
    let manager = Arc::new(Manager::new(
        client.clone(),
        runtime,
        ControllerConfig { policy, shard: shard.clone(), ..args.controller_config() },
    ));
    let reloader = Reloader::new(Arc::clone(&manager), &args.plugins, ReloadConfig::default());
    let _puller = start_puller(&args, &manager, &reloader);
    let started = Arc::new(AtomicBool::new(false));
    let ready: crate::server::Readiness = {
        let (m, s) = (Arc::clone(&manager), Arc::clone(&started));
        Arc::new(move || s.load(Ordering::Relaxed) && m.synced())
    };
    if args.audit_log.is_some() {
        for (name, help, counter) in super::audit_log::counters() {
            manager.metrics().register(name, help, counter);
        }
    }
    let serve = ServeContext { metrics: Arc::clone(manager.metrics()), ready, client: client.clone() };
    let _serving = crate::server::start(&args.metrics_config(), serve).await?;
    let lease_namespace =
        args.leader_elect_namespace.clone().or_else(|| std::env::var("POD_NAMESPACE").ok()).unwrap_or_else(|| "default".into());
    let lease_config = LeaseConfig {
        lease_duration: args.leader_elect_lease_duration,
        renew_deadline: args.leader_elect_renew_deadline,
        retry_period: args.leader_elect_retry_period,
    };
    // The sharder runs on the leader: sharding elects one.
    let elector = (args.leader_elect || shard.is_some()).then(|| {
        let host = std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_else(|_| "wasmop".into());
        let identity = shard.clone().unwrap_or(host);
        let identity = format!("{identity}_{}", std::process::id());
        LeaderElector::new(client.clone(), &lease_namespace, &args.leader_elect_name, identity, lease_config)
    });
    let membership = shard
        .as_deref()
        .map(|name| Arc::new(Membership::new(client.clone(), &lease_namespace, name, lease_config, manager.metrics())));
    if elector.is_some() {
        // Warm standby: plugins load and caches sync now; only writing waits for the Lease.
        manager.leadership().set(false);
    }
    // Serving before the first pass registers any webhook; every replica serves, the leader
    // writes the configurations.
    let mut admission = match args.admission.config(&lease_namespace)? {
        Some(mut config) => {
            config.host.namespace = std::env::var("POD_NAMESPACE").ok().filter(|ns| !ns.is_empty());
            config.host.lease_namespace.clone_from(&lease_namespace);
            let bind = config.bind;
            let admission = Admission::start(config, Arc::clone(&manager))
                .await
                .with_context(|| format!("cannot serve admission webhooks on {bind}"))?;
            reloader.observe(admission.observer());
            Some(admission)
        }
        None => None,
    };
    reloader.sync().await;
    started.store(true, Ordering::Relaxed);
    tracing::info!(plugins = ?manager.plugins(), dir = %args.plugins.display(), "host running; watching the plugins directory");
    let watch = AbortOnDrop(tokio::spawn(Arc::clone(&reloader).run()));
    let _give_back = AbortOnDrop(tokio::spawn(crate::allocator::give_back()));
    let lead = async {
        let Some(elector) = &elector else { return std::future::pending().await };
        tracing::info!(identity = elector.identity(), "standing by (ready, writing nothing) until this host holds the Lease");
        elector.acquire().await;
        manager.leadership().set(true);
        let Some(membership) = &membership else { return elector.hold().await };
        let sharder = Sharder::new(manager.clone(), Arc::clone(membership));
        tokio::select! {
            error = elector.hold() => error,
            never = sharder.run() => match never {},
        }
    };
    // A member from now on: the sharder may give this replica parents (its plugins are loaded).
    let member = async {
        let Some(membership) = &membership else { return std::future::pending().await };
        tracing::info!(shard = membership.identity(), "shard member: reconciling the parents labelled for this replica");
        membership.hold(&*manager).await
    };
    let result = tokio::select! {
        () = shutdown_signal() => Ok(()),
        error = member => Err(anyhow::Error::from(error).context("stopping: this replica's parents move to the others")),
        error = lead => {
            // No reconcile starts from now on; those in flight get the shutdown grace.
            manager.leadership().set(false);
            Err(anyhow::Error::from(error).context("stopping: another host may be reconciling now"))
        }
    };
    drop(watch);
    // Outside a cluster no replica answers after this one: on a clean exit the writer removes
    // the configurations, or every write of the admitted kinds fails with "connection
    // refused". In a cluster the other replicas behind the Service keep answering: they stay.
    if let (Some(admission), Ok(())) = (&mut admission, &result)
        && admission.outside_cluster()
        && manager.leadership().is_leader()
    {
        let removed = admission.unregister().await;
        if let Err(e) = removed {
            tracing::warn!(error = %e, "cannot remove the webhook configurations on exit; they stay registered");
        }
    }
    tracing::info!("shutting down: finishing reconciles in flight");
    manager.shutdown().await;
    if let Some(membership) = &membership {
        // After the last reconcile: the sharder moves this replica's parents at once.
        membership.leave().await;
    }
    if let (Some(elector), Ok(())) = (&elector, &result) {
        elector.release().await;
    }
    result
}

/// Pull the plugins the policy names a registry source for into the plugins directory (each in
/// a task of its own); `None` when it names none.
fn start_puller(args: &RunArgs, manager: &Arc<Manager>, reloader: &Arc<Reloader>) -> Option<Puller> {
    let policy = manager.policy();
    let targets: Vec<PullTarget> = policy
        .sources()
        .into_iter()
        .map(|(name, source)| PullTarget { max_bytes: policy.for_plugin(&name).max_module_bytes(), name, source })
        .collect();
    if targets.is_empty() {
        return None;
    }
    let cache = args.plugin_cache.clone().unwrap_or_else(|| PullCache::beside(&args.plugins));
    let sources: Vec<String> = targets.iter().map(|t| format!("{} <- {}", t.name, t.source.reference)).collect();
    tracing::info!(?sources, cache = %cache.display(), "pulling plugins from their registries into the plugins directory");
    let ctx = PullContext {
        plugins_dir: args.plugins.clone(),
        cache: PullCache::new(cache),
        client: Some(manager.client().clone()),
        reloader: Some(Arc::clone(reloader)),
        metrics: PullMetrics::registered(manager.metrics()),
        verification: policy.verification().clone(),
    };
    Some(Puller::start(ctx, targets))
}

/// Aborts a task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;
    use crate::cli::{Cli, Command};

    fn run_args(args: &[&str]) -> Result<RunArgs, clap::Error> {
        let cli = Cli::try_parse_from(["wasmop", "run", "--plugins", "/plugins"].iter().chain(args))?;
        match cli.command {
            Command::Run(args) => Ok(*args),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn fold_window_defaults_to_the_controllers_and_zero_turns_it_off() {
        use crate::controller::DEFAULT_FOLD_WINDOW;
        assert_eq!(run_args(&[]).unwrap().controller_config().fold_window, DEFAULT_FOLD_WINDOW);
        assert_eq!(ControllerConfig::default().fold_window, DEFAULT_FOLD_WINDOW);
        assert_eq!(run_args(&["--fold-window", "0s"]).unwrap().controller_config().fold_window, Duration::ZERO);
        assert_eq!(run_args(&["--fold-window", "250ms"]).unwrap().fold_window, Duration::from_millis(250));
        assert!(run_args(&["--fold-window", "11s"]).unwrap_err().to_string().contains("more than the maximum of 10s"));
    }

    #[test]
    fn namespace_is_repeatable_and_comma_separated() {
        let args = run_args(&["--namespace", "team-a", "--namespace", "team-b,team-c"]).unwrap();
        let names = ["team-a", "team-b", "team-c"].map(String::from);
        assert_eq!(args.controller_config().install, InstallScope::Namespaces(names.into()));
        assert_eq!(run_args(&[]).unwrap().install_scope(), InstallScope::Cluster);
    }

    #[test]
    fn a_namespace_that_is_not_a_name_is_refused_naming_it() {
        let err = run_args(&["--namespace", "Team_A"]).unwrap_err().to_string();
        assert!(err.contains("\"Team_A\" is not a namespace name"), "{err}");
    }

    #[test]
    fn namespaces_also_come_from_wasmop_namespaces() {
        let cli = Cli::command();
        let run = cli.find_subcommand("run").unwrap();
        let arg = run.get_arguments().find(|a| a.get_long() == Some("namespace")).unwrap();
        assert_eq!(arg.get_env(), Some(std::ffi::OsStr::new("WASMOP_NAMESPACES")));
        assert_eq!(arg.get_value_delimiter(), Some(','));
    }

    #[test]
    fn sharding_takes_the_shard_name_from_its_flag_and_refuses_a_bad_one_naming_it() {
        let args = run_args(&["--sharding", "--shard-name", "host-a"]).unwrap();
        assert_eq!(args.shard().unwrap().as_deref(), Some("host-a"));
        assert_eq!(run_args(&["--shard-name", "host-a"]).unwrap().shard().unwrap(), None, "off without --sharding");
        let err = run_args(&["--sharding", "--shard-name", "Host_A"]).unwrap_err().to_string();
        assert!(err.contains("\"Host_A\" is not a shard name"), "{err}");
    }

    #[test]
    fn sharding_and_the_shard_name_also_come_from_the_environment() {
        let cli = Cli::command();
        let run = cli.find_subcommand("run").unwrap();
        let env = |long: &str| run.get_arguments().find(|a| a.get_long() == Some(long)).unwrap().get_env().map(ToOwned::to_owned);
        assert_eq!(env("sharding").as_deref(), Some(std::ffi::OsStr::new("WASMOP_SHARDING")));
        assert_eq!(env("shard-name").as_deref(), Some(std::ffi::OsStr::new("WASMOP_SHARD_NAME")));
    }

    #[test]
    fn plain_metrics_serve_the_probes_too_and_secure_metrics_move_them() {
        let plain = run_args(&[]).unwrap().metrics_config();
        assert_eq!(plain, MetricsConfig::default());
        assert_eq!((plain.secure, plain.probe_addr), (None, None));
        let secure = run_args(&["--metrics-secure", "--metrics-addr", "0.0.0.0:8443", "--probe-addr", "0.0.0.0:8081"])
            .unwrap()
            .metrics_config();
        assert!(matches!(secure.secure, Some(MetricsCerts::Generated(_))), "{secure:?}");
        assert_eq!(secure.metrics_addr, Some("0.0.0.0:8443".parse().unwrap()));
        assert_eq!(secure.probe_addr, Some("0.0.0.0:8081".parse().unwrap()));
        let from_dir = run_args(&["--metrics-secure", "--metrics-cert-dir", "/certs"]).unwrap().metrics_config();
        assert_eq!(from_dir.secure, Some(MetricsCerts::Dir("/certs".into())));
    }

    #[test]
    fn a_metrics_certificate_without_secure_metrics_is_refused() {
        let err = run_args(&["--metrics-cert-dir", "/certs"]).unwrap_err().to_string();
        assert!(err.contains("--metrics-secure"), "{err}");
    }

    fn admission(args: &[&str]) -> anyhow::Result<Option<AdmissionConfig>> {
        let cli = Cli::try_parse_from([&["wasmop", "run", "--plugins", "/p"], args].concat())?;
        let Command::Run(run) = cli.command else { unreachable!("a run command") };
        run.admission.config("default")
    }

    #[test]
    fn admission_is_off_until_the_api_server_can_reach_the_host() {
        assert!(admission(&[]).unwrap().is_none());
        assert!(admission(&["--admission-cert-dir", "/certs"]).unwrap().is_none());
    }

    #[test]
    fn a_service_names_the_endpoint_and_the_certificate() {
        let config = admission(&["--admission-service", "ops/hooks", "--admission-service-port", "8443"]).unwrap().unwrap();
        assert_eq!(config.endpoint, Some(Endpoint::Service { namespace: "ops".into(), name: "hooks".into(), port: 8443 }));
        let CertSource::Secret { namespace, name, names } = &config.certs else { panic!("{:?}", config.certs) };
        assert_eq!((namespace.as_str(), name.as_str()), ("ops", "wasmop-admission-tls"));
        assert_eq!(names[..2], ["hooks.ops.svc".to_owned(), "hooks.ops.svc.cluster.local".to_owned()]);
        assert_eq!(config.bind, "0.0.0.0:9443".parse().unwrap());
        let from_dir = admission(&["--admission-url-base", "https://h:1", "--admission-cert-dir", "/certs"]).unwrap().unwrap();
        assert_eq!(from_dir.certs, CertSource::Dir("/certs".into()));
        assert_eq!(from_dir.endpoint, Some(Endpoint::Url("https://h:1".into())));
    }

    #[test]
    fn outside_a_cluster_the_certificate_secret_is_in_the_hosts_own_namespace() {
        let secret_namespace = |config: AdmissionConfig| match config.certs {
            CertSource::Secret { namespace, .. } => namespace,
            other => panic!("{other:?}"),
        };
        let cli = Cli::try_parse_from(["wasmop", "run", "--plugins", "/p", "--admission-url-base", "https://h:1"]).unwrap();
        let Command::Run(run) = cli.command else { unreachable!("a run command") };
        let config = run.admission.config("wasmop-system").unwrap().unwrap();
        assert_eq!(secret_namespace(config), "wasmop-system", "the Leases' namespace by default");
        let flag =
            ["wasmop", "run", "--plugins", "/p", "--admission-url-base", "https://h:1", "--admission-cert-namespace", "ops"];
        let Command::Run(run) = Cli::try_parse_from(flag).unwrap().command else { unreachable!("a run command") };
        assert_eq!(secret_namespace(run.admission.config("wasmop-system").unwrap().unwrap()), "ops");
    }

    #[test]
    fn a_bad_service_or_both_forms_are_refused() {
        let err = admission(&["--admission-service", "a/b/c"]).unwrap_err().to_string();
        assert_eq!(err, "--admission-service \"a/b/c\": expected NAME or NAMESPACE/NAME");
        let err = admission(&["--admission-service", "s", "--admission-url-base", "https://h"]).unwrap_err().to_string();
        assert!(err.contains("cannot be used with"), "{err}");
    }
}
