//! Property tests of building a principal from claims (`prop_*`, see crate::fuzz).

use super::*;
use crate::fuzz::{object_with, time_is_up};
use proptest::prelude::*;

const CLAIMS: &[&str] = &["sub", "uid", "client_id", "azp", "cid", "scope", "scp"];

proptest! {
    /// Claims of any shape give a principal that keeps the rules, or a
    /// refusal: never a panic, never an unchecked subject or client id.
    #[test]
    fn prop_claims_of_any_shape(claims in object_with(CLAIMS, 0.6), subject_claim in prop_oneof![Just("sub"), Just("uid")]) {
        if time_is_up() { return Ok(()); }
        let scope_claims = vec!["scope".to_string(), "scp".to_string()];
        let result = principal_from_claims(&claims, subject_claim, &scope_claims, "https://r.example/mcp");
        let subject_ok = match claims.get(subject_claim) {
            None | Some(Value::Null) => true,
            Some(Value::String(s)) => valid_subject(s),
            Some(_) => false,
        };
        match result {
            Ok(p) => {
                prop_assert!(subject_ok);
                prop_assert_eq!(p.subject.as_deref(), claims.get(subject_claim).and_then(Value::as_str));
                prop_assert!(!p.client_id.is_empty() && p.client_id.len() <= 1024);
                prop_assert!(["client_id", "azp", "cid"].iter().any(|k| claims.get(*k).and_then(Value::as_str) == Some(p.client_id.as_str())));
                prop_assert!(p.scopes.windows(2).all(|w| w[0] < w[1]), "sorted, unique");
                prop_assert_eq!(p.audience.as_deref(), Some("https://r.example/mcp"));
            }
            Err(VerifyError::Invalid(_)) => {}
            Err(VerifyError::Unavailable(e)) => prop_assert!(false, "claims checks never say unavailable: {}", e),
        }
        if !subject_ok {
            prop_assert!(principal_from_claims(&claims, subject_claim, &scope_claims, "r").is_err());
        }
    }
}
