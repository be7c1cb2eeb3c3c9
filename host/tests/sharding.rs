//! Sharding across replicas on a real control plane: three `wasmop run --sharding` processes
//! share 300 `Memcached` parents; each parent is labelled for exactly one live replica, which
//! alone caches and reconciles it, and its Deployment follows it (labelled for the same
//! replica, cached by it alone); a replica killed with SIGKILL has its parents moved to the
//! others within the Lease duration plus a reconcile, their Deployments moved with them (the
//! same objects, not re-created), and the new owner prunes a moved parent's child the plugin
//! no longer returns (a `Testbed` switched to `rename-out`); started again, it gets its third
//! back through the drain handover. The cluster shows who reconciled what: a parent's events come from its replica
//! (`reportingInstance`) alone.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Result;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::json;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{api_for, apply, apply_file, eventually};
use wasmop_e2e::fixtures;

/// Parents: as many as the sharding bench's default run.
const PARENTS: usize = 300;
/// The shard Lease duration the hosts run with.
const LEASE: Duration = Duration::from_secs(4);
const SHARD: &str = "wasmop.dev/shard";
const DRAIN: &str = "drain.wasmop.dev/shard";
const NAMES: [&str; 3] = ["host-a", "host-b", "host-c"];

/// A plain HTTP/1.0 GET on loopback: the body of a 200.
fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let ok = text.split_whitespace().nth(1) == Some("200");
    ok.then(|| text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

/// The sum of the series whose line starts with `prefix`, from a host's `/metrics`.
fn metric(port: u16, prefix: &str) -> Option<u64> {
    let body = get(port, "/metrics")?;
    let values: Vec<u64> =
        body.lines().filter(|l| l.starts_with(prefix)).filter_map(|l| l.rsplit(' ').next()?.parse().ok()).collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// Reconciles a host has counted.
fn reconciles(port: u16) -> u64 {
    metric(port, "controller_runtime_reconcile_total{").unwrap_or(0)
}

/// The resident set of process `pid` in KiB, from `/proc`.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse().ok())
}

/// A `wasmop run` process, killed when dropped.
struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_host(cp: &ControlPlane, plugins: &std::path::Path, name: &str, port: u16) -> Result<Host> {
    let child = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["run", "--plugins"])
        .arg(plugins)
        .arg("--kubeconfig")
        .arg(cp.kubeconfig_path())
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .args(["--sharding", "--shard-name", name, "--leader-elect-name", "sharding"])
        .args(["--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s"])
        .args(["--leader-elect-retry-period", "500ms"])
        .env("WASMOP_CACHE_DIR", plugins.join(".cache"))
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    Ok(Host(child))
}

/// Testbed parents.
const TESTBEDS: usize = 30;

fn testbed(i: usize, mode: &str) -> serde_json::Value {
    json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
        "metadata": {"name": format!("tb-{i}"), "namespace": "default"}, "spec": {"mode": mode}})
}

fn memcached(i: usize, size: u64) -> serde_json::Value {
    json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": format!("parent-{i}"), "namespace": "default"}, "spec": {"size": size}})
}

/// Apply `objects`, 25 at a time.
async fn apply_all(client: &kube::Client, objects: Vec<serde_json::Value>) -> Result<()> {
    use futures::StreamExt;
    let results: Vec<Result<DynamicObject>> =
        futures::stream::iter(objects.iter().map(|o| apply(client, o))).buffer_unordered(25).collect().await;
    results.into_iter().try_for_each(|r| r.map(drop))
}

/// The replica each parent is labelled for (`None`: unlabelled or draining), by parent name.
async fn owners(parents: &Api<DynamicObject>) -> Result<BTreeMap<String, Option<String>>> {
    let list = parents.list_metadata(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .map(|p| {
            let labels = p.metadata.labels.unwrap_or_default();
            let owner = labels.get(SHARD).filter(|_| !labels.contains_key(DRAIN)).cloned();
            (p.metadata.name.unwrap_or_default(), owner)
        })
        .collect())
}

/// The Deployments' uids and shard labels, by name.
async fn children(deployments: &Api<DynamicObject>) -> Result<BTreeMap<String, (String, Option<String>)>> {
    let list = deployments.list_metadata(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .map(|d| {
            let shard = d.metadata.labels.unwrap_or_default().get(SHARD).cloned();
            (d.metadata.name.unwrap_or_default(), (d.metadata.uid.unwrap_or_default(), shard))
        })
        .collect())
}

/// Children follow their parent: each parent's Deployment (named like it) is labelled for the
/// parent's replica, and each replica caches exactly the Deployments of its parents
/// (`wasmop_shard_cached_objects`).
async fn children_follow(
    deployments: &Api<DynamicObject>,
    shares: &BTreeMap<String, Vec<String>>,
    hosts: &[(&str, u16)],
) -> Result<Option<()>> {
    let children = children(deployments).await?;
    for (owner, parents) in shares {
        if parents.iter().any(|p| children.get(p).map(|(_, shard)| shard.as_deref()) != Some(Some(owner.as_str()))) {
            return Ok(None);
        }
    }
    for (name, port) in hosts {
        let cached = metric(*port, "wasmop_shard_cached_objects{kind=\"apps/v1/Deployment\"}");
        if cached != Some(shares.get(*name).map_or(0, Vec::len) as u64) {
            return Ok(None);
        }
    }
    Ok(Some(()))
}

/// The `reportingInstance`s of the events about each parent whose name starts with `prefix`.
async fn reporters(events: &Api<DynamicObject>, prefix: &str) -> Result<BTreeMap<String, std::collections::BTreeSet<String>>> {
    let mut by_parent: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for event in events.list(&ListParams::default()).await?.items {
        let regarding = event.data.pointer("/regarding/name").and_then(|n| n.as_str()).unwrap_or_default();
        if regarding.starts_with(prefix) {
            let instance = event.data["reportingInstance"].as_str().unwrap_or_default().to_owned();
            by_parent.entry(regarding.to_owned()).or_default().insert(instance);
        }
    }
    Ok(by_parent)
}

/// Whether every parent `of` names has a Deployment of `size` replicas.
async fn converged(deployments: &Api<DynamicObject>, of: &[String], size: u64) -> Result<bool> {
    let list = deployments.list(&ListParams::default()).await?;
    let sizes: BTreeMap<&str, Option<u64>> = list
        .items
        .iter()
        .map(|d| (d.metadata.name.as_deref().unwrap_or_default(), d.data.pointer("/spec/replicas").and_then(|r| r.as_u64())))
        .collect();
    Ok(of.iter().all(|p| sizes.get(p.as_str()) == Some(&Some(size))))
}

/// Every parent labelled for a live member, and each member's `wasmop_shard_parents` equal to
/// the parents labelled for it: each parent is in exactly one replica's cache. Returns the
/// parents per member.
async fn settled(parents: &Api<DynamicObject>, hosts: &[(&str, u16)]) -> Result<Option<BTreeMap<String, Vec<String>>>> {
    let mut by_owner: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (parent, owner) in owners(parents).await? {
        let Some(owner) = owner.filter(|o| hosts.iter().any(|(name, _)| name == o)) else { return Ok(None) };
        by_owner.entry(owner).or_default().push(parent);
    }
    for (name, port) in hosts {
        let labelled = by_owner.get(*name).map_or(0, Vec::len) as u64;
        if metric(*port, "wasmop_shard_parents{plugin=\"memcached\"}") != Some(labelled) {
            return Ok(None);
        }
    }
    Ok(Some(by_owner))
}

#[tokio::test]
async fn three_replicas_share_300_parents_and_move_them_when_one_dies_and_comes_back() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &fixtures::workspace().join("crds/memcached.yaml")).await?;
    apply_file(&client, &fixtures::workspace().join("crds/testbed.yaml")).await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(fixtures::memcached(), dir.path().join("memcached.wasm"))?;
    std::fs::copy(fixtures::testbed(), dir.path().join("testbed.wasm"))?;
    let ports: Vec<u16> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()))
        .collect::<Result<_, _>>()?;
    let mut hosts: Vec<Option<Host>> =
        NAMES.iter().zip(&ports).map(|(name, port)| spawn_host(&cp, dir.path(), name, *port).map(Some)).collect::<Result<_>>()?;
    let all: Vec<(&str, u16)> = NAMES.iter().copied().zip(ports.iter().copied()).collect();
    eventually("three Ready members", Duration::from_secs(60), || async {
        let ready =
            all.iter().all(|(_, port)| get(*port, "/readyz").is_some() && metric(*port, "wasmop_shard_members ") == Some(3));
        Ok(ready.then_some(()))
    })
    .await?;

    let parents = api_for(&client, "cache.example.com/v1alpha1", "Memcached", Some("default")).await?;
    let deployments = api_for(&client, "apps/v1", "Deployment", Some("default")).await?;
    let started = Instant::now();
    apply_all(&client, (0..PARENTS).map(|i| memcached(i, 1)).collect()).await?;
    let names: Vec<String> = (0..PARENTS).map(|i| format!("parent-{i}")).collect();
    eventually("300 Deployments of size 1", Duration::from_secs(180), || async {
        Ok(converged(&deployments, &names, 1).await?.then_some(()))
    })
    .await?;
    eprintln!("{PARENTS} parents converged on 3 replicas in {:?}", started.elapsed());
    let shares = eventually("each parent labelled for one replica, which alone caches it", Duration::from_secs(30), || {
        settled(&parents, &all)
    })
    .await?;
    eventually("each Deployment labelled for its parent's replica, which alone caches it", Duration::from_secs(30), || {
        children_follow(&deployments, &shares, &all)
    })
    .await?;
    for ((name, port), host) in all.iter().zip(&hosts) {
        let owned = shares.get(*name).map_or(0, Vec::len);
        let rss = host.as_ref().and_then(|h| rss_kib(h.0.id())).unwrap_or(0);
        eprintln!("{name}: RSS {} MiB", rss / 1024);
        // The ring's balance for these names and keys is pinned by its unit test.
        assert!((85..=115).contains(&owned), "{name} owns {owned} of {PARENTS}: {:?}", shares.keys());
        assert!(reconciles(*port) > 0, "{name} reconciled nothing");
        eprintln!("{name}: {owned} parents, {} reconciles", reconciles(*port));
    }

    // Testbeds, each applying the ConfigMap `<name>-out`: after the move, those of host-b drop
    // it for `<name>-renamed`, which their new owner can prune only if it caches the child.
    let testbeds = api_for(&client, "test.wasmop.dev/v1", "Testbed", Some("default")).await?;
    let config_maps = api_for(&client, "v1", "ConfigMap", Some("default")).await?;
    apply_all(&client, (0..TESTBEDS).map(|i| testbed(i, "ok")).collect()).await?;
    eventually("a ConfigMap of each Testbed, each labelled for its parent's replica", Duration::from_secs(60), || async {
        let owners = owners(&testbeds).await?;
        let labels: BTreeMap<String, Option<String>> = config_maps
            .list_metadata(&ListParams::default())
            .await?
            .items
            .into_iter()
            .map(|c| (c.metadata.name.unwrap_or_default(), c.metadata.labels.unwrap_or_default().get(SHARD).cloned()))
            .collect();
        let follow = owners.len() == TESTBEDS
            && owners.iter().all(|(t, owner)| owner.is_some() && labels.get(&format!("{t}-out")) == Some(owner));
        Ok(follow.then_some(()))
    })
    .await?;
    let victim_testbeds: Vec<usize> = owners(&testbeds)
        .await?
        .into_iter()
        .filter(|(_, owner)| owner.as_deref() == Some("host-b"))
        .map(|(t, _)| t["tb-".len()..].parse().expect("an index"))
        .collect();
    assert!(!victim_testbeds.is_empty(), "host-b owns none of the {TESTBEDS} Testbeds");

    // Kill host-b without a goodbye: its Lease expires, the leader relabels its parents.
    let victim = shares["host-b"].clone();
    let before: Vec<u64> = [ports[0], ports[2]].iter().map(|p| reconciles(*p)).collect();
    let uids: BTreeMap<String, String> = children(&deployments).await?.into_iter().map(|(name, (uid, _))| (name, uid)).collect();
    drop(hosts[1].take());
    let killed = Instant::now();
    apply_all(&client, victim.iter().map(|n| memcached(n["parent-".len()..].parse().expect("an index"), 2)).collect()).await?;
    eventually("host-b's parents reconciled by the others", Duration::from_secs(60), || async {
        Ok(converged(&deployments, &victim, 2).await?.then_some(()))
    })
    .await?;
    let took = killed.elapsed();
    eprintln!("host-b's {} parents moved and reconciled {took:?} after SIGKILL (Lease: {LEASE:?})", victim.len());
    let survivors = [all[0], all[2]];
    let moved = eventually("every parent on host-a or host-c", Duration::from_secs(30), || settled(&parents, &survivors)).await?;
    assert_eq!(moved.values().map(Vec::len).sum::<usize>(), PARENTS);
    for (i, (name, port)) in survivors.iter().enumerate() {
        let kept = &shares[*name];
        assert!(kept.iter().all(|p| moved[*name].contains(p)), "{name} lost parents when host-b died");
        assert!(reconciles(*port) > before[i], "{name} reconciled none of host-b's parents");
    }
    assert!(took < LEASE + Duration::from_secs(20), "moving a dead replica's parents took {took:?}");
    eventually("host-b's Deployments follow its parents to host-a and host-c", Duration::from_secs(30), || {
        children_follow(&deployments, &moved, &survivors)
    })
    .await?;
    let after = children(&deployments).await?;
    for parent in &victim {
        assert_eq!(after[parent].0, uids[parent], "{parent}'s Deployment was re-created on the move, not kept");
    }
    apply_all(&client, victim_testbeds.iter().map(|i| testbed(*i, "rename-out")).collect()).await?;
    eventually(
        "host-b's Testbeds renamed their ConfigMap on their new owners, the old one pruned",
        Duration::from_secs(60),
        || async {
            let names: std::collections::BTreeSet<String> = config_maps
                .list_metadata(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter_map(|c| c.metadata.name)
                .collect();
            let done = victim_testbeds
                .iter()
                .all(|i| names.contains(&format!("tb-{i}-renamed")) && !names.contains(&format!("tb-{i}-out")));
            Ok(done.then_some(()))
        },
    )
    .await?;

    // host-b comes back: the others drain its third, and it reconciles them.
    hosts[1] = Some(spawn_host(&cp, dir.path(), "host-b", ports[1])?);
    // The ring gives host-b the same parents back, drained from host-a and host-c first.
    eventually("host-b has its third back", Duration::from_secs(60), || async {
        Ok(settled(&parents, &all).await?.filter(|shares| shares.get("host-b") == Some(&victim)))
    })
    .await?;
    apply_all(&client, victim.iter().map(|n| memcached(n["parent-".len()..].parse().expect("an index"), 3)).collect()).await?;
    eventually("host-b's parents reconciled by host-b", Duration::from_secs(60), || async {
        Ok(converged(&deployments, &victim, 3).await?.then_some(()))
    })
    .await?;
    assert!(reconciles(ports[1]) > 0, "host-b reconciles its parents again");
    let others: Vec<String> = names.iter().filter(|n| !victim.contains(n)).cloned().collect();
    assert!(converged(&deployments, &others, 1).await?, "the others' parents untouched");
    let back = settled(&parents, &all).await?.expect("settled");
    eventually("the Deployments follow their parents back to host-b", Duration::from_secs(30), || {
        children_follow(&deployments, &back, &all)
    })
    .await?;
    let now = children(&deployments).await?;
    assert!(names.iter().all(|p| now[p].0 == uids[p]), "a Deployment was re-created by a move");

    // Events show who reconciled: 30 parents without a size are refused by the plugin (a
    // Warning event each), each by its own replica only.
    apply_all(
        &client,
        (0..30)
            .map(|i| {
                json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": format!("unsized-{i}"), "namespace": "default"}, "spec": {}})
            })
            .collect(),
    )
    .await?;
    let events = api_for(&client, "events.k8s.io/v1", "Event", Some("default")).await?;
    let reported = eventually("an event about each unsized parent", Duration::from_secs(60), || async {
        let by_parent = reporters(&events, "unsized-").await?;
        Ok((by_parent.len() == 30).then_some(by_parent))
    })
    .await?;
    let owners = owners(&parents).await?;
    for (parent, instances) in &reported {
        let owner = owners[parent].clone().expect("an owner");
        assert_eq!(instances, &[owner].into(), "{parent}: events from other replicas than its owner");
    }
    let mut per_replica: BTreeMap<&str, usize> = BTreeMap::new();
    for parent in reported.keys() {
        *per_replica.entry(owners[parent].as_deref().unwrap_or_default()).or_default() += 1;
    }
    eprintln!("events about the 30 unsized parents, by reporting replica: {per_replica:?}");
    Ok(())
}
