//! `sources.lock`: each source's name and the exact artifact it is pulled
//! from (`registry/repository@sha256:...`), so that a deploy fetches the
//! same bytes every time whatever the tags now point at:
//!
//! ```toml
//! [sources]
//! documents = "registry.example/emseepea/documents@sha256:0123..."
//! ```

use super::files::write_atomically;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Parse {
        path: std::path::PathBuf,
        message: String,
    },
    #[error("{}: source {name:?} is pinned by {pinned:?}, which names no sha256 digest", path.display())]
    NotPinned {
        path: std::path::PathBuf,
        name: String,
        pinned: String,
    },
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

const HEADER: &str = "# Written by `emseepea pull --lock`: each source pinned by the digest of its\n\
                      # artifact. `emseepea pull --lock FILE --into DIR` fetches exactly these.\n";

impl Lock {
    /// The lockfile at `path`; empty when there is none yet.
    pub fn load(path: &Path) -> Result<Lock, LockError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Lock::default()),
            Err(source) => {
                return Err(LockError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        let lock: Lock = toml::from_str(&text).map_err(|e| LockError::Parse {
            path: path.to_owned(),
            message: crate::toml_file::one_line(&e.to_string()),
        })?;
        for (name, pinned) in &lock.sources {
            if !pinned.contains("@sha256:") {
                return Err(LockError::NotPinned {
                    path: path.to_owned(),
                    name: name.clone(),
                    pinned: pinned.clone(),
                });
            }
        }
        Ok(lock)
    }

    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let body = toml::to_string(self).map_err(std::io::Error::other)?;
        write_atomically(path, format!("{HEADER}{body}").as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_round_trips_and_refuses_tags() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("sources.lock");
        assert!(Lock::load(&path).unwrap().sources.is_empty());
        let mut lock = Lock::default();
        lock.sources
            .insert("docs".into(), "r.example/a/docs@sha256:00".into());
        lock.save(&path).unwrap();
        assert_eq!(
            Lock::load(&path).unwrap().sources["docs"],
            "r.example/a/docs@sha256:00"
        );
        std::fs::write(&path, "[sources]\ndocs = \"r.example/a/docs:latest\"\n").unwrap();
        assert!(matches!(
            Lock::load(&path),
            Err(LockError::NotPinned { .. })
        ));
    }
}
