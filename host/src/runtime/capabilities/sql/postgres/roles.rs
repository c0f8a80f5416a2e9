//! What the database role can do is what every guest granted it can do: a
//! `read_only` grant stops writes to tables, not `COPY ... TO PROGRAM` of a
//! superuser, nor `pg_terminate_backend` of a member of the role that runs
//! other clients' sessions. So the host refuses:
//!
//! - a role that is (or is a member of a role that is) `rolsuper`,
//!   `rolbypassrls`, `rolcreaterole`, `rolcreatedb` or `rolreplication`, or
//!   a member of one of [`PRIVILEGED_ROLES`]: checked at startup (and by
//!   `emseepea check`) and on every new connection, unless the section sets
//!   `allow_privileged_role = true` (logged at WARN at startup);
//! - two sources whose grants reach the same login role on the same server
//!   ([`RoleKey`]): a role's members may signal its backends and read their
//!   SQL in `pg_stat_activity`, so one source could stop or watch the other.
//!   Both sections must set `allow_shared_role = true` to allow it.

use crate::guest_text::GuestText;
use std::fmt;

/// Predefined roles whose members reach past their own sessions and data:
/// run programs or read/write files on the database host, signal other
/// roles' backends, read every session's SQL.
pub const PRIVILEGED_ROLES: [&str; 5] = [
    "pg_execute_server_program",
    "pg_read_server_files",
    "pg_write_server_files",
    "pg_signal_backend",
    "pg_read_all_stats",
];

/// Every role the login role is a member of (itself included) that has an
/// attribute or a membership the host refuses; one row per role.
const QUERY: &str = "SELECT r.rolname::text, r.rolsuper, r.rolbypassrls, r.rolcreaterole, \
     r.rolcreatedb, r.rolreplication, session_user::text \
     FROM pg_catalog.pg_roles r \
     WHERE pg_catalog.pg_has_role(session_user, r.oid, 'MEMBER') \
     AND (r.rolsuper OR r.rolbypassrls OR r.rolcreaterole OR r.rolcreatedb \
     OR r.rolreplication OR r.rolname = ANY($1))";

/// The role a connection logged in as may do more than a guest should.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the role {} may do more than a guest should: {}; connect as a role without these \
     (docs: operating/postgres-roles), or set `allow_privileged_role = true`",
    GuestText::new(.role),
    .reasons.join(", ")
)]
pub struct PrivilegedRole {
    pub role: String,
    pub reasons: Vec<String>,
}

/// Why the role check could not say yes.
#[derive(Debug, thiserror::Error)]
pub enum RoleCheckError {
    #[error(transparent)]
    Privileged(#[from] PrivilegedRole),
    #[error("could not read the role's attributes: {}", GuestText::new(&.0.to_string()))]
    Query(#[from] tokio_postgres::Error),
}

/// Check the role `client` logged in as.
pub async fn check(client: &tokio_postgres::Client) -> Result<(), RoleCheckError> {
    let names: Vec<&str> = PRIVILEGED_ROLES.to_vec();
    let rows = client.query(QUERY, &[&names]).await?;
    let mut role = String::new();
    let mut reasons = Vec::new();
    for row in rows {
        let name: String = row.get(0);
        role = row.get(6);
        let attributes: Vec<&str> = [
            (1, "rolsuper"),
            (2, "rolbypassrls"),
            (3, "rolcreaterole"),
            (4, "rolcreatedb"),
            (5, "rolreplication"),
        ]
        .into_iter()
        .filter(|(i, _)| row.get::<_, bool>(*i))
        .map(|(_, a)| a)
        .collect();
        let what = if attributes.is_empty() {
            "membership".to_owned()
        } else {
            attributes.join(" ")
        };
        if name == role {
            reasons.push(what);
        } else if PRIVILEGED_ROLES.contains(&name.as_str()) && attributes.is_empty() {
            reasons.push(format!("member of {name}"));
        } else {
            reasons.push(format!("member of {} ({what})", GuestText::new(&name)));
        }
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        reasons.sort();
        Err(PrivilegedRole { role, reasons }.into())
    }
}

/// A login role on a server, as the config names it: the same user at the
/// same hosts and ports is the same role (whatever the database).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RoleKey {
    user: String,
    hosts: Vec<String>,
    ports: Vec<u16>,
}

impl RoleKey {
    pub fn of(pg: &tokio_postgres::Config) -> Self {
        use tokio_postgres::config::Host;
        let mut hosts: Vec<String> = pg
            .get_hosts()
            .iter()
            .map(|h| match h {
                Host::Tcp(name) => name.to_ascii_lowercase(),
                #[cfg(unix)]
                Host::Unix(path) => path.display().to_string(),
            })
            .collect();
        hosts.sort();
        let mut ports = pg.get_ports().to_vec();
        if ports.is_empty() {
            ports.push(5432);
        }
        ports.sort();
        ports.dedup();
        Self {
            user: pg.get_user().unwrap_or_default().to_owned(),
            hosts,
            ports,
        }
    }
}

impl fmt::Display for RoleKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ports: Vec<String> = self.ports.iter().map(u16::to_string).collect();
        write!(
            f,
            "{:?} at {}:{}",
            self.user,
            self.hosts.join(","),
            ports.join(",")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(url: &str) -> RoleKey {
        RoleKey::of(&url.parse().unwrap())
    }

    #[test]
    fn the_same_user_on_the_same_server_is_one_role_whatever_the_database() {
        assert_eq!(
            key("postgres://app@db.internal:5432/a"),
            key("postgres://app:other@DB.internal/b")
        );
        assert_ne!(key("postgres://app@db/a"), key("postgres://app2@db/a"));
        assert_ne!(key("postgres://app@db:5433/a"), key("postgres://app@db/a"));
        assert_ne!(key("postgres://app@db1/a"), key("postgres://app@db2/a"));
    }
}
