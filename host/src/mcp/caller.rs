//! Who a request is, as the runtime's fair shares see it: one opaque
//! [`CallerKey`] per principal, one for every anonymous caller together.

use crate::auth::Principal;
use crate::runtime::CallerKey;

/// The key of `principal`'s share. Built from the identity (client id,
/// subject, audience) as a JSON array, so no two identities share a key and
/// none can be spelled to look like the anonymous one.
pub fn caller_key(principal: Option<&Principal>) -> CallerKey {
    match principal {
        None => CallerKey::new("anonymous"),
        Some(p) => {
            CallerKey::new(serde_json::json!([p.client_id, p.subject, p.audience]).to_string())
        }
    }
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
        // A separator inside a field cannot forge another identity.
        assert_ne!(
            caller_key(Some(&p("a\",\"b", None))),
            caller_key(Some(&p("a", Some("b"))))
        );
    }
}
