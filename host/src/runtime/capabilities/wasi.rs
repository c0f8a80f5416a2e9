//! WASI preview 2 as guests' language runtimes need it, with no ambient
//! authority: stdin closed, no environment, no arguments, sockets denied,
//! no preopened directories except the ones granted read-only.
//! stdout/stderr are captured (bounded) and logged with the source name.

use crate::config::Config;
use std::path::PathBuf;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx};

/// Bytes of stdout and of stderr kept per call for the log.
pub const CAPTURED_OUTPUT_BYTES: usize = 16 * 1024;

/// Directories granted to a source, resolved to paths.
#[derive(Clone, Debug, Default)]
pub struct WasiGrants {
    /// (label, host path): preopened read-only at `/LABEL`.
    pub directories: Vec<(String, PathBuf)>,
}

impl WasiGrants {
    pub fn resolve(server: &Config, labels: &[String]) -> Result<Self, String> {
        let mut directories = Vec::new();
        for label in labels {
            let dir = server.directories.get(label).ok_or_else(|| {
                format!("grants directory {label:?}, which the server config does not define")
            })?;
            if !dir.path.is_dir() {
                return Err(format!(
                    "granted directory {label:?} ({}) is not a directory",
                    dir.path.display()
                ));
            }
            directories.push((label.clone(), dir.path.clone()));
        }
        Ok(Self { directories })
    }

    /// A fresh WASI context for one call, plus its captured stdout and stderr.
    pub fn build(&self) -> wasmtime::Result<(WasiCtx, MemoryOutputPipe, MemoryOutputPipe)> {
        let stdout = MemoryOutputPipe::new(CAPTURED_OUTPUT_BYTES);
        let stderr = MemoryOutputPipe::new(CAPTURED_OUTPUT_BYTES);
        let mut builder = WasiCtx::builder();
        builder
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false);
        builder.allow_ip_name_lookup(false);
        for (label, path) in &self.directories {
            builder.preopened_dir(path, format!("/{label}"), FsPerms::ReadOnly)?;
        }
        Ok((builder.build(), stdout, stderr))
    }
}
