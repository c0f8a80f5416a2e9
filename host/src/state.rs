//! The state directory and the secrets kept in it: the dev-mode signing key
//! and the precompile cache's authentication key.
//!
//! A secret file is exactly [`SECRET_LEN`] random bytes, a regular file of
//! mode 0600 owned by this user. Anything else is refused with a reason
//! (never repaired, never a panic): a short or readable key is a forgery
//! waiting to happen. A missing file is created without a window: the bytes
//! go to a fresh `O_EXCL` temporary file, which is then hard-linked to the
//! final name; the link fails if another process got there first, and then
//! that process's complete file is read. Two servers starting at once thus
//! always end up with the same secret.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Bytes of every secret file (HS256 and HMAC-SHA-256 keys).
pub const SECRET_LEN: usize = 32;

/// Why a secret file or a private directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{}: a secret must be exactly {SECRET_LEN} bytes, this file has {len} (delete it to have a new one generated)",
        path.display()
    )]
    WrongLength { path: PathBuf, len: u64 },
    #[error(
        "{}: mode {mode:04o}: a secret must be readable by its owner only (chmod 600)",
        path.display()
    )]
    WrongMode { path: PathBuf, mode: u32 },
    #[error("{}: not a regular file (symbolic links are refused)", path.display())]
    NotAFile { path: PathBuf },
    #[error("{}: not a directory", path.display())]
    NotADirectory { path: PathBuf },
    #[error(
        "{}: owned by uid {owner}, not by this server's uid {uid}",
        path.display()
    )]
    ForeignOwner { path: PathBuf, owner: u32, uid: u32 },
    #[error(
        "{}: mode {mode:04o}: writable by group or others, who could plant files in it (chmod 700)",
        path.display()
    )]
    SharedDirectory { path: PathBuf, mode: u32 },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_owned(),
        source,
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Make sure `dir` is a directory only this user can write: created 0700
/// when missing; an existing one must be ours and not group- or
/// world-writable.
pub fn private_dir(dir: &Path) -> Result<(), StateError> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io(dir))?,
        Err(e) => return Err(io(dir)(e)),
        Ok(_) => {}
    }
    let meta = std::fs::metadata(dir).map_err(io(dir))?;
    if !meta.is_dir() {
        return Err(StateError::NotADirectory {
            path: dir.to_owned(),
        });
    }
    if meta.uid() != euid() {
        return Err(StateError::ForeignOwner {
            path: dir.to_owned(),
            owner: meta.uid(),
            uid: euid(),
        });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(StateError::SharedDirectory {
            path: dir.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// The secret at `path`, created (with its directory, 0700) when missing.
pub fn load_or_create_secret(path: &Path) -> Result<[u8; SECRET_LEN], StateError> {
    match read_secret(path) {
        Err(StateError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
        other => return other,
    }
    if let Some(dir) = path.parent() {
        private_dir(dir)?;
    }
    let secret: [u8; SECRET_LEN] = rand::random();
    let tmp = path.with_extension(format!(
        "tmp-{}-{:016x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&secret)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(&tmp)(e));
    }
    // The link is the atomic "create if absent" of a complete file.
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(secret),
        // Another process won the race: use its secret.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_secret(path),
        Err(e) => Err(io(path)(e)),
    }
}

fn read_secret(path: &Path) -> Result<[u8; SECRET_LEN], StateError> {
    let meta = std::fs::symlink_metadata(path).map_err(io(path))?;
    if !meta.file_type().is_file() {
        return Err(StateError::NotAFile {
            path: path.to_owned(),
        });
    }
    if meta.uid() != euid() {
        return Err(StateError::ForeignOwner {
            path: path.to_owned(),
            owner: meta.uid(),
            uid: euid(),
        });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(StateError::WrongMode {
            path: path.to_owned(),
            mode,
        });
    }
    if meta.len() != SECRET_LEN as u64 {
        return Err(StateError::WrongLength {
            path: path.to_owned(),
            len: meta.len(),
        });
    }
    let bytes = std::fs::read(path).map_err(io(path))?;
    bytes
        .try_into()
        .map_err(|b: Vec<u8>| StateError::WrongLength {
            path: path.to_owned(),
            len: b.len() as u64,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_mode(path: &Path, bytes: &[u8], mode: u32) {
        std::fs::write(path, bytes).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn created_once_then_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new/secret");
        let first = load_or_create_secret(&path).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(meta.len(), SECRET_LEN as u64);
        let parent = std::fs::metadata(path.parent().unwrap()).unwrap();
        assert_eq!(parent.permissions().mode() & 0o777, 0o700);
        assert_eq!(load_or_create_secret(&path).unwrap(), first);
        assert_ne!(first, [0u8; SECRET_LEN]);
        // No temporary file is left behind.
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
    }

    #[test]
    fn concurrent_creators_agree() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        let secrets: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| load_or_create_secret(&path).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(secrets.iter().all(|s| *s == secrets[0]), "secrets differ");
        assert_eq!(std::fs::read(&path).unwrap(), secrets[0]);
    }

    #[test]
    fn bad_files_are_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        write_mode(&path, b"00", 0o600);
        assert!(matches!(
            load_or_create_secret(&path),
            Err(StateError::WrongLength { len: 2, .. })
        ));
        write_mode(&path, b"", 0o600);
        assert!(matches!(
            load_or_create_secret(&path),
            Err(StateError::WrongLength { len: 0, .. })
        ));
        write_mode(&path, &[7u8; 33], 0o600);
        assert!(matches!(
            load_or_create_secret(&path),
            Err(StateError::WrongLength { len: 33, .. })
        ));
        write_mode(&path, &[7u8; 32], 0o644);
        let e = load_or_create_secret(&path).unwrap_err();
        assert!(
            matches!(e, StateError::WrongMode { mode: 0o644, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("0644"), "{e}");
        write_mode(&path, &[7u8; 32], 0o600);
        assert_eq!(load_or_create_secret(&path).unwrap(), [7u8; 32]);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(matches!(
            load_or_create_secret(&link),
            Err(StateError::NotAFile { .. })
        ));
    }

    #[test]
    fn shared_directories_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("cache");
        private_dir(&d).unwrap();
        assert_eq!(
            std::fs::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700
        );
        for mode in [0o777, 0o770, 0o722] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = private_dir(&d).unwrap_err();
            assert!(e.to_string().contains("writable by group or others"), "{e}");
        }
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&d).unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        assert!(matches!(
            private_dir(&file),
            Err(StateError::NotADirectory { .. })
        ));
    }

    #[test]
    fn foreign_directories_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        // As root, hand a directory to `nobody`; otherwise `/` is root's, not ours.
        let foreign = if euid() == 0 {
            let d = dir.path().join("foreign");
            std::fs::create_dir(&d).unwrap();
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
            std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
            d
        } else {
            PathBuf::from("/")
        };
        let e = private_dir(&foreign).unwrap_err();
        assert!(matches!(e, StateError::ForeignOwner { .. }), "{e}");
        assert!(e.to_string().contains("owned by uid"), "{e}");
    }

    /// deploy/kubernetes: the kubelet makes an emptyDir's root owned by
    /// root, mode 0777 (2777 and group-owned with an fsGroup). As the state
    /// directory itself it is refused (shared, or not ours); a subdirectory
    /// the server makes in it (`state_dir = "/state/emseepea"`) is private
    /// and holds the secrets.
    #[test]
    fn a_kubernetes_empty_dir_is_refused_but_a_directory_made_in_it_is_private() {
        let dir = tempfile::tempdir().unwrap();
        for (i, mode) in [0o777, 0o2777, 0o2775, 0o2770].into_iter().enumerate() {
            let volume = dir.path().join(format!("volume-{i}"));
            std::fs::create_dir(&volume).unwrap();
            std::fs::set_permissions(&volume, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = private_dir(&volume).unwrap_err();
            assert!(
                matches!(e, StateError::SharedDirectory { .. }),
                "{mode:o}: {e}"
            );
            let state = volume.join("emseepea");
            private_dir(&state).unwrap();
            let meta = std::fs::metadata(&state).unwrap();
            assert_eq!(meta.permissions().mode() & 0o077, 0, "{mode:o}");
            assert_eq!(meta.uid(), euid());
            load_or_create_secret(&state.join("precompile-key")).unwrap();
            private_dir(&state.join("precompiled")).unwrap();
        }
        // Root-owned (as the kubelet leaves it) while the server runs as
        // uid 10001: not ours. Only root can hand a directory to another uid.
        if euid() == 0 {
            let volume = dir.path().join("root-owned");
            std::fs::create_dir(&volume).unwrap();
            std::fs::set_permissions(&volume, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::os::unix::fs::chown(&volume, Some(65534), Some(65534)).unwrap();
            assert!(matches!(
                private_dir(&volume),
                Err(StateError::ForeignOwner { .. })
            ));
        }
    }
}
