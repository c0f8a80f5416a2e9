//! Writing the project without following links someone else planted.
//!
//! `--dir` may be in a directory others can write (`/tmp/p`): between the
//! emptiness check and the writes they could put a symbolic link where a
//! file or subdirectory is about to go, and a plain `fs::write` would then
//! overwrite the link's target with the user's rights. So the project
//! directory is opened once (`O_NOFOLLOW`), and everything below it is made
//! relative to directory descriptors: subdirectories with `mkdirat` (one
//! that exists already was not made by us) opened `O_NOFOLLOW`, files with
//! `O_CREAT | O_EXCL | O_NOFOLLOW`. A renamed or swapped directory cannot
//! redirect a write either: the descriptor still names the directory made.

use super::NewError;
use rustix::fs::{CWD, Mode, OFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// Files and directories get 0666 / 0777 less the umask, as `fs::write` and
/// `create_dir` would.
const DIR_MODE: u32 = 0o777;
const FILE_MODE: u32 = 0o666;

fn io(path: &Path) -> impl FnOnce(Errno) -> NewError + '_ {
    move |e| NewError::Io {
        path: path.to_owned(),
        source: e.into(),
    }
}

/// Open `dir` (made when missing, with its parents), refusing a symbolic
/// link or a non-empty directory.
pub(super) fn open_project_dir(dir: &Path) -> Result<OwnedFd, NewError> {
    match rustix::fs::mkdir(dir, Mode::from_raw_mode(DIR_MODE)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(Errno::NOENT) => {
            // The parents are the user's own path: made as `mkdir -p` would.
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|source| NewError::Io {
                    path: parent.to_owned(),
                    source,
                })?;
            }
            match rustix::fs::mkdir(dir, Mode::from_raw_mode(DIR_MODE)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(io(dir)(e)),
            }
        }
        Err(e) => return Err(io(dir)(e)),
    }
    let fd = rustix::fs::openat(
        CWD,
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        Errno::LOOP | Errno::NOTDIR => NewError::NotADirectory(dir.to_owned()),
        e => io(dir)(e),
    })?;
    let entries = rustix::fs::Dir::read_from(&fd).map_err(io(dir))?;
    for entry in entries {
        let entry = entry.map_err(io(dir))?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            return Err(NewError::NotEmpty(dir.to_owned()));
        }
    }
    Ok(fd)
}

/// The project directory and the subdirectories made in it so far.
pub(super) struct Tree {
    root: PathBuf,
    /// "" is the project directory; "sdk/rust" one made by this call.
    dirs: HashMap<String, OwnedFd>,
}

impl Tree {
    pub(super) fn new(root: &Path, fd: OwnedFd) -> Tree {
        Tree {
            root: root.to_owned(),
            dirs: HashMap::from([(String::new(), fd)]),
        }
    }

    /// The descriptor of `rel` (a directory of the project, `/`-separated),
    /// made by this call with its parents when not yet.
    fn dir(&mut self, rel: &str) -> Result<&OwnedFd, NewError> {
        if !self.dirs.contains_key(rel) {
            let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
            self.dir(parent)?;
            let path = self.root.join(rel);
            let parent_fd = &self.dirs[parent];
            rustix::fs::mkdirat(parent_fd, name, Mode::from_raw_mode(DIR_MODE)).map_err(
                |e| match e {
                    Errno::EXIST => NewError::Planted(path.clone()),
                    e => io(&path)(e),
                },
            )?;
            let fd = rustix::fs::openat(
                parent_fd,
                name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| match e {
                // Swapped for a link or a file since mkdirat.
                Errno::LOOP | Errno::NOTDIR => NewError::Planted(path.clone()),
                e => io(&path)(e),
            })?;
            self.dirs.insert(rel.to_owned(), fd);
        }
        Ok(&self.dirs[rel])
    }

    /// Create `rel` (a new file; never through a link) with `contents`.
    pub(super) fn create_file(&mut self, rel: &str, contents: &[u8]) -> Result<(), NewError> {
        let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        let path = self.root.join(rel);
        let fd = rustix::fs::openat(
            self.dir(parent)?,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(FILE_MODE),
        )
        .map_err(|e| match e {
            // O_EXCL: anything there already, a link included (dangling or
            // not), is refused without being followed.
            Errno::EXIST | Errno::LOOP => NewError::Planted(path.clone()),
            e => io(&path)(e),
        })?;
        std::fs::File::from(fd)
            .write_all(contents)
            .map_err(|source| NewError::Io { path, source })
    }
}
