//! `wasmop push`: a plugin file into an OCI registry as a Wasm artifact (the CNCF layout: config
//! `application/vnd.wasm.config.v0+json`, one `application/wasm` layer), printing the
//! manifest's digest — the value to pin in the host policy (`source: oci://REG/REPO@DIGEST`).
//! With `--key`, the artifact is also signed the way `cosign sign --key` signs it.

use std::path::PathBuf;

use anyhow::{Context, bail};
use bytes::Bytes;

use crate::policy::OciReference;
use crate::registry::{Credentials, RegistryClient, SigningKey, check_wasm, push, sign};

/// Arguments of `wasmop push`.
#[derive(Debug, clap::Args)]
pub struct PushArgs {
    /// The plugin file (`.wasm`, a component or a wasm32-wasip1 module).
    pub file: PathBuf,
    /// Where to: `oci://REGISTRY/REPOSITORY:TAG`.
    #[arg(value_parser = OciReference::parse)]
    pub reference: OciReference,
    /// Plain HTTP instead of HTTPS (a registry on loopback).
    #[arg(long)]
    pub insecure: bool,
    /// User name, for a registry that asks for credentials (with `WASMOP_REGISTRY_PASSWORD`).
    #[arg(long, env = "WASMOP_REGISTRY_USERNAME")]
    pub username: Option<String>,
    /// Password or token (set the variable rather than the flag: a flag shows in `ps`).
    #[arg(long, env = "WASMOP_REGISTRY_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// Sign the pushed artifact with this key (an unencrypted PKCS#8 PEM of an ECDSA P-256
    /// key): a cosign-compatible signature under the tag `sha256-DIGEST.sig`, which hosts
    /// trusting its public key (`verification.keys`) and `cosign verify --key` accept.
    #[arg(long, value_name = "KEY.pem")]
    pub key: Option<PathBuf>,
}

/// Push the file (and sign it with `--key`); print the manifest digest on stdout and what was
/// pushed on stderr.
///
/// # Errors
/// A file that cannot be read or is not WebAssembly, a key that cannot sign, a reference
/// without a tag, a user name without a password (or the reverse), and any failure of the
/// registry exchange.
pub async fn run(args: PushArgs) -> anyhow::Result<()> {
    let wasm = std::fs::read(&args.file).with_context(|| format!("cannot read {}", args.file.display()))?;
    check_wasm(&wasm).with_context(|| format!("{} is not a plugin file", args.file.display()))?;
    let credentials = match (args.username, args.password) {
        (Some(username), Some(password)) => Some(Credentials { username, password }),
        (None, None) => None,
        (Some(_), None) => bail!("--username needs a password: set WASMOP_REGISTRY_PASSWORD"),
        (None, Some(_)) => bail!("a password needs --username (or WASMOP_REGISTRY_USERNAME)"),
    };
    // Read before anything is pushed: a bad key pushes nothing.
    let key = match &args.key {
        Some(path) => {
            let pem = std::fs::read_to_string(path).with_context(|| format!("cannot read the key {}", path.display()))?;
            Some(SigningKey::from_pem(&pem).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?)
        }
        None => None,
    };
    let title = args.file.file_name().map_or_else(|| "plugin.wasm".into(), |n| n.to_string_lossy().into_owned());
    let size = wasm.len();
    let client = RegistryClient::new(&args.reference.registry, args.insecure, credentials);
    let pushed = push(&client, &args.reference, Bytes::from(wasm), &title).await?;
    eprintln!("pushed {} ({size} bytes, layer {}) to {}", args.file.display(), pushed.layer_digest, args.reference);
    if let Some(key) = &key {
        let signature = sign(&client, &args.reference.repository, &pushed.manifest_digest, key)
            .await
            .context("the artifact is pushed but could not be signed")?;
        eprintln!("signed {} (signature manifest {signature})", pushed.manifest_digest);
    }
    println!("{}", pushed.manifest_digest);
    Ok(())
}
