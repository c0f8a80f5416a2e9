//! WASI preview 2 as guests' language runtimes need it, with no ambient
//! authority: stdin closed, no environment, no arguments, sockets denied,
//! no preopened directories except the ones granted read-only
//! (`[directories.LABEL]` in the server config, `grants.directories` in a
//! manifest). stdout/stderr are captured (bounded) and logged with the
//! source name.

use super::{CallInfo, CallView, Capability};
use crate::config::{Config, SourceManifest};
use crate::runtime::host_state::HostState;
use std::collections::BTreeMap;
use std::path::PathBuf;
use wasmtime::component::Linker;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};

/// Bytes of stdout and of stderr kept per call for the log.
pub const CAPTURED_OUTPUT_BYTES: usize = 16 * 1024;

/// The directories the server config defines (label → path).
pub struct Wasi {
    directories: BTreeMap<String, PathBuf>,
}

/// Directories granted to a source, resolved to paths.
#[derive(Clone, Debug, Default)]
pub struct WasiGrants {
    /// (label, host path): preopened read-only at `/LABEL`.
    pub directories: Vec<(String, PathBuf)>,
}

#[derive(Debug, thiserror::Error)]
pub enum DirectoryGrantError {
    #[error("grants directory {0:?}, which the server config does not define")]
    Undefined(String),
    #[error("granted directory {label:?} ({}) is not a directory", path.display())]
    NotADirectory { label: String, path: PathBuf },
}

/// A granted directory could not be preopened for a call.
#[derive(Debug, thiserror::Error)]
#[error("preopening directory {label:?}: {message}")]
pub struct PreopenError {
    label: String,
    message: String,
}

/// One call's WASI context and its captured output.
pub struct WasiCall {
    ctx: WasiCtx,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
}

impl WasiCall {
    /// The call's captured stdout and stderr (shared handles: read them
    /// after the call).
    pub fn output(&self) -> (MemoryOutputPipe, MemoryOutputPipe) {
        (self.stdout.clone(), self.stderr.clone())
    }
}

impl WasiGrants {
    /// A fresh WASI context for one call.
    pub fn build(&self) -> Result<WasiCall, PreopenError> {
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
            builder
                .preopened_dir(path, format!("/{label}"), FsPerms::ReadOnly)
                .map_err(|e| PreopenError {
                    label: label.clone(),
                    message: format!("{e:#}"),
                })?;
        }
        Ok(WasiCall {
            ctx: builder.build(),
            stdout,
            stderr,
        })
    }
}

impl Capability for Wasi {
    const NAME: &'static str = "wasi";
    type Grant = WasiGrants;
    type Call = WasiCall;
    type DefinitionError = std::convert::Infallible;
    type GrantError = DirectoryGrantError;
    type CallError = PreopenError;

    fn configure(config: &Config) -> Result<Self, Self::DefinitionError> {
        Ok(Self {
            directories: config
                .directories
                .iter()
                .map(|(label, dir)| (label.clone(), dir.path.clone()))
                .collect(),
        })
    }

    fn grant(&self, manifest: &SourceManifest) -> Result<WasiGrants, DirectoryGrantError> {
        let mut directories = Vec::new();
        for label in &manifest.grants.directories {
            let path = self
                .directories
                .get(label)
                .ok_or_else(|| DirectoryGrantError::Undefined(label.clone()))?;
            if !path.is_dir() {
                return Err(DirectoryGrantError::NotADirectory {
                    label: label.clone(),
                    path: path.clone(),
                });
            }
            directories.push((label.clone(), path.clone()));
        }
        Ok(WasiGrants { directories })
    }

    fn call(grant: &WasiGrants, _call: &CallInfo) -> Result<WasiCall, PreopenError> {
        grant.build()
    }

    /// WASI's own linker functions reach the context through [`WasiView`].
    fn add_to_linker(
        linker: &mut Linker<HostState>,
        _view: fn(&mut HostState) -> CallView<'_, WasiCall>,
    ) -> wasmtime::Result<()> {
        wasmtime_wasi::p2::add_to_linker_async(linker)
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.capabilities.wasi.ctx,
            table: &mut self.table,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::capabilities::harness::{Harness, manifest};

    #[tokio::test]
    async fn a_guest_gets_no_ambient_authority() {
        let harness = Harness::new("[directories]\n");
        let report = harness
            .read::<Wasi>(&manifest("denials", ""), "hostile://x/1")
            .await
            .unwrap();
        for line in [
            "sql=Error::NotGranted",
            "env=0",
            "stdin=eof",
            "file /etc/passwd=denied",
            "file /=denied",
            "tcp=denied",
        ] {
            assert!(report.contains(line), "{line} in {report}");
        }
    }

    #[tokio::test]
    async fn a_granted_directory_is_readable_and_read_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("hello.txt"), "hello").unwrap();
        let harness = Harness::new(&format!(
            "[directories.assets]\npath = {:?}\n",
            dir.path().display().to_string()
        ));
        let report = harness
            .read::<Wasi>(
                &manifest(
                    "readfile",
                    "path = \"/assets/hello.txt\"\n[grants]\ndirectories = [\"assets\"]\n",
                ),
                "hostile://x/1",
            )
            .await
            .unwrap();
        assert!(report.contains("read=Ok(\"hello\")"), "{report}");
        assert!(report.contains("write=Err("), "{report}");
        assert!(!dir.path().join("hello.txt.new").exists());
        // Not granted: nothing there.
        let report = harness
            .read::<Wasi>(
                &manifest("readfile", "path = \"/assets/hello.txt\"\n"),
                "hostile://x/1",
            )
            .await
            .unwrap();
        assert!(report.contains("read=Err("), "{report}");
    }

    #[test]
    fn a_grant_of_an_undefined_or_missing_directory_is_refused() {
        let config = crate::runtime::capabilities::harness::server_config(
            "[directories.gone]\npath = \"/nonexistent/emseepea\"\n",
        );
        let wasi = Wasi::configure(&config).unwrap();
        let mut m = SourceManifest::default();
        m.grants.directories = vec!["other".into()];
        assert!(matches!(
            wasi.grant(&m),
            Err(DirectoryGrantError::Undefined(l)) if l == "other"
        ));
        m.grants.directories = vec!["gone".into()];
        assert!(matches!(
            wasi.grant(&m),
            Err(DirectoryGrantError::NotADirectory { .. })
        ));
    }
}
