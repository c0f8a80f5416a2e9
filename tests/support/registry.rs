//! A real OCI registry for the distribution tests: Debian's
//! `docker-registry` (the CNCF distribution registry) started as a child
//! process with a config of its own in a temporary directory, on
//! 127.0.0.1 port 0 (the port read from its "listening on" log line), its
//! blobs on the filesystem there, so a test can tamper with one. The
//! package's own service and /etc/docker/registry are not used. Also the
//! `emseepea sign`/`push`/`pull` commands and SSH keys the tests drive.
#![allow(dead_code)]

use super::BIN;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

pub struct Registry {
    child: Child,
    /// host:port
    pub addr: String,
    pub dir: tempfile::TempDir,
}

impl Registry {
    pub fn start() -> Registry {
        let bin = Path::new("/usr/bin/docker-registry");
        assert!(
            bin.is_file(),
            "docker-registry is not installed (Debian package `docker-registry`; .ci/run installs it)"
        );
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\n\
                 log:\n  level: info\n  accesslog:\n    disabled: true\n\
                 storage:\n  filesystem:\n    rootdirectory: {}\n\
                 http:\n  addr: 127.0.0.1:0\n  secret: emseepea-test\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let mut cmd = Command::new(bin);
        // The registry goes with a test process killed without unwinding.
        // SAFETY: prctl is async-signal-safe; nothing else runs before exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let mut child = cmd
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn docker-registry");
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some((_, rest)) = line.split_once("listening on ") {
                    let addr: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
                        .collect();
                    let _ = tx.send(addr);
                }
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                panic!("docker-registry did not start");
            }
        };
        Registry { child, addr, dir }
    }

    /// The file the registry serves blob `digest` (`sha256:...`) from.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An ed25519 key pair made with ssh-keygen: (private key file, public key line).
pub fn ssh_key(dir: &Path, name: &str) -> (PathBuf, String) {
    let key = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .output()
        .expect("ssh-keygen (Debian package openssh-client)");
    assert!(out.status.success(), "{out:?}");
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    (key, public.trim().to_owned())
}

/// Run the emseepea binary with `args`.
pub fn emseepea(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run emseepea")
}

/// Both streams, for assertions and failure messages.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `emseepea ARGS`, which must succeed; its stdout.
pub fn ok(args: &[&str]) -> String {
    let out = emseepea(args);
    assert!(
        out.status.success(),
        "emseepea {args:?} failed:\n{}",
        text(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `emseepea sign FILE --key KEY`.
pub fn sign(component: &Path, key: &Path) {
    ok(&[
        "sign",
        component.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
}

/// `emseepea push FILE REF --plain-http`: the digest it printed.
pub fn push(component: &Path, reference: &str) -> String {
    let out = ok(&[
        "push",
        component.to_str().unwrap(),
        reference,
        "--plain-http",
    ]);
    let digest = out
        .split_whitespace()
        .find(|w| w.starts_with("sha256:"))
        .unwrap_or_else(|| panic!("push printed no digest: {out}"))
        .to_owned();
    assert_eq!(digest.len(), "sha256:".len() + 64, "{out}");
    digest
}

/// A directory holding `NAME.wasm` (a copy of `wasm`) and its manifest.
pub fn source_dir(name: &str, wasm: &Path, manifest: Option<&str>) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(wasm, d.path().join(format!("{name}.wasm"))).unwrap();
    if let Some(m) = manifest {
        std::fs::write(d.path().join(format!("{name}.toml")), m).unwrap();
    }
    d
}
