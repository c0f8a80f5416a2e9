//! A real PostgreSQL for tests: `initdb` in a temporary directory, started
//! on 127.0.0.1 and a free port, stopped and removed on drop.
//!
//! PostgreSQL refuses to run as root: then the server runs as the system
//! user `emseepea-pg` (made with `useradd --system` when missing). The
//! binaries are the newest /usr/lib/postgresql/*/bin (Debian's `postgresql`
//! package; `.ci/run` installs it), or `$EMSEEPEA_PG_BIN`. The cluster has
//! no locale (C collation: text compares bytewise, as on SQLite), trust
//! authentication on 127.0.0.1, one superuser, `emseepea` (for the tests'
//! own `psql`), and the unprivileged role the host connects as,
//! `emseepea_app` (the operator's recipe: docs/src/operating/postgres-roles.md;
//! the host refuses a privileged role).
//!
//! Used by the end-to-end tests (`mod support;`) and by the host's unit
//! tests (`#[path]`), so it needs nothing but std, libc and tempfile.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The unprivileged user the server runs as when the tests run as root.
const PG_USER: &str = "emseepea-pg";
/// The cluster's superuser, and the database every test gets.
pub const ROLE: &str = "emseepea";
pub const DATABASE: &str = "emseepea";
/// The unprivileged role [`Postgres::url`] logs in as.
pub const APP_ROLE: &str = "emseepea_app";

pub struct Postgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    running: bool,
}

impl Postgres {
    /// Start a fresh cluster with the database [`DATABASE`] (panics if
    /// PostgreSQL is missing or does not start).
    pub fn start() -> Postgres {
        let bin = bin_dir();
        let as_root = unsafe { libc::geteuid() } == 0;
        if as_root {
            ensure_user();
        }
        let dir = tempfile::Builder::new()
            .prefix("emseepea-pg-")
            .tempdir()
            .expect("temporary directory");
        if as_root {
            chown(dir.path());
        }
        let mut pg = Postgres {
            bin,
            dir,
            port: 0,
            running: false,
        };
        pg.run_as_owner(
            "initdb",
            &[
                "-D",
                &pg.data().display().to_string(),
                "-U",
                ROLE,
                "--auth=trust",
                "--no-locale",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        // A port that was free a moment ago can be taken: try a few.
        for attempt in 0.. {
            pg.port = free_port();
            if pg.pg_ctl_start() {
                break;
            }
            assert!(attempt < 3, "postgres did not start:\n{}", pg.log());
        }
        pg.running = true;
        pg.psql_in("postgres", &format!("CREATE DATABASE {DATABASE}"));
        pg.add_role(APP_ROLE, DATABASE);
        pg
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://emseepea_app@127.0.0.1:PORT/emseepea`: the unprivileged role.
    pub fn url(&self) -> String {
        self.url_as(APP_ROLE, DATABASE)
    }

    /// `postgres://emseepea@127.0.0.1:PORT/emseepea`: the superuser (which
    /// the host refuses unless `allow_privileged_role = true`).
    pub fn admin_url(&self) -> String {
        self.url_as(ROLE, DATABASE)
    }

    pub fn url_as(&self, role: &str, database: &str) -> String {
        format!("postgres://{role}@127.0.0.1:{}/{database}", self.port)
    }

    /// A login role with no attribute and no predefined role, that may
    /// read and write the tables (and use the sequences) of `database`'s
    /// `public` schema, those there now and those the superuser makes later:
    /// the operator's recipe (docs/src/operating/postgres-roles.md).
    pub fn add_role(&self, role: &str, database: &str) {
        self.psql_in(
            "postgres",
            &format!(
                "CREATE ROLE {role} LOGIN; GRANT CONNECT, TEMPORARY ON DATABASE {database} TO {role}"
            ),
        );
        self.psql_in(
            database,
            &format!(
                "GRANT USAGE ON SCHEMA public TO {role}; \
                 GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}; \
                 GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {role}; \
                 ALTER DEFAULT PRIVILEGES FOR ROLE {ROLE} IN SCHEMA public \
                 GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {role}; \
                 ALTER DEFAULT PRIVILEGES FOR ROLE {ROLE} IN SCHEMA public \
                 GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {role}"
            ),
        );
    }

    /// Run SQL (several statements allowed) in [`DATABASE`]; its output
    /// (unaligned, tuples only). Panics when psql fails.
    pub fn psql(&self, sql: &str) -> String {
        self.psql_in(DATABASE, sql)
    }

    pub fn psql_in(&self, database: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-X",
                "-q",
                "-At",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
            ])
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                ROLE,
                "-d",
                database,
                "-c",
                sql,
            ])
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql failed on {sql:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    }

    /// Stop the server now (a database that goes down); `Drop` then only
    /// removes the directory.
    pub fn stop(&mut self) {
        if self.running {
            self.run_as_owner(
                "pg_ctl",
                &[
                    "-D",
                    &self.data().display().to_string(),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ],
            );
            self.running = false;
        }
    }

    /// The server log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn pg_ctl_start(&self) -> bool {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c shared_buffers=16MB -c max_connections=60",
            self.port,
            self.dir.path().display()
        );
        let out = self
            .command_as_owner("pg_ctl")
            .args(["-D", &self.data().display().to_string()])
            .args(["-l", &self.dir.path().join("log").display().to_string()])
            .args(["-o", &options, "-w", "-t", "30", "start"])
            .output()
            .expect("run pg_ctl");
        out.status.success()
    }

    fn command_as_owner(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        if unsafe { libc::geteuid() } == 0 {
            let mut c = Command::new("runuser");
            c.args(["-u", PG_USER, "--"]).arg(program);
            c
        } else {
            Command::new(program)
        }
    }

    fn run_as_owner(&self, program: &str, args: &[&str]) -> Output {
        let out = self
            .command_as_owner(program)
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap_or_else(|e| panic!("run {program}: {e}"));
        assert!(
            out.status.success(),
            "{program} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if self.running {
            let _ = self
                .command_as_owner("pg_ctl")
                .args([
                    "-D",
                    &self.data().display().to_string(),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ])
                .output();
        }
    }
}

/// The newest installed PostgreSQL's bin directory.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("EMSEEPEA_PG_BIN") {
        return dir.into();
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, bin)| bin)
        .expect("PostgreSQL is not installed (/usr/lib/postgresql/*/bin/initdb): apt-get install postgresql")
}

/// Whether PostgreSQL is installed (for `cargo xtask demo --postgres`'s message).
pub fn installed() -> bool {
    std::env::var_os("EMSEEPEA_PG_BIN").is_some()
        || std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().join("bin/initdb").is_file())
}

fn ensure_user() {
    let known = Command::new("id").arg("-u").arg(PG_USER).output();
    if known.is_ok_and(|o| o.status.success()) {
        return;
    }
    let made = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            PG_USER,
        ])
        .output()
        .expect("run useradd");
    // Two tests may race to make it: either way it exists now.
    let known = Command::new("id").arg("-u").arg(PG_USER).output();
    assert!(
        known.is_ok_and(|o| o.status.success()),
        "useradd {PG_USER} failed: {}",
        String::from_utf8_lossy(&made.stderr)
    );
}

fn chown(path: &Path) {
    let out = Command::new("chown")
        .arg(format!("{PG_USER}:"))
        .arg(path)
        .output()
        .expect("run chown");
    assert!(
        out.status.success(),
        "chown: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

/// Poll `check` until it holds or `limit` passes; whether it held.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
