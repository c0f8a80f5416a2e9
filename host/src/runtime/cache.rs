//! The precompile cache: compiled components on disk, keyed by the SHA-256
//! of the wasm bytes and the engine's compatibility hash, so a restart with
//! unchanged sources does not recompile.
//!
//! wasmtime's `Component::deserialize` runs whatever native code the file
//! holds, so an entry is only ever loaded if it is authenticated with a key
//! the cache directory does not hold: a cache file is
//! `MAGIC || HMAC-SHA-256(key, wasm digest || engine hash || payload) || payload`,
//! the key a 32-byte 0600 file in the state directory (`cache_key_file`).
//! Someone who can write the cache directory but not read the key can
//! therefore neither forge an entry nor move one source's entry onto another
//! (the wasm digest is inside the tag). The directory itself is created 0700
//! and refused when group- or world-writable or owned by another user.
//! Entries are written to a fresh 0600 file and renamed. Any failed check
//! is logged with the file name and recompiled; it is never deserialized.

use crate::runtime::config::RuntimeConfig;
use crate::state::{self, StateError};
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8; 16] = b"emseepea-cwasm2\n";
/// Bytes of the HMAC-SHA-256 tag after the magic.
const TAG_LEN: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// Where a component came from, for `emseepea check` and the startup log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from a verified cache entry.
    Hit,
    /// Compiled (no entry) and stored.
    Compiled,
    /// An entry existed but failed verification or deserialization; rebuilt.
    Rebuilt,
}

impl std::fmt::Display for CacheOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CacheOutcome::Hit => "cached",
            CacheOutcome::Compiled => "compiled",
            CacheOutcome::Rebuilt => "rebuilt",
        })
    }
}

/// Why the cache cannot be used at all, or a component cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("precompile cache: {0}")]
    State(#[from] StateError),
    #[error(
        "precompile cache: the key file {} is inside the cache directory {}; it must live where cache writers cannot read it",
        key.display(), dir.display()
    )]
    KeyInsideCache { key: PathBuf, dir: PathBuf },
    #[error("not a WebAssembly component: {0}")]
    NotAComponent(&'static str),
    #[error("does not compile: {0}")]
    Compile(String),
}

pub struct ComponentCache {
    dir: PathBuf,
    key: [u8; state::SECRET_LEN],
    /// SHA-256 of `Engine::precompile_compatibility_hash`.
    engine_hash: [u8; 32],
}

/// What the cache holds for one component.
enum Stored {
    Missing,
    /// An entry that failed verification or deserialization (logged).
    Invalid,
    Loaded(Component),
}

/// Feeds a `Hash` impl into SHA-256 (the compatibility hash is only
/// available as `impl Hash`; SipHash's 64 bits are too few to key on).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    fn finish(&self) -> u64 {
        // Never used: the digest is read with `finalize` below.
        0
    }
}

impl ComponentCache {
    /// Open (or create, 0700) the cache directory and load (or create) its
    /// key. Refuses a shared or foreign directory and a key inside it.
    pub fn open(engine: &Engine, dir: PathBuf, key_file: &Path) -> Result<Self, CacheError> {
        state::private_dir(&dir)?;
        let key = state::load_or_create_secret(key_file)?;
        // Compared after both exist, so `..` and symbolic links cannot hide it.
        if let (Ok(d), Some(Ok(k))) = (
            dir.canonicalize(),
            key_file.parent().map(Path::canonicalize),
        ) && k.starts_with(&d)
        {
            return Err(CacheError::KeyInsideCache {
                key: key_file.to_owned(),
                dir,
            });
        }
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Ok(Self {
            dir,
            key,
            engine_hash: hasher.0.finalize().into(),
        })
    }

    fn entry_path(&self, wasm_sha256: &str) -> PathBuf {
        self.dir.join(format!(
            "{wasm_sha256}-{}.cwasm",
            hex::encode(&self.engine_hash[..8])
        ))
    }

    fn mac(&self, wasm_sha256: &str, payload: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(MAGIC);
        mac.update(wasm_sha256.as_bytes());
        mac.update(&self.engine_hash);
        mac.update(payload);
        mac
    }

    /// The payload of an entry if its tag is right for this wasm, this
    /// engine and this key (compared in constant time).
    fn verified_payload<'a>(&self, wasm_sha256: &str, file: &'a [u8]) -> Option<&'a [u8]> {
        let rest = file.strip_prefix(MAGIC.as_slice())?;
        if rest.len() < TAG_LEN {
            return None;
        }
        let (tag, payload) = rest.split_at(TAG_LEN);
        self.mac(wasm_sha256, payload)
            .verify_slice(tag)
            .ok()
            .map(|()| payload)
    }

    /// The stored entry for `wasm_sha256`, if there is one; a bad one is
    /// logged with the reason and never deserialized.
    fn stored(&self, engine: &Engine, wasm_sha256: &str) -> Stored {
        let path = self.entry_path(wasm_sha256);
        let Ok(file) = std::fs::read(&path) else {
            return Stored::Missing;
        };
        match self.verified_payload(wasm_sha256, &file) {
            // SAFETY: the tag proves the payload is what this host's
            // `precompile_component` produced for these wasm bytes and
            // this engine configuration (wasmtime re-checks the latter).
            Some(payload) => match unsafe { Component::deserialize(engine, payload) } {
                Ok(component) => Stored::Loaded(component),
                Err(e) => {
                    tracing::warn!(path = %path.display(), "stale cache entry, recompiling: {e}");
                    Stored::Invalid
                }
            },
            None => {
                tracing::warn!(
                    path = %path.display(),
                    "corrupt cache entry (authentication failed), recompiling; it was not loaded"
                );
                Stored::Invalid
            }
        }
    }

    /// The component stored for `wasm_sha256`, without compiling (a new
    /// copy of an already loaded component, for trimming).
    pub(crate) fn load_stored(&self, engine: &Engine, wasm_sha256: &str) -> Option<Component> {
        match self.stored(engine, wasm_sha256) {
            Stored::Loaded(component) => Some(component),
            Stored::Missing | Stored::Invalid => None,
        }
    }

    /// The component for `wasm`, from the cache when a valid entry exists.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        config: &RuntimeConfig,
        wasm: &[u8],
        wasm_sha256: &str,
    ) -> Result<(Component, CacheOutcome), CacheError> {
        let path = self.entry_path(wasm_sha256);
        let outcome = match self.stored(engine, wasm_sha256) {
            Stored::Loaded(component) => return Ok((component, CacheOutcome::Hit)),
            Stored::Missing => CacheOutcome::Compiled,
            Stored::Invalid => CacheOutcome::Rebuilt,
        };
        check_component_header(wasm)?;
        let compiled = super::compile::precompile(engine, config, wasm)?;
        if let Err(e) = self.store(&path, wasm_sha256, &compiled) {
            tracing::warn!(path = %path.display(), "could not write the precompile cache: {e}");
        }
        // SAFETY: produced just now by this engine.
        let component = unsafe { Component::deserialize(engine, &compiled) }
            .map_err(|e| CacheError::Compile(format!("{e:#}")))?;
        Ok((component, outcome))
    }

    fn store(&self, path: &Path, wasm_sha256: &str, compiled: &[u8]) -> std::io::Result<()> {
        let tmp = path.with_extension(format!(
            "tmp-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        let tag = self.mac(wasm_sha256, compiled).finalize().into_bytes();
        let written = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(MAGIC)?;
            f.write_all(&tag)?;
            f.write_all(compiled)
        })();
        match written.and_then(|()| std::fs::rename(&tmp, path)) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }
}

/// Refuse anything but a component before handing it to the compiler, with
/// a reason a guest author can act on.
fn check_component_header(wasm: &[u8]) -> Result<(), CacheError> {
    const COMPONENT: [u8; 8] = *b"\0asm\x0d\0\x01\0";
    const CORE: [u8; 8] = *b"\0asm\x01\0\0\0";
    match wasm.get(..8) {
        Some(h) if h == COMPONENT => Ok(()),
        Some(h) if h == CORE => Err(CacheError::NotAComponent(
            "it is a core module (build for wasm32-wasip2, or wrap it with `wasm-tools component new`)",
        )),
        Some(h) if h.starts_with(b"\0asm") => {
            Err(CacheError::NotAComponent("unknown binary version"))
        }
        _ => Err(CacheError::NotAComponent("no WebAssembly header")),
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(dir: &Path, key: &Path) -> ComponentCache {
        ComponentCache::open(&Engine::default(), dir.to_owned(), key).unwrap()
    }

    fn entry(c: &ComponentCache, wasm_sha256: &str, payload: &[u8]) -> Vec<u8> {
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&c.mac(wasm_sha256, payload).finalize().into_bytes());
        file.extend_from_slice(payload);
        file
    }

    #[test]
    fn entries_are_bound_to_key_wasm_and_payload() {
        let d = tempfile::tempdir().unwrap();
        let c = cache(&d.path().join("cache"), &d.path().join("state/key"));
        let mut file = entry(&c, "aa", b"abc");
        assert_eq!(c.verified_payload("aa", &file), Some(&b"abc"[..]));
        // Another source's entry under this source's name.
        assert_eq!(c.verified_payload("bb", &file), None);
        // Another key (another state directory).
        let other = cache(&d.path().join("cache"), &d.path().join("other/key"));
        assert_eq!(other.verified_payload("aa", &file), None);
        // The unkeyed digest of the old format is not a tag.
        let mut old = MAGIC.to_vec();
        old.extend_from_slice(&Sha256::digest(b"abc"));
        old.extend_from_slice(b"abc");
        assert_eq!(c.verified_payload("aa", &old), None);
        let last = file.len() - 1;
        file[last] ^= 1;
        assert_eq!(c.verified_payload("aa", &file), None);
        assert_eq!(c.verified_payload("aa", b"short"), None);
        assert_eq!(c.verified_payload("aa", &file[..20]), None);
    }

    #[test]
    fn a_key_inside_the_cache_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("cache");
        let e = ComponentCache::open(&Engine::default(), dir.clone(), &dir.join("key"))
            .err()
            .expect("refused");
        assert!(matches!(e, CacheError::KeyInsideCache { .. }), "{e}");
    }

    #[test]
    fn a_shared_cache_directory_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("cache");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = ComponentCache::open(&Engine::default(), dir, &d.path().join("key"))
            .err()
            .expect("refused");
        assert!(e.to_string().contains("writable by group or others"), "{e}");
    }
}
