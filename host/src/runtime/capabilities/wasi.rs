//! WASI preview 2 as guests' language runtimes need it, with no ambient
//! authority: stdin closed, no environment, no arguments, sockets denied,
//! no preopened directories except the ones granted read-only
//! (`[directories.LABEL]` in the server config, `grants.directories` in a
//! manifest). stdout/stderr are captured (bounded) and logged with the
//! source name.
//!
//! A component that imports no `wasi:` interface (the Rust guests built for
//! the inventory world alone) cannot call a WASI host function, so its calls
//! get no context at all: building one (two capture pipes, the random and
//! clock state, the preopens) was the larger part of each call's store setup.
//! Which case a source is in is decided once, at load, from the component's
//! imports ([`WasiUse::of`]).

use super::{CallInfo, CallView, Capability};
use crate::runtime::host_state::HostState;
use std::collections::BTreeMap;
use std::path::PathBuf;
use wasmtime::component::{Component, Linker};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};

#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DirectoryConfig {
    /// The directory, preopened read-only at `/LABEL` for sources granted it.
    pub path: PathBuf,
}

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
    /// Whether the source's component can reach a WASI context at all; set
    /// by the loader once the component is compiled.
    pub uses: WasiUse,
}

/// Whether a component imports any WASI interface.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WasiUse {
    /// It does (or it is not known yet): every call gets a full context.
    #[default]
    Imported,
    /// It imports nothing from `wasi:`: no host function of WASI (nor of
    /// wasi-http, whose streams are WASI's) can be called, so calls get none.
    NotImported,
}

impl WasiUse {
    /// Read from the component's import names (`wasi:io/streams@0.2.x`, ...).
    pub fn of(component: &Component) -> Self {
        let engine = component.engine();
        let imports_wasi = component
            .component_type()
            .imports(engine)
            .any(|(name, _)| name.starts_with("wasi:"));
        if imports_wasi {
            Self::Imported
        } else {
            Self::NotImported
        }
    }
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

/// One call's WASI state.
pub enum WasiCall {
    /// The component imports WASI: its context and captured output.
    Live(Box<LiveWasi>),
    /// The component imports no WASI: nothing was built.
    Absent,
}

/// A WASI context and the pipes its stdout and stderr are captured in.
pub struct LiveWasi {
    ctx: WasiCtx,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
}

/// A call's captured stdout and stderr (shared handles: read them after the
/// call).
pub struct CapturedOutput {
    pub stdout: MemoryOutputPipe,
    pub stderr: MemoryOutputPipe,
}

impl WasiCall {
    /// The call's captured output; none when no context was built.
    pub fn output(&self) -> Option<CapturedOutput> {
        match self {
            Self::Live(live) => Some(CapturedOutput {
                stdout: live.stdout.clone(),
                stderr: live.stderr.clone(),
            }),
            Self::Absent => None,
        }
    }

    fn ctx(&mut self) -> &mut WasiCtx {
        if let Self::Absent = self {
            // Unreachable through the linker (a component without WASI
            // imports has no WASI function to call); should it ever happen,
            // fail closed: a context with no directories and nothing captured.
            *self = Self::Live(Box::new(LiveWasi::bare()));
        }
        match self {
            Self::Live(live) => &mut live.ctx,
            Self::Absent => unreachable!("replaced above"),
        }
    }
}

impl LiveWasi {
    /// A context with no authority: stdout/stderr captured, stdin closed,
    /// no sockets, no name lookup, no directories.
    fn builder() -> (
        wasmtime_wasi::WasiCtxBuilder,
        MemoryOutputPipe,
        MemoryOutputPipe,
    ) {
        let stdout = MemoryOutputPipe::new(CAPTURED_OUTPUT_BYTES);
        let stderr = MemoryOutputPipe::new(CAPTURED_OUTPUT_BYTES);
        let mut builder = WasiCtx::builder();
        builder
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false);
        builder.allow_ip_name_lookup(false);
        (builder, stdout, stderr)
    }

    fn bare() -> Self {
        let (mut builder, stdout, stderr) = Self::builder();
        Self {
            ctx: builder.build(),
            stdout,
            stderr,
        }
    }
}

impl WasiGrants {
    /// A call's WASI state: a fresh context when the component imports WASI.
    pub fn build(&self) -> Result<WasiCall, PreopenError> {
        if self.uses == WasiUse::NotImported {
            return Ok(WasiCall::Absent);
        }
        let (mut builder, stdout, stderr) = LiveWasi::builder();
        for (label, path) in &self.directories {
            builder
                .preopened_dir(path, format!("/{label}"), FsPerms::ReadOnly)
                .map_err(|e| PreopenError {
                    label: label.clone(),
                    message: format!("{e:#}"),
                })?;
        }
        Ok(WasiCall::Live(Box::new(LiveWasi {
            ctx: builder.build(),
            stdout,
            stderr,
        })))
    }
}

impl Capability for Wasi {
    const NAME: &'static str = "wasi";
    type Grant = WasiGrants;
    type Call = WasiCall;
    type DefinitionError = std::convert::Infallible;
    type GrantError = DirectoryGrantError;
    type CallError = PreopenError;
    /// `[directories]`: label → the directory's config.
    type Section<'c> = &'c BTreeMap<String, DirectoryConfig>;
    /// `grants.directories`: the labels a source asks for.
    type Asked<'m> = &'m [String];

    fn configure(directories: Self::Section<'_>) -> Result<Self, Self::DefinitionError> {
        Ok(Self {
            directories: directories
                .iter()
                .map(|(label, dir)| (label.clone(), dir.path.clone()))
                .collect(),
        })
    }

    fn grant(&self, labels: &[String]) -> Result<WasiGrants, DirectoryGrantError> {
        let mut directories = Vec::new();
        for label in labels {
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
        Ok(WasiGrants {
            directories,
            uses: WasiUse::default(),
        })
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
            ctx: self
                .capabilities
                .as_mut()
                .expect(crate::runtime::host_state::PARKED)
                .wasi
                .ctx(),
            table: &mut self.table,
        }
    }
}

#[cfg(test)]
pub(crate) mod checklist;

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

    fn guest_component(relative: &str) -> Component {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        let engine = wasmtime::Engine::new(&config).unwrap();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/guests")
            .join(relative);
        Component::from_file(&engine, &path)
            .unwrap_or_else(|e| panic!("{}: {e:#} (run `cargo xtask guests`)", path.display()))
    }

    #[test]
    fn a_component_without_wasi_imports_gets_no_context_per_call() {
        // The catalog guest imports only emseepea interfaces; the hostile one
        // imports WASI (and wasi-http).
        let catalog = WasiUse::of(&guest_component("catalog.wasm"));
        let hostile = WasiUse::of(&guest_component("hostile/hostile.wasm"));
        assert_eq!(catalog, WasiUse::NotImported);
        assert_eq!(hostile, WasiUse::Imported);
        let none = WasiGrants {
            uses: catalog,
            ..Default::default()
        };
        let mut call = none.build().unwrap();
        assert!(matches!(call, WasiCall::Absent));
        assert!(call.output().is_none());
        // Reached anyway: a context with no authority, made on the spot.
        call.ctx();
        assert!(matches!(call, WasiCall::Live(_)));
        let some = WasiGrants {
            uses: hostile,
            ..Default::default()
        };
        assert!(some.build().unwrap().output().is_some());
    }

    #[test]
    fn a_grant_of_an_undefined_or_missing_directory_is_refused() {
        let config = crate::runtime::capabilities::harness::server_config(
            "[directories.gone]\npath = \"/nonexistent/emseepea\"\n",
        );
        let wasi = Wasi::configure(&config.directories).unwrap();
        assert!(matches!(
            wasi.grant(&["other".into()]),
            Err(DirectoryGrantError::Undefined(l)) if l == "other"
        ));
        assert!(matches!(
            wasi.grant(&["gone".into()]),
            Err(DirectoryGrantError::NotADirectory { .. })
        ));
    }
}
