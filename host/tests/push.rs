//! `wasmop push` and the registry client against a real registry (Debian's docker-registry on
//! loopback), with `oras` as the other OCI client: each reads what the other wrote; bad
//! artifacts, unknown tags, oversized layers, unreachable registries and wrong credentials
//! are refused with an error saying which. Signatures interoperate with the real cosign both
//! ways: what `wasmop push --key` signs, `cosign verify --key` accepts, and what `cosign sign
//! --key` signs, the host's verification accepts.

use std::path::Path;
use std::process::{Command, Output};

use anyhow::{Result, ensure};
use bytes::Bytes;
use serde_json::Value;
use wasmop::policy::{OciReference, TrustedKey, Verification};
use wasmop::registry::{
    Credentials, OCI_MANIFEST_MEDIA_TYPE, RegistryClient, SigningKey, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE,
    fetch_signatures, pull, sha256_digest, sign, verify,
};
use wasmop_e2e::plugins::plugin;
use wasmop_e2e::registry::{Registry, run_cosign, run_oras};

fn wasmop(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(args)
        .env_remove("WASMOP_REGISTRY_USERNAME")
        .env_remove("WASMOP_REGISTRY_PASSWORD")
        .envs(env.iter().copied())
        .output()
        .expect("running wasmop")
}

fn reference(text: &str) -> OciReference {
    OciReference::parse(text).expect("a valid reference")
}

#[tokio::test]
async fn push_prints_the_digest_of_the_cncf_layout_and_oras_pulls_the_same_file() -> Result<()> {
    let registry = Registry::start()?;
    let wasm = plugin("memcached", "wasm32-wasip2");
    let target = registry.reference("plugins/memcached:0.1.0");
    let out = wasmop(&["push", wasm.to_str().unwrap(), &target, "--insecure"], &[]);
    ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let digest = String::from_utf8(out.stdout)?.trim().to_owned();
    ensure!(digest.starts_with("sha256:") && digest.len() == 71, "{digest:?}");

    let work = tempfile::tempdir()?;
    let plain = format!("{}/plugins/memcached:0.1.0", registry.host());
    let manifest = run_oras(&["manifest", "fetch", "--plain-http", &plain], work.path())?;
    ensure!(sha256_digest(manifest.trim_end().as_bytes()) == digest, "the printed digest is the manifest's: {manifest}");
    let manifest: Value = serde_json::from_str(&manifest)?;
    ensure!(manifest["mediaType"] == OCI_MANIFEST_MEDIA_TYPE, "{manifest}");
    ensure!(manifest["config"]["mediaType"] == WASM_CONFIG_MEDIA_TYPE, "{manifest}");
    ensure!(manifest["layers"].as_array().map(Vec::len) == Some(1), "{manifest}");
    ensure!(manifest["layers"][0]["mediaType"] == WASM_LAYER_MEDIA_TYPE, "{manifest}");
    run_oras(&["pull", "--plain-http", &format!("{}/plugins/memcached@{digest}", registry.host()), "-o", "out"], work.path())?;
    ensure!(std::fs::read(work.path().join("out/memcached.wasm"))? == std::fs::read(&wasm)?, "oras pulled another file");

    // The same file pushes to the same digest; by digest it reads back whole.
    let again = wasmop(&["push", wasm.to_str().unwrap(), &registry.reference("plugins/memcached:again"), "--insecure"], &[]);
    ensure!(String::from_utf8(again.stdout)?.trim() == digest);
    let client = RegistryClient::new(&registry.host(), true, None);
    let pulled = pull(&client, &reference(&registry.reference(&format!("plugins/memcached@{digest}"))), 64 << 20).await?;
    ensure!(pulled.wasm == std::fs::read(&wasm)? && pulled.manifest_digest == digest);
    Ok(())
}

#[tokio::test]
async fn what_oras_pushes_is_pulled_and_what_is_not_a_plugin_is_refused() -> Result<()> {
    let registry = Registry::start()?;
    let wasm = plugin("memcached", "wasm32-wasip2");
    let work = tempfile::tempdir()?;
    std::fs::copy(&wasm, work.path().join("memcached.wasm"))?;
    std::fs::write(work.path().join("notes.txt"), "not a plugin")?;
    std::fs::write(work.path().join("fake.wasm"), "not wasm at all")?;
    let host = registry.host();
    let oras_push = |tag: &str, files: &[&str]| {
        let mut args = vec!["push".to_owned(), "--plain-http".to_owned(), format!("{host}/plugins/x:{tag}")];
        args.extend(files.iter().map(|f| (*f).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_oras(&args, work.path())
    };
    // oras's own artifact layout (its empty config) with one application/wasm layer.
    oras_push("plain", &["memcached.wasm:application/wasm"])?;
    oras_push("text", &["notes.txt:text/plain"])?;
    oras_push("two", &["memcached.wasm:application/wasm", "notes.txt:application/wasm"])?;
    oras_push("fake", &["fake.wasm:application/wasm"])?;
    let client = RegistryClient::new(&host, true, None);
    let at = |tag: &str| reference(&registry.reference(&format!("plugins/x:{tag}")));

    let pulled = pull(&client, &at("plain"), 64 << 20).await?;
    ensure!(pulled.wasm == std::fs::read(&wasm)?, "the layer oras pushed");
    for (tag, reason) in [("text", "NotWasmArtifact"), ("two", "NotWasmArtifact"), ("fake", "NotWasm"), ("missing", "NotFound")] {
        let err = pull(&client, &at(tag), 64 << 20).await.expect_err(tag);
        ensure!(err.reason() == reason, "{tag}: {err}");
    }
    let err = pull(&client, &at("plain"), 1024).await.expect_err("too large");
    ensure!(err.reason() == "TooLarge" && err.to_string().contains("more than the 1024 bytes allowed"), "{err}");
    let pinned = format!("plugins/x:plain@sha256:{}", "0".repeat(64));
    let err = pull(&client, &reference(&registry.reference(&pinned)), 64 << 20).await.expect_err("unknown digest");
    ensure!(err.reason() == "NotFound", "{err}");

    // Nothing listening: unreachable, said as such.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let nowhere = RegistryClient::new(&format!("127.0.0.1:{closed}"), true, None);
    let err = pull(&nowhere, &reference(&format!("oci://127.0.0.1:{closed}/x:1")), 64 << 20).await.expect_err("unreachable");
    ensure!(err.reason() == "RegistryUnreachable", "{err}");
    let out =
        wasmop(&["push", work.path().join("fake.wasm").to_str().unwrap(), &registry.reference("plugins/x:y"), "--insecure"], &[]);
    ensure!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("is not a plugin file"));
    Ok(())
}

#[tokio::test]
async fn basic_auth_is_answered_with_the_credentials_and_wrong_ones_are_refused() -> Result<()> {
    let registry = Registry::start_with_auth("alice", "s3cret")?;
    let wasm = plugin("memcached", "wasm32-wasip2");
    let file = wasm.to_str().unwrap();
    let target = registry.reference("private/memcached:1");
    let out = wasmop(&["push", file, &target, "--insecure"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success() && stderr.contains("asks for credentials and none are configured"), "{stderr}");
    let out = wasmop(
        &["push", file, &target, "--insecure"],
        &[("WASMOP_REGISTRY_USERNAME", "alice"), ("WASMOP_REGISTRY_PASSWORD", "wrong")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success() && stderr.contains("refused access to user alice"), "{stderr}");
    let out = wasmop(
        &["push", file, &target, "--insecure"],
        &[("WASMOP_REGISTRY_USERNAME", "alice"), ("WASMOP_REGISTRY_PASSWORD", "s3cret")],
    );
    ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let work = tempfile::tempdir()?;
    let plain = format!("{}/private/memcached:1", registry.host());
    run_oras(&["pull", "--plain-http", "-u", "alice", "-p", "s3cret", &plain, "-o", "out"], work.path())?;
    ensure!(std::fs::read(work.path().join("out").join(Path::new(file).file_name().unwrap()))? == std::fs::read(&wasm)?);
    let wrong =
        RegistryClient::new(&registry.host(), true, Some(Credentials { username: "alice".into(), password: "nope".into() }));
    let err = pull(&wrong, &reference(&target), 64 << 20).await.expect_err("wrong password");
    ensure!(err.reason() == "Unauthorized", "{err}");
    let right =
        RegistryClient::new(&registry.host(), true, Some(Credentials { username: "alice".into(), password: "s3cret".into() }));
    ensure!(pull(&right, &reference(&target), 64 << 20).await?.wasm == Bytes::from(std::fs::read(&wasm)?));
    Ok(())
}

/// A fresh ECDSA P-256 key pair written as `DIR/NAME.key` (unencrypted PKCS#8 PEM) and
/// `DIR/NAME.pub` (SPKI PEM).
fn key_pair(dir: &Path, name: &str) -> Result<SigningKey> {
    let (key, pem) = SigningKey::generate();
    std::fs::write(dir.join(format!("{name}.key")), &pem)?;
    std::fs::write(dir.join(format!("{name}.pub")), key.public_key(name).to_pem())?;
    Ok(key)
}

fn trusting(keys: Vec<TrustedKey>) -> Verification {
    Verification { require_signature: true, keys }
}

#[tokio::test]
async fn what_push_key_signs_cosign_verifies_and_what_cosign_signs_the_host_verifies() -> Result<()> {
    let registry = Registry::start()?;
    let work = tempfile::tempdir()?;
    let wasm = plugin("memcached", "wasm32-wasip2");
    let ours = key_pair(work.path(), "ours")?;
    let other = key_pair(work.path(), "other")?;
    let key = work.path().join("ours.key");
    let out = wasmop(
        &["push", wasm.to_str().unwrap(), &registry.reference("plugins/signed:1"), "--insecure", "--key", key.to_str().unwrap()],
        &[],
    );
    ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let digest = String::from_utf8(out.stdout)?.trim().to_owned();
    let image = format!("{}/plugins/signed@{digest}", registry.host());
    let cosign_verify = |public: &str, image: &str| {
        run_cosign(&["verify", "--key", public, "--insecure-ignore-tlog", "--allow-insecure-registry", image], work.path(), &[])
    };
    let out = cosign_verify("ours.pub", &image)?;
    ensure!(out.status.success(), "cosign verify refused wasmop's signature:\n{}", String::from_utf8_lossy(&out.stderr));
    let out = cosign_verify("other.pub", &image)?;
    ensure!(!out.status.success(), "cosign verify accepted a key that did not sign:\n{}", String::from_utf8_lossy(&out.stdout));

    // cosign's own key pair (encrypted cosign.key) signs an unsigned push, offline.
    let unsigned = wasmop(&["push", wasm.to_str().unwrap(), &registry.reference("plugins/cosigned:1"), "--insecure"], &[]);
    ensure!(unsigned.status.success(), "{}", String::from_utf8_lossy(&unsigned.stderr));
    let password = [("COSIGN_PASSWORD", "cosign-test")];
    let out = run_cosign(&["generate-key-pair"], work.path(), &password)?;
    ensure!(out.status.success(), "cosign generate-key-pair:\n{}", String::from_utf8_lossy(&out.stderr));
    let cosigned = format!("{}/plugins/cosigned@{digest}", registry.host());
    let out = run_cosign(
        &["sign", "--key", "cosign.key", "--tlog-upload=false", "--allow-insecure-registry", "--yes", &cosigned],
        work.path(),
        &password,
    )?;
    ensure!(out.status.success(), "cosign sign:\n{}", String::from_utf8_lossy(&out.stderr));
    let cosign_pub =
        TrustedKey::from_pem("cosign", &std::fs::read_to_string(work.path().join("cosign.pub"))?).map_err(anyhow::Error::msg)?;
    let client = RegistryClient::new(&registry.host(), true, None);
    let signed = fetch_signatures(&client, "plugins/cosigned", &digest).await?;
    ensure!(signed.len() == 1, "{signed:?}");
    let source = registry.reference("plugins/cosigned:1");
    let signer = verify(&signed, &digest, &trusting(vec![other.public_key("other"), cosign_pub.clone()]), &source)?;
    ensure!(signer.as_deref() == Some("cosign"), "{signer:?}");
    let err = verify(&signed, &digest, &trusting(vec![ours.public_key("ours")]), &source).expect_err("another key");
    ensure!(err.reason() == "KeyNotTrusted", "{err}");

    // wasmop signs beside cosign's signature: both kept, both verify, with cosign too.
    sign(&client, "plugins/cosigned", &digest, &ours).await?;
    let signed = fetch_signatures(&client, "plugins/cosigned", &digest).await?;
    ensure!(signed.len() == 2, "{signed:?}");
    for (key, name) in [(cosign_pub, "cosign"), (ours.public_key("ours"), "ours")] {
        ensure!(verify(&signed, &digest, &trusting(vec![key]), &source)?.as_deref() == Some(name));
    }
    for public in ["cosign.pub", "ours.pub"] {
        let out = cosign_verify(public, &cosigned)?;
        ensure!(out.status.success(), "cosign verify --key {public}:\n{}", String::from_utf8_lossy(&out.stderr));
    }

    // A key wasmop cannot sign with is refused before anything is pushed.
    let cosign_key = work.path().join("cosign.key");
    let out = wasmop(
        &[
            "push",
            wasm.to_str().unwrap(),
            &registry.reference("plugins/never:1"),
            "--insecure",
            "--key",
            cosign_key.to_str().unwrap(),
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success() && stderr.contains("cosign import-key-pair"), "{stderr}");
    ensure!(client.get_manifest("plugins/never", "1").await.is_err(), "nothing pushed with a bad key");
    Ok(())
}
