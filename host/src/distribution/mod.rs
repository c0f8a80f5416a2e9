//! How sources get into `sources_dir` and what startup checks about them:
//! detached signatures over a component and its manifest (`signature`),
//! publishing and fetching them as OCI artifacts (`oci`), the lockfile
//! that pins each to a digest (`lock`), and the atomic file writes they
//! share (`files`). `runtime::loader` uses `signature` only; the rest is
//! the `sign`, `push` and `pull` commands.

pub mod files;
pub mod lock;
pub mod oci;
pub mod signature;

use std::path::{Path, PathBuf};

/// `emseepea pull`'s arguments.
pub struct PullCommand {
    /// One reference to pull; None: every entry of `lock`.
    pub reference: Option<String>,
    pub into: PathBuf,
    pub name: Option<String>,
    pub lock: Option<PathBuf>,
    /// `[sources]` of the `--config` file: trusted keys and the policy.
    pub sources: Option<signature::SourcesConfig>,
    /// More trusted keys (inline or files).
    pub trusted_keys: Vec<String>,
    pub registry: oci::Registry,
}

/// Pull one reference (recording it in the lockfile, if one is named), or
/// every source of the lockfile by its pinned digest.
pub async fn pull_command(cmd: PullCommand) -> anyhow::Result<Vec<oci::Pulled>> {
    let mut sources = cmd.sources.unwrap_or_default();
    let mut extra = signature::SourcesConfig {
        trusted_keys: cmd.trusted_keys,
        require_signatures: false,
    };
    extra.resolve(Path::new("."));
    sources.trusted_keys.extend(extra.trusted_keys);
    let policy = signature::Policy::from_config(&sources)?;
    std::fs::create_dir_all(&cmd.into)?;
    let mut pulled = Vec::new();
    match (cmd.reference, &cmd.lock) {
        (Some(reference), lock_path) => {
            let p = oci::pull(
                &cmd.registry,
                &reference,
                &cmd.into,
                cmd.name.as_deref(),
                &policy,
            )
            .await?;
            if let Some(path) = lock_path {
                let mut lock = lock::Lock::load(path)?;
                lock.sources.insert(p.name.clone(), p.pinned.clone());
                lock.save(path)?;
            }
            pulled.push(p);
        }
        (None, Some(path)) => {
            anyhow::ensure!(
                cmd.name.is_none(),
                "--name goes with a reference; the lockfile names its sources"
            );
            let lock = lock::Lock::load(path)?;
            for (name, pinned) in &lock.sources {
                let p = oci::pull(&cmd.registry, pinned, &cmd.into, Some(name), &policy)
                    .await
                    .map_err(|e| anyhow::anyhow!("{name} ({pinned}): {e}"))?;
                pulled.push(p);
            }
        }
        (None, None) => {
            anyhow::bail!("name a reference to pull, or --lock FILE to pull its sources")
        }
    }
    Ok(pulled)
}
