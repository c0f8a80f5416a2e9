//! Authentication, once per HTTP request and before its body is read: the
//! one function every path (stateless, legacy, batch, DELETE) goes through.
//! A presented token is always verified, even where none is needed, and a
//! bad one is refused everywhere: it never counts as anonymous. A caller is
//! also the runtime's fair-share key ([`CallerKey`]): one per principal, one
//! for every anonymous caller together.

use super::App;
use super::errors::McpError;
use crate::auth::Principal;
use crate::guest_text::GuestText;
use crate::mcp::config::MAX_AUTH_FAILURE_LOG_LINES_PER_SECOND;
use crate::runtime::{CallerKey, InstanceKey};
use crate::telemetry::limited::LineBudget;
use http::HeaderMap;
use std::sync::Arc;

/// Who is asking.
#[derive(Clone, Debug)]
pub enum Caller {
    /// No token presented.
    Anonymous,
    /// A token was presented and verified.
    Verified(Arc<Principal>),
}

impl Caller {
    /// The caller's fair share of guest calls.
    pub fn key(&self) -> CallerKey {
        caller_key(self.principal())
    }

    /// Whose kept instances this caller's calls may reuse: a verified
    /// caller's own (principal and scopes); an anonymous caller, who cannot
    /// be told from another, none.
    pub fn instance_key(&self) -> Option<InstanceKey> {
        self.principal().map(instance_key)
    }

    pub fn principal(&self) -> Option<&Principal> {
        match self {
            Caller::Anonymous => None,
            Caller::Verified(p) => Some(p),
        }
    }
}

/// Failed authentications logged per second (the rest are counted).
static AUTH_FAILURE_LINES: LineBudget = LineBudget::new(MAX_AUTH_FAILURE_LOG_LINES_PER_SECOND);

pub async fn authenticate(
    app: &App,
    headers: &HeaderMap,
    query: Option<&str>,
    peer: Option<std::net::IpAddr>,
) -> Result<Caller, McpError> {
    match app.auth.authenticate(headers, query, peer).await {
        Ok(None) => Ok(Caller::Anonymous),
        Ok(Some(p)) => Ok(Caller::Verified(p)),
        Err(error) => {
            // The reason quotes the client's token (a JOSE header, a kid):
            // escaped and cut like guest text, and a flood is counted, not
            // written out line by line.
            if let Some(suppressed) = AUTH_FAILURE_LINES.admit(std::time::Instant::now()) {
                tracing::info!(
                    reason = error.reason(),
                    detail = ?GuestText::new(&error.to_string()),
                    suppressed,
                    "authentication failed"
                );
            }
            Err(McpError::Unauthorized {
                error,
                scopes: app.pager.source_scopes(),
            })
        }
    }
}

/// The body limit for this caller: the smaller one until a token is
/// verified. Without auth nobody can be verified, and the configured
/// `max_body_bytes` is the trust every caller gets.
pub fn body_limit(app: &App, caller: &Caller) -> usize {
    let http = &app.config.http;
    match caller {
        Caller::Anonymous if app.auth.enabled() => {
            http.max_unauthenticated_body_bytes.min(http.max_body_bytes)
        }
        _ => http.max_body_bytes,
    }
}

/// The key of `principal`'s share. Built from the identity (client id,
/// subject, audience) as a JSON array, so no two identities share a key and
/// none can be spelled to look like the anonymous one.
pub fn caller_key(principal: Option<&Principal>) -> CallerKey {
    match principal {
        None => CallerKey::new("anonymous"),
        Some(p) => {
            // Serialized from borrowed fields (a tuple is a JSON array), not
            // through a `Value` of cloned strings: this runs per request.
            let identity = (&p.client_id, &p.subject, &p.audience);
            CallerKey::new(serde_json::to_string(&identity).expect("strings serialize"))
        }
    }
}

/// The key of `principal`'s kept instances: its identity, as for
/// [`caller_key`], and its scopes (sorted by `Principal::new`): the same
/// subject with other scopes may see other records, so it is another caller.
pub fn instance_key(principal: &Principal) -> InstanceKey {
    let identity = (
        &principal.client_id,
        &principal.subject,
        &principal.audience,
        &principal.scopes,
    );
    InstanceKey::new(serde_json::to_string(&identity).expect("strings serialize"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(client: &str, sub: Option<&str>) -> Principal {
        Principal::new(sub.map(String::from), client.into(), vec![], None)
    }

    #[test]
    fn identities_have_their_own_keys() {
        let alice = caller_key(Some(&p("app", Some("alice"))));
        assert_eq!(alice, caller_key(Some(&p("app", Some("alice")))));
        assert_ne!(alice, caller_key(Some(&p("app", Some("bob")))));
        assert_ne!(alice, caller_key(Some(&p("other", Some("alice")))));
        assert_ne!(caller_key(Some(&p("anonymous", None))), caller_key(None));
        // Kept instances: per identity and scopes.
        let with = |scopes: &[&str]| {
            let mut p = p("app", Some("alice"));
            p.scopes = scopes.iter().map(|s| s.to_string()).collect();
            instance_key(&p)
        };
        assert_eq!(with(&["a:read"]), with(&["a:read"]));
        assert_ne!(with(&["a:read"]), with(&["a:read", "b:read"]));
        assert_ne!(with(&[]), instance_key(&p("app", Some("bob"))));
        assert!(Caller::Anonymous.instance_key().is_none());
        // A separator inside a field cannot forge another identity.
        assert_ne!(
            caller_key(Some(&p("a\",\"b", None))),
            caller_key(Some(&p("a", Some("b"))))
        );
    }
}
