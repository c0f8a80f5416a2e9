//! Signed sources: `NAME.sig` beside `NAME.wasm` is an OpenSSH signature
//! (`ssh-keygen -Y sign -n emseepea-source`, the "SSHSIG" format) over a
//! small statement naming the SHA-256 of `NAME.wasm` and of `NAME.toml`:
//!
//! ```text
//! emseepea-source-signature v1
//! component sha256:<64 hex digits>
//! manifest sha256:<64 hex digits>      (or: manifest none)
//! ```
//!
//! each line ending in `\n`. The manifest decides what the code may reach
//! (its grants and budgets), so it is covered too: editing, adding or
//! removing it breaks the signature, as does any change to the component.
//! The file name is not covered: renaming a signed pair changes only its
//! registration order.
//!
//! SSH signatures because the tool that makes them is already on every
//! operator's machine (openssh-client), works with the keys, agents and
//! hardware tokens they have, verifies offline with a public key, and needs
//! no transparency log or certificate authority (cosign's keyless mode
//! does); `ssh-keygen -Y verify` checks the same file by hand.

use serde::Deserialize;
use sha2::{Digest, Sha256};
use ssh_key::{HashAlg, PublicKey, SshSig};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The SSHSIG namespace: a signature made for anything else (git commits,
/// files) is not valid here.
pub const NAMESPACE: &str = "emseepea-source";
/// `NAME.sig` beside `NAME.wasm`.
pub const EXTENSION: &str = "sig";
/// An SSHSIG file is a few hundred bytes (RSA-4096: about 1.5 KiB).
pub const MAX_SIGNATURE_BYTES: u64 = 16 * 1024;
/// A trusted-keys file: an `authorized_keys`-sized list.
const MAX_KEYS_FILE_BYTES: u64 = 1 << 20;

/// `[sources]` of the server config.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcesConfig {
    /// OpenSSH public keys, each either inline (`ssh-ed25519 AAAA... name`)
    /// or a file of them, one a line (relative to the config's directory).
    #[serde(default)]
    pub trusted_keys: Vec<String>,
    /// Refuse to start with any source that has no valid signature by a
    /// trusted key.
    #[serde(default)]
    pub require_signatures: bool,
}

impl SourcesConfig {
    /// Resolve key files against the config's directory.
    pub fn resolve(&mut self, base: &Path) {
        for entry in &mut self.trusted_keys {
            if !is_inline_key(entry) {
                *entry = base.join(&*entry).to_string_lossy().into_owned();
            }
        }
    }
}

/// An entry that is a key rather than a file name: it starts with an
/// OpenSSH key type.
fn is_inline_key(entry: &str) -> bool {
    let t = entry.trim_start();
    ["ssh-", "ecdsa-", "sk-"].iter().any(|p| t.starts_with(p))
}

/// Why the trusted keys cannot be loaded (the entry, then the reason).
#[derive(Debug, thiserror::Error)]
#[error("sources.trusted_keys {entry}: {reason}")]
pub struct KeysError {
    pub entry: String,
    pub reason: String,
}

/// Why a source's signature is refused: the startup line's reason.
#[derive(Debug, thiserror::Error)]
pub enum SignatureProblem {
    #[error("no signature {} beside it, and signatures are required", .0.display())]
    Missing(PathBuf),
    #[error("cannot read the signature: {0}")]
    Read(std::io::Error),
    #[error("malformed signature: {0}")]
    Malformed(String),
    #[error("signed by an untrusted key ({0})")]
    UntrustedKey(String),
    #[error(
        "the signature does not match the component and its manifest (they are not the bytes that were signed)"
    )]
    Mismatch,
}

/// The public keys a signature must be made with.
#[derive(Clone, Debug, Default)]
pub struct TrustedKeys {
    keys: Vec<PublicKey>,
}

impl TrustedKeys {
    pub fn load(entries: &[String]) -> Result<TrustedKeys, KeysError> {
        let mut keys = Vec::new();
        for entry in entries {
            let err = |reason: String| KeysError {
                entry: if is_inline_key(entry) {
                    // The key type and the start of the key, not all of it.
                    entry.chars().take(32).collect::<String>() + "..."
                } else {
                    entry.clone()
                },
                reason,
            };
            let text = if is_inline_key(entry) {
                entry.clone()
            } else {
                read_bounded(Path::new(entry), MAX_KEYS_FILE_BYTES)
                    .map_err(|e| err(e.to_string()))
                    .and_then(|b| String::from_utf8(b).map_err(|_| err("not UTF-8".into())))?
            };
            let before = keys.len();
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let key = PublicKey::from_openssh(line)
                    .map_err(|e| err(format!("line {}: not an OpenSSH public key: {e}", n + 1)))?;
                keys.push(key);
            }
            if keys.len() == before {
                return Err(err("no public key in it".into()));
            }
        }
        Ok(TrustedKeys { keys })
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Check `signature` (an SSHSIG PEM file's bytes) over `statement`;
    /// the SHA-256 fingerprint of the trusted key that made it.
    pub fn verify(&self, signature: &[u8], statement: &[u8]) -> Result<String, SignatureProblem> {
        let sig =
            SshSig::from_pem(signature).map_err(|e| SignatureProblem::Malformed(e.to_string()))?;
        if sig.namespace() != NAMESPACE {
            return Err(SignatureProblem::Malformed(format!(
                "made for namespace {:?}, not {NAMESPACE:?}",
                crate::guest_text::GuestText::new(sig.namespace())
            )));
        }
        let fingerprint = sig.public_key().fingerprint(HashAlg::Sha256).to_string();
        let key = self
            .keys
            .iter()
            .find(|k| k.key_data() == sig.public_key())
            .ok_or(SignatureProblem::UntrustedKey(fingerprint.clone()))?;
        key.verify(NAMESPACE, statement, &sig)
            .map_err(|_| SignatureProblem::Mismatch)?;
        Ok(fingerprint)
    }
}

/// What a signature covers: see the module's documentation.
pub fn statement(component: &[u8], manifest: Option<&[u8]>) -> Vec<u8> {
    let manifest = match manifest {
        Some(m) => format!("sha256:{}", hex::encode(Sha256::digest(m))),
        None => "none".to_owned(),
    };
    format!(
        "emseepea-source-signature v1\ncomponent sha256:{}\nmanifest {manifest}\n",
        hex::encode(Sha256::digest(component))
    )
    .into_bytes()
}

/// The signature of `component` (`NAME.wasm` → `NAME.sig`).
pub fn signature_path(component: &Path) -> PathBuf {
    component.with_extension(EXTENSION)
}

/// The signature file's bytes, or None when there is none.
pub fn read_signature(path: &Path) -> Result<Option<Vec<u8>>, SignatureProblem> {
    match read_bounded(path, MAX_SIGNATURE_BYTES) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SignatureProblem::Read(e)),
    }
}

/// Read at most `max` bytes of `path`; a longer file is an error.
fn read_bounded(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::other(format!("larger than {max} bytes")));
    }
    Ok(bytes)
}

/// The signature policy startup applies: the trusted keys and whether a
/// signature is required.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    pub keys: TrustedKeys,
    pub require: bool,
}

/// What the policy found for one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Signed by the trusted key with this fingerprint.
    Signed(String),
    /// No signature, and none required.
    Unsigned,
    /// A signature, but no trusted keys to check it with.
    Unchecked,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Signed(k) => write!(f, "signed by {k}"),
            Verdict::Unsigned => f.write_str("unsigned"),
            Verdict::Unchecked => f.write_str("signature not checked (no trusted keys)"),
        }
    }
}

impl Policy {
    pub fn from_config(config: &SourcesConfig) -> Result<Policy, KeysError> {
        Ok(Policy {
            keys: TrustedKeys::load(&config.trusted_keys)?,
            require: config.require_signatures,
        })
    }

    /// Apply the policy to a source's bytes (exactly the ones that will be
    /// used) and its signature file's (None: there is none). A signature
    /// that is present is checked whenever there are keys to check it with,
    /// required or not.
    pub fn check(
        &self,
        signature_file: &Path,
        signature: Option<&[u8]>,
        component: &[u8],
        manifest: Option<&[u8]>,
    ) -> Result<Verdict, SignatureProblem> {
        match signature {
            None if self.require => Err(SignatureProblem::Missing(
                signature_file.file_name().unwrap_or_default().into(),
            )),
            None => Ok(Verdict::Unsigned),
            Some(_) if self.keys.is_empty() => Ok(Verdict::Unchecked),
            Some(sig) => self
                .keys
                .verify(sig, &statement(component, manifest))
                .map(Verdict::Signed),
        }
    }
}

/// `emseepea sign`: sign `component` and its manifest (`NAME.toml`, if
/// present) with `ssh-keygen -Y sign -f KEY` (so any key ssh-keygen can
/// use: a file, possibly with a passphrase, or one in the agent), writing
/// `NAME.sig`. The path of the signature.
pub fn sign(component: &Path, key: &Path) -> anyhow::Result<PathBuf> {
    use anyhow::Context;
    use std::io::Write;
    use std::process::{Command, Stdio};
    let wasm =
        std::fs::read(component).with_context(|| format!("cannot read {}", component.display()))?;
    let manifest_path = component.with_extension("toml");
    let manifest = match std::fs::read(&manifest_path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(e).with_context(|| format!("cannot read {}", manifest_path.display()));
        }
    };
    let statement = statement(&wasm, manifest.as_deref());
    let mut child = Command::new("ssh-keygen")
        .args(["-q", "-Y", "sign", "-n", NAMESPACE, "-f"])
        .arg(key)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot run ssh-keygen (Debian package openssh-client)")?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(&statement)
        .context("writing to ssh-keygen")?;
    let out = child.wait_with_output().context("waiting for ssh-keygen")?;
    anyhow::ensure!(
        out.status.success(),
        "ssh-keygen -Y sign failed ({})",
        out.status
    );
    SshSig::from_pem(&out.stdout).context("ssh-keygen did not print a signature")?;
    let path = signature_path(component);
    super::files::write_atomically(&path, &out.stdout)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statement_names_both_digests_or_no_manifest() {
        let s = String::from_utf8(statement(b"abc", None)).unwrap();
        assert_eq!(
            s,
            "emseepea-source-signature v1\ncomponent sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\nmanifest none\n"
        );
        assert_ne!(statement(b"abc", Some(b"")), statement(b"abc", None));
        assert_ne!(statement(b"abc", Some(b"x")), statement(b"abc", Some(b"y")));
    }

    #[test]
    fn inline_keys_and_files_are_told_apart() {
        assert!(is_inline_key("ssh-ed25519 AAAA x"));
        assert!(is_inline_key("ecdsa-sha2-nistp256 AAAA"));
        assert!(!is_inline_key("keys/release.pub"));
        let mut c = SourcesConfig {
            trusted_keys: vec!["keys/a.pub".into(), "ssh-ed25519 AAAA".into()],
            require_signatures: true,
        };
        c.resolve(Path::new("/etc/emseepea"));
        assert_eq!(c.trusted_keys[0], "/etc/emseepea/keys/a.pub");
        assert_eq!(c.trusted_keys[1], "ssh-ed25519 AAAA");
    }

    #[test]
    fn a_missing_signature_is_refused_only_when_required() {
        let p = Policy::default();
        let f = Path::new("/s/a.sig");
        assert_eq!(p.check(f, None, b"x", None).unwrap(), Verdict::Unsigned);
        let p = Policy {
            require: true,
            ..Policy::default()
        };
        assert!(matches!(
            p.check(f, None, b"x", None),
            Err(SignatureProblem::Missing(_))
        ));
    }

    /// Made with `ssh-keygen -Y sign -n emseepea-source -f k` over
    /// `statement(b"abc", None)`.
    const FIXTURE_KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPvoaS7VWbUW5Gq6/Zngyp8HTqWsLaaxssl6f5brVl2K fixture";
    const OTHER_KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIN25v1+DZiOlAzCfcL2qoE+SP2D3Q1+0+TTn8iiLasXP other";
    const FIXTURE_SIG: &str = "-----BEGIN SSH SIGNATURE-----
U1NIU0lHAAAAAQAAADMAAAALc3NoLWVkMjU1MTkAAAAg++hpLtVZtRbkarr9meDKnwdOpa
wtprGyyXp/lutWXYoAAAAPZW1zZWVwZWEtc291cmNlAAAAAAAAAAZzaGE1MTIAAABTAAAA
C3NzaC1lZDI1NTE5AAAAQA85RzrCyAD4PMza0cjMvYrbsYZD9qrg0oeoqx7YA3HzSQTnXf
WyjuVVwfVoxRRmc+gcbuH5H+N7pcB24DqJKgU=
-----END SSH SIGNATURE-----
";

    #[test]
    fn an_ssh_keygen_signature_verifies_over_its_statement_only() {
        let trusted = TrustedKeys::load(&[FIXTURE_KEY.into()]).unwrap();
        let fingerprint = trusted
            .verify(FIXTURE_SIG.as_bytes(), &statement(b"abc", None))
            .unwrap();
        assert!(fingerprint.starts_with("SHA256:"), "{fingerprint}");
        assert!(matches!(
            trusted.verify(FIXTURE_SIG.as_bytes(), &statement(b"abd", None)),
            Err(SignatureProblem::Mismatch)
        ));
        assert!(matches!(
            trusted.verify(FIXTURE_SIG.as_bytes(), &statement(b"abc", Some(b""))),
            Err(SignatureProblem::Mismatch)
        ));
        let other = TrustedKeys::load(&[OTHER_KEY.into()]).unwrap();
        assert!(matches!(
            other.verify(FIXTURE_SIG.as_bytes(), &statement(b"abc", None)),
            Err(SignatureProblem::UntrustedKey(f)) if f == fingerprint
        ));
        // A keys file with comments and both keys.
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("keys.pub");
        std::fs::write(
            &file,
            format!("# release keys\n{OTHER_KEY}\n\n{FIXTURE_KEY}\n"),
        )
        .unwrap();
        let both = TrustedKeys::load(&[file.to_string_lossy().into_owned()]).unwrap();
        assert!(
            both.verify(FIXTURE_SIG.as_bytes(), &statement(b"abc", None))
                .is_ok()
        );
        let empty = d.path().join("empty.pub");
        std::fs::write(&empty, "# nothing\n").unwrap();
        assert!(TrustedKeys::load(&[empty.to_string_lossy().into_owned()]).is_err());
    }

    #[test]
    fn garbage_is_malformed_and_bad_keys_are_refused() {
        let e = TrustedKeys::load(&["ssh-ed25519 notbase64".into()]).unwrap_err();
        assert!(e.to_string().contains("not an OpenSSH public key"), "{e}");
        let keys = TrustedKeys::default();
        assert!(matches!(
            keys.verify(b"-----BEGIN SSH SIGNATURE-----\nxx\n", b"s"),
            Err(SignatureProblem::Malformed(_))
        ));
    }
}
