//! A stock nginx in front of test servers: the Debian binary started as a
//! child process with a config generated into a temporary prefix directory
//! (`nginx -p DIR -c DIR/nginx.conf -g 'daemon off;'`), listening on a free
//! 127.0.0.1 port, its error log, access log and pid file in that directory.
//! Nothing of the package's own configuration (default site, service) is
//! read or needed.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The access log's format: the upstream that answered, first (the tests
/// find which instance served a request by it), then status and MCP method.
const LOG_FORMAT: &str = "'$upstream_addr $status $http_mcp_method'";

pub fn nginx_binary() -> PathBuf {
    for p in ["/usr/sbin/nginx", "/usr/bin/nginx"] {
        if Path::new(p).is_file() {
            return p.into();
        }
    }
    // Anywhere else on PATH.
    let out = Command::new("sh")
        .args(["-c", "command -v nginx"])
        .output()
        .expect("sh");
    let found = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        !found.is_empty(),
        "nginx is not installed (Debian package `nginx`; .ci/run installs it)"
    );
    found.into()
}

/// A free 127.0.0.1 port (bound, then released for the caller to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The deployment config the test proxy runs: included in the generated
/// http block as is, so the tests run the settings the README tells
/// operators to use. Only the upstream servers and the listen address are
/// the test's.
pub fn deploy_conf() -> PathBuf {
    super::root().join("deploy/nginx/emseepea.conf")
}

pub struct Nginx {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl Nginx {
    /// Start nginx on `port` proxying to `upstreams` (host:port each) with
    /// the deployment config.
    pub fn start(port: u16, upstreams: &[String]) -> Nginx {
        let dir = tempfile::tempdir().unwrap();
        // Worker processes of a root master run as `nobody`: they must be
        // able to enter the prefix directory (its temp paths are created
        // and chowned by the master).
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        let servers: String = upstreams
            .iter()
            .map(|u| format!("    server {u} max_fails=1 fail_timeout=10s;\n"))
            .collect();
        let deploy = std::fs::read_to_string(deploy_conf()).unwrap();
        // The deployment file's upstream block names its example servers;
        // the test replaces them with its own instances.
        let (head, rest) = deploy
            .split_once("# BEGIN servers")
            .expect("deploy/nginx/emseepea.conf marks its servers with # BEGIN servers");
        let (_, tail) = rest
            .split_once("# END servers")
            .expect("deploy/nginx/emseepea.conf marks its servers with # END servers");
        let deploy = format!("{head}# test servers\n{servers}    # END test servers{tail}");
        let deploy = deploy.replace("listen 8080;", &format!("listen 127.0.0.1:{port};"));
        assert!(
            deploy.contains(&format!("listen 127.0.0.1:{port};")),
            "deploy/nginx/emseepea.conf listens on `listen 8080;`"
        );
        let user = if is_root() {
            "user nobody nogroup;\n"
        } else {
            ""
        };
        let conf = format!(
            "{user}worker_processes 1;\n\
             pid {d}/nginx.pid;\n\
             error_log {d}/error.log info;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n\
             client_body_temp_path {d}/client_body;\n\
             proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\n\
             uwsgi_temp_path {d}/uwsgi;\n\
             scgi_temp_path {d}/scgi;\n\
             log_format upstream {LOG_FORMAT};\n\
             access_log {d}/access.log upstream;\n\
             {deploy}\n\
             }}\n",
            d = dir.path().display()
        );
        let conf_path = dir.path().join("nginx.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let mut cmd = Command::new(nginx_binary());
        // A test process that dies without unwinding (killed on a timeout)
        // takes its nginx with it: SIGTERM is nginx's fast shutdown, the
        // master stops its workers.
        // SAFETY: prctl is async-signal-safe; nothing else runs in the child
        // before exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = cmd
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .arg("-c")
            .arg(&conf_path)
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn nginx");
        let mut n = Nginx { child, port, dir };
        n.wait_until_listening();
        n
    }

    fn wait_until_listening(&mut self) {
        let start = Instant::now();
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("nginx exited ({status}):\n{}", self.error_log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "nginx did not listen on {}:\n{}",
                self.port,
                self.error_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The master's pid (its workers are its children).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    /// Access-log lines so far (one per proxied request, written when it ends).
    pub fn access_log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    /// Wait until every request answered so far is in the access log.
    /// nginx writes a request's line after its answer, so a client may be
    /// done before the line is there; a request nginx answers itself (404,
    /// no upstream) is logged after the requests the one worker finished
    /// before it.
    pub fn settle(&self) {
        let markers = |log: &[String]| log.iter().filter(|l| l.starts_with("- 404 ")).count();
        let before = markers(&self.access_log());
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        std::io::Write::write_all(
            &mut stream,
            b"GET /settle HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n",
        )
        .unwrap();
        let mut answer = String::new();
        let _ = std::io::Read::read_to_string(&mut stream, &mut answer);
        assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
        let start = Instant::now();
        while markers(&self.access_log()) == before {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "nginx did not log its own 404"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The upstreams (host:port) that served requests `from..` of the access
    /// log, in order (call `settle` first); a retried request names every upstream it tried
    /// (`A, B`), the last one answered.
    pub fn upstreams_since(&self, from: usize) -> Vec<String> {
        self.access_log()
            .iter()
            .skip(from)
            // Requests nginx answered itself (settle's) name no upstream.
            .filter(|l| !l.starts_with("- "))
            .map(|l| {
                // "ADDR[, ADDR...] STATUS METHOD": the method and status
                // never contain spaces, the upstream list may.
                let addrs = l.rsplitn(3, ' ').nth(2).unwrap_or("");
                addrs.rsplit(", ").next().unwrap_or("").to_owned()
            })
            .collect()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGQUIT: nginx's graceful stop; then make sure it is gone.
        let _ = Command::new("kill")
            .args(["-QUIT", &self.child.id().to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
