//! `[databases.LABEL]` with `engine = "postgres"`: where the server is, how
//! to reach it (TLS), and how many connections each source may hold.

use crate::secret::{Forms, Secret, SecretError};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// PostgreSQL databases (`[databases.LABEL] engine = "postgres"`): pooled
/// connections per source and database unless `pool_size` says otherwise.
pub const DEFAULT_PG_POOL_SIZE: usize = 4;
/// Longest a new PostgreSQL connection may take (TCP, TLS, authentication);
/// a call's remaining deadline shortens it. A database that is down answers
/// within this, so it holds a guest slot no longer.
pub const PG_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest a call waits for a free pooled connection of its source (also
/// capped by the call's remaining deadline).
pub const PG_POOL_WAIT_MAX: Duration = Duration::from_secs(2);
/// A connection given back is reset (`DISCARD ALL`) within this, else closed.
pub const PG_RESET_TIMEOUT: Duration = Duration::from_secs(2);
/// A server-side cancel request (of a statement whose call was dropped,
/// cancelled or out of time) is given up after this.
pub const PG_CANCEL_TIMEOUT: Duration = Duration::from_secs(2);

/// The PostgreSQL keys of a `[databases.LABEL]` section (`engine`,
/// `read_only` and `max_result_bytes` are the capability's own: `sql/config.rs`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// `postgres://user:password@host:port/dbname?...` (libpq's URL form).
    /// Either this or the separate keys below. A secret: also
    /// `url_file`/`url_env` (`config/secret.rs`), never logged.
    pub url: Option<Secret>,
    /// A file holding the URL (one trailing newline is dropped).
    pub url_file: Option<PathBuf>,
    /// An environment variable holding the URL.
    pub url_env: Option<String>,
    /// The server's host name or address (without `url`).
    pub host: Option<String>,
    /// Its port (default 5432).
    pub port: Option<u16>,
    /// The login role.
    pub user: Option<String>,
    /// A secret: also `password_file`/`password_env`.
    pub password: Option<Secret>,
    /// A file holding the password (one trailing newline is dropped).
    pub password_file: Option<PathBuf>,
    /// An environment variable holding the password.
    pub password_env: Option<String>,
    /// The database name.
    pub dbname: Option<String>,
    /// `"require"` (the default): TLS with certificate and name checks;
    /// `"disable"`: plain TCP (a database on the same host or network).
    #[serde(default)]
    pub tls: TlsMode,
    /// PEM file of the CA certificates that may sign the server's
    /// certificate (instead of the public web roots).
    pub ca_file: Option<PathBuf>,
    /// Connections each source may hold to this database.
    #[serde(default = "default_pool_size")]
    pub pool_size: usize,
    /// Serve a role the host would refuse (superuser, `CREATEROLE`,
    /// member of `pg_execute_server_program`, ...: `roles.rs`). Every guest
    /// granted this database can then do what that role can.
    #[serde(default)]
    pub allow_privileged_role: bool,
    /// Let this section's login role be reached by more than one source
    /// (each must set it): they can then signal and watch each other's
    /// sessions.
    #[serde(default)]
    pub allow_shared_role: bool,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    Disable,
    #[default]
    Require,
}

fn default_pool_size() -> usize {
    DEFAULT_PG_POOL_SIZE
}

/// A PostgreSQL section the server refuses at startup.
#[derive(Debug, thiserror::Error)]
pub enum PostgresConfigError {
    #[error("give either `url` or `host`/`port`/`user`/`password`/`dbname`, not both")]
    UrlAndParams,
    #[error("needs `url` or at least `host`")]
    NoServer,
    // The URL can hold a password: the parser's message is not repeated.
    #[error("`url` is not a valid PostgreSQL connection URL")]
    BadUrl,
    #[error("`pool_size` must be at least 1")]
    EmptyPool,
    #[error("`ca_file` {path}: {source}")]
    CaFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`ca_file` {0} holds no usable certificate")]
    NoCertificate(PathBuf),
    #[error("TLS setup: {0}")]
    Tls(#[from] rustls::Error),
}

/// How connections (and cancel requests) reach the server.
#[derive(Clone)]
pub enum Tls {
    Disable,
    Require(tokio_postgres_rustls::MakeRustlsConnect),
}

/// A checked section: the driver's connection config and the TLS to use.
pub struct Resolved {
    pub pg: tokio_postgres::Config,
    pub tls: Tls,
}

impl PostgresConfig {
    /// Read `url` and `password` from whichever of their forms was given
    /// (`key` is the section's, `databases.LABEL`; files relative to `base`).
    pub fn load_secrets(&mut self, key: &str, base: &Path) -> Result<(), SecretError> {
        self.url = Forms {
            key: &format!("{key}.url"),
            inline: self.url.take(),
            file: self.url_file.take(),
            env: self.url_env.take(),
        }
        .load(base, false)?;
        self.password = Forms {
            key: &format!("{key}.password"),
            inline: self.password.take(),
            file: self.password_file.take(),
            env: self.password_env.take(),
        }
        .load(base, false)?;
        Ok(())
    }

    /// Check the section and build the driver's config (`ca_file` is
    /// already relative to the server config's folder: `Config::load`).
    pub fn resolve(&self) -> Result<Resolved, PostgresConfigError> {
        if self.pool_size == 0 {
            return Err(PostgresConfigError::EmptyPool);
        }
        let params = self.host.is_some()
            || self.port.is_some()
            || self.user.is_some()
            || self.password.is_some()
            || self.dbname.is_some();
        let mut pg = match (&self.url, params) {
            (Some(_), true) => return Err(PostgresConfigError::UrlAndParams),
            (Some(url), false) => url
                .expose()
                .parse::<tokio_postgres::Config>()
                .map_err(|_| PostgresConfigError::BadUrl)?,
            (None, _) => {
                let host = self.host.as_ref().ok_or(PostgresConfigError::NoServer)?;
                let mut pg = tokio_postgres::Config::new();
                pg.host(host);
                if let Some(port) = self.port {
                    pg.port(port);
                }
                if let Some(user) = &self.user {
                    pg.user(user);
                }
                if let Some(password) = &self.password {
                    pg.password(password.expose());
                }
                if let Some(dbname) = &self.dbname {
                    pg.dbname(dbname);
                }
                pg
            }
        };
        if pg.get_hosts().is_empty() {
            return Err(PostgresConfigError::NoServer);
        }
        pg.connect_timeout(PG_CONNECT_TIMEOUT);
        pg.application_name("emseepea");
        let tls = match self.tls {
            TlsMode::Disable => {
                pg.ssl_mode(tokio_postgres::config::SslMode::Disable);
                Tls::Disable
            }
            TlsMode::Require => {
                pg.ssl_mode(tokio_postgres::config::SslMode::Require);
                Tls::Require(tokio_postgres_rustls::MakeRustlsConnect::new(
                    client_config(self.ca_file.as_deref())?,
                ))
            }
        };
        Ok(Resolved { pg, tls })
    }
}

/// rustls with ring; the roots are the CA file's certificates or, without
/// one, the public web roots.
fn client_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, PostgresConfigError> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        None => roots.roots = webpki_roots::TLS_SERVER_ROOTS.into(),
        Some(path) => {
            use rustls::pki_types::{CertificateDer, pem::PemObject};
            let pem = std::fs::read(path).map_err(|source| PostgresConfigError::CaFile {
                path: path.to_owned(),
                source,
            })?;
            for cert in CertificateDer::pem_slice_iter(&pem).flatten() {
                roots
                    .add(cert)
                    .map_err(|_| PostgresConfigError::NoCertificate(path.to_owned()))?;
            }
            if roots.is_empty() {
                return Err(PostgresConfigError::NoCertificate(path.to_owned()));
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> PostgresConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_url_or_parameters_but_not_both() {
        let url = parse("url = \"postgres://app:secret@db.internal:5433/inventory\"");
        assert_eq!(url.tls, TlsMode::Require);
        let r = url.resolve().unwrap();
        assert_eq!(r.pg.get_dbname(), Some("inventory"));
        assert_eq!(r.pg.get_ports(), [5433]);
        assert!(matches!(r.tls, Tls::Require(_)));

        let params = parse(
            "host = \"127.0.0.1\"\nport = 5432\nuser = \"app\"\ntls = \"disable\"\npool_size = 2",
        );
        let r = params.resolve().unwrap();
        assert_eq!(r.pg.get_user(), Some("app"));
        assert!(matches!(r.tls, Tls::Disable));

        let both = parse("url = \"postgres://a@h/d\"\nhost = \"h\"");
        assert!(matches!(
            both.resolve(),
            Err(PostgresConfigError::UrlAndParams)
        ));
        assert!(matches!(
            parse("user = \"a\"").resolve(),
            Err(PostgresConfigError::NoServer)
        ));
        assert!(matches!(
            parse("host = \"h\"\npool_size = 0").resolve(),
            Err(PostgresConfigError::EmptyPool)
        ));
        assert!(toml::from_str::<PostgresConfig>("host = \"h\"\ntls = \"prefer\"").is_err());
    }

    #[test]
    fn a_bad_url_is_refused_without_repeating_it() {
        let bad = parse("url = \"postgres://app:hunter2@h:notaport/d\"");
        let e = bad.resolve().err().unwrap();
        assert!(matches!(e, PostgresConfigError::BadUrl));
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), "not a certificate").unwrap();
        let ca = dir.path().join("ca.pem");
        let c = parse(&format!(
            "host = \"h\"\nca_file = {:?}",
            ca.display().to_string()
        ));
        assert!(matches!(
            c.resolve(),
            Err(PostgresConfigError::NoCertificate(_))
        ));
        let missing = parse("host = \"h\"\nca_file = \"/nonexistent/missing.pem\"");
        assert!(matches!(
            missing.resolve(),
            Err(PostgresConfigError::CaFile { .. })
        ));
    }
}
