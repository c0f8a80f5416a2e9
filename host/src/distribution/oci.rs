//! `emseepea push` / `pull`: a source as an OCI artifact, in the layout of
//! the CNCF wasm OCI artifact format that `wkg` (wasm-pkg-tools) publishes:
//! config media type `application/vnd.wasm.config.v0+json`, the component as
//! the `application/wasm` layer. The manifest and the signature ride along
//! as two more layers of their own types (`MANIFEST_MEDIA_TYPE`,
//! `SIGNATURE_MEDIA_TYPE`), so one digest pins all three; `wkg` and other
//! wasm tools still find the component where they look for it.
//!
//! A pull checks every layer against its digest (oci-client recomputes it
//! while streaming, and the manifest against the reference's digest when
//! pulling by digest), refuses a layer over its size bound before
//! downloading it, bounds the whole pull in time, checks the signature with
//! the trusted keys when there are any, and only then writes the files,
//! each atomically.

use super::files::{remove_if_present, write_atomically};
use super::signature::{self, Policy, SignatureProblem, Verdict};
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const WASM_MEDIA_TYPE: &str = "application/wasm";
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.emseepea.source.manifest.v1+toml";
pub const SIGNATURE_MEDIA_TYPE: &str = "application/vnd.emseepea.source.signature.v1+sshsig";

/// Size bounds per layer: a component (the largest guests, Python ones,
/// are tens of MiB), a manifest, a signature.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;
/// The wasm config blob is a few hundred bytes of JSON.
const MAX_CONFIG_BYTES: u64 = 64 << 10;
/// No read on the connection may stall longer than this.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default bound on a whole pull or push.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
pub enum DistributionError {
    #[error("bad reference {0:?}: {1}")]
    Reference(String, String),
    #[error("bad source name {0:?}: it must be 1..=64 of [A-Za-z0-9._-], not starting with '.'")]
    Name(String),
    #[error("registry: {0}")]
    Registry(String),
    #[error("layer {digest} does not match its digest: refused, nothing written")]
    Digest { digest: String },
    #[error("not an emseepea source artifact: {0}")]
    Layout(String),
    #[error("{what} is {size} bytes; at most {max} are accepted")]
    TooLarge { what: String, size: u64, max: u64 },
    #[error("signature: {0}")]
    Signature(SignatureProblem),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DistributionError + '_ {
    move |source| DistributionError::Io {
        path: path.to_owned(),
        source,
    }
}

impl From<OciDistributionError> for DistributionError {
    fn from(e: OciDistributionError) -> Self {
        match e {
            OciDistributionError::DigestError(d) => DistributionError::Digest {
                digest: match &d {
                    oci_client::errors::DigestError::VerificationError { expected, .. } => {
                        expected.clone()
                    }
                    other => other.to_string(),
                },
            },
            other => DistributionError::Registry(other.to_string()),
        }
    }
}

/// How to reach the registry.
#[derive(Clone, Debug)]
pub struct Registry {
    /// Plain HTTP instead of HTTPS (a registry on localhost).
    pub plain_http: bool,
    pub timeout: Duration,
}

impl Registry {
    fn client(&self) -> Client {
        // reqwest is built without a crypto provider: ring, the host's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Client::new(ClientConfig {
            protocol: if self.plain_http {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            // A source is one manifest; an index is refused, not resolved.
            platform_resolver: None,
            read_timeout: Some(READ_TIMEOUT),
            connect_timeout: Some(CONNECT_TIMEOUT),
            ..Default::default()
        })
    }

    async fn bounded<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, DistributionError>>,
    ) -> Result<T, DistributionError> {
        tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| DistributionError::Timeout(self.timeout))?
    }
}

pub fn parse_reference(reference: &str) -> Result<Reference, DistributionError> {
    reference
        .parse::<Reference>()
        .map_err(|e| DistributionError::Reference(reference.to_owned(), e.to_string()))
}

/// Credentials for `registry` from the Docker config file
/// (`$DOCKER_CONFIG/config.json`, default `~/.docker/config.json`, its
/// credential helpers included); anonymous when it has none.
pub fn registry_auth(registry: &str) -> RegistryAuth {
    match docker_credential::get_credential(registry) {
        Ok(docker_credential::DockerCredential::UsernamePassword(user, password)) => {
            RegistryAuth::Basic(user, password)
        }
        Ok(docker_credential::DockerCredential::IdentityToken(token)) => {
            RegistryAuth::Bearer(token)
        }
        Err(_) => RegistryAuth::Anonymous,
    }
}

/// `emseepea push`: publish `component` with its manifest and signature
/// (`NAME.toml`, `NAME.sig` beside it, when present) as `reference`; the
/// digest it is now pinned by.
pub async fn push(
    registry: &Registry,
    component: &Path,
    reference: &str,
) -> Result<String, DistributionError> {
    let reference = parse_reference(reference)?;
    let wasm = std::fs::read(component).map_err(io(component))?;
    let mut layers = vec![ImageLayer::new(wasm, WASM_MEDIA_TYPE.into(), None)];
    for (path, media_type) in [
        (component.with_extension("toml"), MANIFEST_MEDIA_TYPE),
        (signature::signature_path(component), SIGNATURE_MEDIA_TYPE),
    ] {
        match std::fs::read(&path) {
            Ok(bytes) => layers.push(ImageLayer::new(bytes, media_type.into(), None)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&path)(e)),
        }
    }
    let config = Config::new(wasm_config(&layers), CONFIG_MEDIA_TYPE.into(), None);
    let client = registry.client();
    let auth = registry_auth(reference.resolve_registry());
    registry
        .bounded(async {
            client
                .push(&reference, &layers, config, &auth, None)
                .await?;
            Ok(client.fetch_manifest_digest(&reference, &auth).await?)
        })
        .await
}

/// The wasm OCI config: no `created` time, so pushing the same files again
/// gives the same digest.
fn wasm_config(layers: &[ImageLayer]) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": layers.iter().map(ImageLayer::sha256_digest).collect::<Vec<_>>(),
    }))
    .expect("JSON")
}

/// What a pull wrote.
#[derive(Debug)]
pub struct Pulled {
    pub name: String,
    /// The manifest's digest (`sha256:...`).
    pub digest: String,
    /// `registry/repository@digest`: what a lockfile pins.
    pub pinned: String,
    pub verdict: Verdict,
    pub component: PathBuf,
}

/// `emseepea pull`: fetch `reference` into `dir` as `NAME.wasm` (+ `.toml`,
/// `.sig`); `name` defaults to the repository's last path segment.
pub async fn pull(
    registry: &Registry,
    reference: &str,
    dir: &Path,
    name: Option<&str>,
    policy: &Policy,
) -> Result<Pulled, DistributionError> {
    let reference = parse_reference(reference)?;
    let name = match name {
        Some(n) => n.to_owned(),
        None => reference
            .repository()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
    };
    check_name(&name)?;
    let client = registry.client();
    let auth = registry_auth(reference.resolve_registry());
    let (layers, digest) = registry.bounded(fetch(&client, &reference, &auth)).await?;
    let component = dir.join(format!("{name}.wasm"));
    let verdict = policy
        .check(
            &signature::signature_path(&component),
            layers.signature.as_deref(),
            &layers.wasm,
            layers.manifest.as_deref(),
        )
        .map_err(DistributionError::Signature)?;
    // With keys to check against, a pull must bring a verified signature.
    if !policy.keys.is_empty() && !matches!(verdict, Verdict::Signed(_)) {
        return Err(DistributionError::Signature(SignatureProblem::Missing(
            format!("{name}.{}", signature::EXTENSION).into(),
        )));
    }
    // The manifest and signature first, the component last: a server that
    // starts in between refuses the mismatch rather than running new code
    // under the old manifest. A file the artifact lacks is removed, or the
    // old one would apply to the new component.
    for (path, bytes) in [
        (component.with_extension("toml"), &layers.manifest),
        (signature::signature_path(&component), &layers.signature),
    ] {
        match bytes {
            Some(b) => write_atomically(&path, b).map_err(io(&path))?,
            None => remove_if_present(&path).map_err(io(&path))?,
        }
    }
    write_atomically(&component, &layers.wasm).map_err(io(&component))?;
    Ok(Pulled {
        name,
        pinned: format!(
            "{}/{}@{digest}",
            reference.registry(),
            reference.repository()
        ),
        digest,
        verdict,
        component,
    })
}

/// A source name is a file stem in the sources directory.
fn check_name(name: &str) -> Result<(), DistributionError> {
    let ok = (1..=64).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(DistributionError::Name(name.to_owned()))
    }
}

struct Layers {
    wasm: Vec<u8>,
    manifest: Option<Vec<u8>>,
    signature: Option<Vec<u8>>,
}

async fn fetch(
    client: &Client,
    reference: &Reference,
    auth: &RegistryAuth,
) -> Result<(Layers, String), DistributionError> {
    let (manifest, digest) = client.pull_image_manifest(reference, auth).await?;
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(DistributionError::Layout(format!(
            "config media type {:?}, expected {CONFIG_MEDIA_TYPE}",
            crate::guest_text::GuestText::new(&manifest.config.media_type)
        )));
    }
    if manifest.config.size < 0 || manifest.config.size as u64 > MAX_CONFIG_BYTES {
        return Err(DistributionError::TooLarge {
            what: "the config".into(),
            size: manifest.config.size.max(0) as u64,
            max: MAX_CONFIG_BYTES,
        });
    }
    let mut wasm = None;
    let mut source_manifest = None;
    let mut sig = None;
    for layer in &manifest.layers {
        let (slot, max, what) = match layer.media_type.as_str() {
            WASM_MEDIA_TYPE => (&mut wasm, MAX_COMPONENT_BYTES, "the component"),
            MANIFEST_MEDIA_TYPE => (&mut source_manifest, MAX_MANIFEST_BYTES, "the manifest"),
            SIGNATURE_MEDIA_TYPE => (&mut sig, signature::MAX_SIGNATURE_BYTES, "the signature"),
            other => {
                return Err(DistributionError::Layout(format!(
                    "unexpected layer media type {:?}",
                    crate::guest_text::GuestText::new(other)
                )));
            }
        };
        if slot.is_some() {
            return Err(DistributionError::Layout(format!("two layers of {what}")));
        }
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if size > max {
            return Err(DistributionError::TooLarge {
                what: what.into(),
                size,
                max,
            });
        }
        // The descriptor's size bounds the body too: a registry that sends
        // more is cut off there (and the digest then fails).
        let mut out = BoundedBuffer::new(size);
        client.pull_blob(reference, layer, &mut out).await?;
        *slot = Some(out.bytes);
    }
    let wasm = wasm.ok_or_else(|| DistributionError::Layout("no application/wasm layer".into()))?;
    Ok((
        Layers {
            wasm,
            manifest: source_manifest,
            signature: sig,
        },
        digest,
    ))
}

/// An in-memory sink that refuses to grow past its bound.
struct BoundedBuffer {
    bytes: Vec<u8>,
    max: u64,
}

impl BoundedBuffer {
    fn new(max: u64) -> Self {
        Self {
            bytes: Vec::with_capacity(max.min(1 << 20) as usize),
            max,
        }
    }
}

impl tokio::io::AsyncWrite for BoundedBuffer {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.bytes.len() as u64 + buf.len() as u64 > self.max {
            return Poll::Ready(Err(std::io::Error::other(format!(
                "the registry sent more than the {} bytes the manifest declares",
                self.max
            ))));
        }
        self.bytes.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe_file_stems() {
        for ok in ["documents", "a.b-c_d", "x1"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".hidden", "a/b", "..", "a b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_config_is_reproducible() {
        let l = [ImageLayer::new(b"x".to_vec(), WASM_MEDIA_TYPE.into(), None)];
        assert_eq!(wasm_config(&l), wasm_config(&l));
    }
}
