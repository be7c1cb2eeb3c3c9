//! Time to contain each hostile behaviour of a plugin: `cargo bench -p wasmop --bench containment`.
//!
//! A plain `fn main` (`harness = false`). The hostile test plugin (`plugins/testbed`, built from
//! source) is called in each of its hostile modes through the host's runtime, the way the
//! controller calls it: a fresh store per call under the plugin's policy. For each mode it
//! prints what the host made of it (the reason that lands on the CR) and the time from the
//! call's start until the host had a verdict — the time the plugin could misbehave before it
//! was contained — as p50 and max over [`N`] calls, beside the well-behaved `ok` mode measured
//! in the same run. Scope refusals (writes into another namespace or of an undeclared kind)
//! happen after the call, in [`wasmop::actions::check_scope`]; their row includes that check.
//!
//! Policy used: testbed deadline 100 ms, memory 64 MiB; for `huge` (a 100 MB answer) 256 MiB
//! and 5 s so that the response size limit (16 MiB), not the memory cap, is what refuses it.
//! Also printed: the process's resident memory before and after (VmRSS) and its peak (VmHWM).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};
use wasmop::actions::check_scope;
use wasmop::contract::{KnownKinds, Request};
use wasmop::objects::{MemoryCache, ObjectCache};
use wasmop::policy::HostPolicy;
use wasmop::runtime::{Plugin, Runtime};

use wasmop_e2e::figure;

/// Calls per mode.
const N: usize = 10;

fn testbed_cr(mode: &str) -> Value {
    json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
        "metadata": {"name": "t", "namespace": "default", "uid": "u-1"}, "spec": {"mode": mode}})
}

/// One call and the host's checks; the reason for the CR (`Reconciled` when accepted).
async fn contain(plugin: &Plugin, mode: &str, cache: &Arc<dyn ObjectCache>) -> (Duration, String) {
    let parent = testbed_cr(mode);
    let request = Request::new(parent.clone());
    let started = Instant::now();
    let verdict = match plugin.reconcile(&request, Arc::clone(cache)).await {
        Err(e) => e.reason().to_owned(),
        Ok((mut response, _)) => {
            match check_scope(plugin.manifest(), plugin.grants(), &KnownKinds::builtin(), &parent, &mut response) {
                Err(e) => e.reason().to_owned(),
                Ok(()) => "Reconciled".to_owned(),
            }
        }
    };
    (started.elapsed(), verdict)
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix(field).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()))
        })
        .unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> anyhow::Result<()> {
    let testbed = wasmop_e2e::plugins::plugin("testbed", "wasm32-wasip2");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let strict = HostPolicy::from_yaml("plugins: {testbed: {deadline: 100ms, memory: 64Mi}}")?;
        let roomy = HostPolicy::from_yaml("plugins: {testbed: {deadline: 5s, memory: 256Mi}}")?;
        let plugin = Runtime::builder().allowances(strict.allowances()).artifact_dir(None).build()?.load_file(&testbed).await?;
        let big_plugin =
            Runtime::builder().allowances(roomy.allowances()).artifact_dir(None).build()?.load_file(&testbed).await?;
        let cache: Arc<dyn ObjectCache> = Arc::new(MemoryCache::default());
        let rss_before = status_kib("VmRSS:");
        let modes: &[(&str, &str, &Plugin)] = &[
            ("ok", "well-behaved (baseline)", &plugin),
            ("loop", "infinite loop", &plugin),
            ("oom", "memory bomb", &plugin),
            ("panic", "panic", &plugin),
            ("unreachable", "`unreachable`", &plugin),
            ("bad-json", "child that is not JSON", &plugin),
            ("no-kind", "child without kind", &plugin),
            ("big", "100,000 actions", &plugin),
            ("huge", "100 MB response", &big_plugin),
            ("other-namespace", "write into kube-system", &plugin),
            ("undeclared", "write of an undeclared Secret", &plugin),
            ("read-secret", "read of a Secret", &plugin),
            ("read-namespace", "read of another namespace", &plugin),
        ];
        println!("{:<32} {:<20} {:>10} {:>10} {:>9}", "hostile behaviour", "reason on the CR", "p50 ms", "max ms", "× ok p50");
        let mut ok_p50 = None;
        for (mode, what, plugin) in modes {
            let _ = contain(plugin, mode, &cache).await; // warm-up
            let mut times = Vec::with_capacity(N);
            let mut verdict = String::new();
            for _ in 0..N {
                let (t, v) = contain(plugin, mode, &cache).await;
                times.push(t);
                verdict = v;
            }
            times.sort();
            let (p50, max) = (times[N / 2], times[N - 1]);
            let base = *ok_p50.get_or_insert(p50);
            println!(
                "{what:<32} {verdict:<20} {:>10.2} {:>10.2} {:>9.1}",
                ms(p50),
                ms(max),
                p50.as_secs_f64() / base.as_secs_f64()
            );
            if *mode == "loop" {
                println!("{:<32} {:<20} {:>10.2} {:>10.2}", "  … past the 100 ms deadline", "", ms(p50) - 100.0, ms(max) - 100.0);
                let metric = format!("infinite loop stopped past its 100 ms deadline, max of {N} calls");
                figure::figure("containment", &metric, ms(max) - 100.0, None, "ms", figure::Goal::AtMost(50.0));
            }
        }
        println!(
            "\nresident memory: {} MiB before, {} MiB after, peak {} MiB (caps: 64 MiB; 256 MiB for the 100 MB answer)",
            rss_before >> 10,
            status_kib("VmRSS:") >> 10,
            status_kib("VmHWM:") >> 10
        );
        anyhow::Ok(())
    })
    .context("containment bench")
}
