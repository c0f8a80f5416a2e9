//! Property tests of the Authorization header (`prop_*`, see crate::fuzz).

use super::*;
use crate::fuzz::time_is_up;
use proptest::prelude::*;
use std::sync::LazyLock;

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
});

/// A dev-mode resource server (the state directory lives as long as the test).
static AUTH: LazyLock<(tempfile::TempDir, Auth)> = LazyLock::new(|| {
    let dir = tempfile::tempdir().unwrap();
    let config: AuthConfig = toml::from_str("mode = \"dev\"\n").unwrap();
    let auth = RUNTIME
        .block_on(Auth::new(
            &config,
            dir.path(),
            "http://127.0.0.1:1/mcp".into(),
            vec![],
        ))
        .unwrap();
    (dir, auth)
});

proptest! {
    /// Any Authorization header value is refused with a typed error:
    /// malformed, too large, or an invalid token. Never a panic, never
    /// "no token".
    #[test]
    fn prop_any_authorization_header_is_refused(
        value in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..200),
            "(?i:bearer)[ \t]{0,2}[!-~ \t\u{80}-\u{ff}]{0,200}".prop_map(String::into_bytes),
            (0usize..9000).prop_map(|n| format!("Bearer {}", "a".repeat(n)).into_bytes()),
        ],
        query in proptest::option::of("[a-z_=&A-Z]{0,30}"),
    ) {
        if time_is_up() { return Ok(()); }
        // Only what HTTP can carry reaches the server.
        let Ok(value) = http::HeaderValue::from_bytes(&value) else { return Ok(()) };
        let mut headers = HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, value);
        let auth = &AUTH.1;
        let r = RUNTIME.block_on(auth.authenticate(&headers, query.as_deref(), None));
        match r {
            Err(AuthError::QueryToken) => prop_assert!(query.as_deref().is_some_and(has_query_token)),
            Err(AuthError::Malformed | AuthError::TooLarge | AuthError::Invalid(_)) => {
                prop_assert!(!query.as_deref().is_some_and(has_query_token));
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }
}
