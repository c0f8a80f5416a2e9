//! The precompile cache: compiled components on disk, keyed by the SHA-256
//! of the wasm bytes and the engine's compatibility hash, so a restart with
//! unchanged sources does not recompile.
//!
//! A cache file is `MAGIC || sha256(payload) || payload`. The digest is
//! checked before the payload is handed to wasmtime (whose deserialization
//! trusts its input), so a corrupt or truncated entry is detected and
//! rebuilt, never loaded. Entries are written to a temporary file and renamed.

use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8; 16] = b"emseepea-cwasm1\n";

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

pub struct ComponentCache {
    dir: PathBuf,
    engine_key: String,
}

impl ComponentCache {
    pub fn new(engine: &Engine, dir: PathBuf) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Self {
            dir,
            engine_key: format!("{:016x}", hasher.finish()),
        }
    }

    fn entry_path(&self, wasm_sha256: &str) -> PathBuf {
        self.dir
            .join(format!("{wasm_sha256}-{}.cwasm", self.engine_key))
    }

    /// The component for `wasm`, from the cache when a valid entry exists.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        wasm: &[u8],
        wasm_sha256: &str,
    ) -> Result<(Component, CacheOutcome), String> {
        let path = self.entry_path(wasm_sha256);
        let mut outcome = CacheOutcome::Compiled;
        if let Ok(file) = std::fs::read(&path) {
            match verified_payload(&file) {
                // SAFETY: the payload is byte-for-byte what `precompile_component`
                // produced for this engine configuration (digest checked above,
                // engine compatibility in the file name and re-checked by wasmtime).
                Some(payload) => match unsafe { Component::deserialize(engine, payload) } {
                    Ok(component) => return Ok((component, CacheOutcome::Hit)),
                    Err(e) => {
                        tracing::warn!(path = %path.display(), "stale cache entry, recompiling: {e}")
                    }
                },
                None => tracing::warn!(path = %path.display(), "corrupt cache entry, recompiling"),
            }
            outcome = CacheOutcome::Rebuilt;
        }
        check_component_header(wasm)?;
        let compiled = engine.precompile_component(wasm).map_err(|e| {
            format!(
                "does not compile: {}",
                crate::config::one_line(&format!("{e:#}"))
            )
        })?;
        if let Err(e) = self.store(&path, &compiled) {
            tracing::warn!(path = %path.display(), "could not write the precompile cache: {e}");
        }
        // SAFETY: produced just now by this engine.
        let component =
            unsafe { Component::deserialize(engine, &compiled) }.map_err(|e| format!("{e:#}"))?;
        Ok((component, outcome))
    }

    fn store(&self, path: &Path, compiled: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let mut bytes = Vec::with_capacity(MAGIC.len() + 32 + compiled.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&Sha256::digest(compiled));
        bytes.extend_from_slice(compiled);
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, path)
    }
}

fn verified_payload(file: &[u8]) -> Option<&[u8]> {
    let rest = file.strip_prefix(MAGIC.as_slice())?;
    if rest.len() < 32 {
        return None;
    }
    let (digest, payload) = rest.split_at(32);
    (Sha256::digest(payload).as_slice() == digest).then_some(payload)
}

/// Refuse anything but a component before handing it to the compiler, with
/// a reason a guest author can act on.
fn check_component_header(wasm: &[u8]) -> Result<(), String> {
    const COMPONENT: [u8; 8] = *b"\0asm\x0d\0\x01\0";
    const CORE: [u8; 8] = *b"\0asm\x01\0\0\0";
    match wasm.get(..8) {
        Some(h) if h == COMPONENT => Ok(()),
        Some(h) if h == CORE => Err("not a WebAssembly component: it is a core module (build for wasm32-wasip2, or wrap it with `wasm-tools component new`)".into()),
        Some(h) if h.starts_with(b"\0asm") => Err("not a WebAssembly component: unknown binary version".into()),
        _ => Err("not a WebAssembly component: no WebAssembly header".into()),
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_is_verified() {
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&Sha256::digest(b"abc"));
        file.extend_from_slice(b"abc");
        assert_eq!(verified_payload(&file), Some(&b"abc"[..]));
        let last = file.len() - 1;
        file[last] ^= 1;
        assert_eq!(verified_payload(&file), None);
        assert_eq!(verified_payload(b"short"), None);
        assert_eq!(verified_payload(&file[..20]), None);
    }
}
