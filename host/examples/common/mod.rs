//! What the benchmark examples (loadgen, fairbench, soak, proxybench,
//! callbench) share:
//! the repository root, env knobs, the server binary, a running server
//! (killed on drop) with its dev tokens, and one keep-alive HTTP/1.1
//! connection. Each example includes it with `mod common;`.

// Each example uses a part of this module.
#![allow(dead_code)]

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use tokio::net::TcpStream;

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// The env variable `name` parsed, or `default` when unset or unparsable.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The release server, or `EMSEEPEA_BIN` (e.g. a debug build for a smoke run).
pub fn release_bin() -> PathBuf {
    let b = std::env::var_os("EMSEEPEA_BIN")
        .map_or_else(|| root().join("target/release/emseepea"), PathBuf::from);
    assert!(
        b.is_file(),
        "build it first: cargo build --release --bin emseepea"
    );
    b
}

/// The server of the cargo profile `profile` (`release` or `debug`).
pub fn profile_bin(profile: &str) -> PathBuf {
    let b = root().join(format!("target/{profile}/emseepea"));
    assert!(b.is_file(), "no server binary at {}", b.display());
    b
}

/// Copy built guests into `sources`: (stem, guest under target/guests
/// without `.wasm`, manifest; an empty manifest writes none).
pub fn write_sources(sources: &Path, list: &[(&str, &str, &str)]) {
    std::fs::create_dir_all(sources).unwrap();
    for (stem, guest, manifest) in list {
        std::fs::copy(
            root().join(format!("target/guests/{guest}.wasm")),
            sources.join(format!("{stem}.wasm")),
        )
        .unwrap();
        if !manifest.is_empty() {
            std::fs::write(sources.join(format!("{stem}.toml")), manifest).unwrap();
        }
    }
}

/// `host:port` of an `http://host:port/mcp` URL.
pub fn authority(url: &str) -> String {
    url.trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned()
}

/// A running `emseepea serve`, killed on drop.
pub struct Server {
    pub child: Child,
    /// The MCP endpoint the server printed, `http://127.0.0.1:port/mcp`.
    pub url: String,
    pub config: PathBuf,
    bin: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Serve `config` (inside `dir`, kept until drop) with `bin` on a free
    /// port at log level `log`; waits for the "listening" line.
    pub fn spawn(bin: PathBuf, dir: tempfile::TempDir, config: PathBuf, log: &str) -> Server {
        let mut child = Command::new(&bin)
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .env("EMSEEPEA_LOG", log)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let url = line
            .trim()
            .trim_start_matches("emseepea listening on ")
            .to_owned();
        assert!(url.starts_with("http://"), "server did not start: {line}");
        Server {
            child,
            url,
            config,
            bin,
            _dir: dir,
        }
    }

    /// `host:port` of the server.
    pub fn authority(&self) -> String {
        authority(&self.url)
    }

    /// A dev token for `sub` with `scopes`, for this server's own URL.
    pub fn token(&self, sub: &str, scopes: &str) -> String {
        self.token_for(sub, scopes, &self.url)
    }

    /// A dev token for `sub` with `scopes` and audience `audience` (e.g. a
    /// proxy's URL in front of this server).
    pub fn token_for(&self, sub: &str, scopes: &str, audience: &str) -> String {
        let out = Command::new(&self.bin)
            .args(["token", "--config"])
            .arg(&self.config)
            .args(["--sub", sub, "--scope", scopes, "--audience", audience])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "token: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 keep-alive connection to `authority`, Nagle off.
pub async fn connect(authority: &str) -> http1::SendRequest<Full<Bytes>> {
    let stream = TcpStream::connect(authority).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (sender, conn) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    sender
}
