//! Property tests of the manifest's `grants.http` origins (`prop_*`, see
//! crate::fuzz): an origin is what the egress check will compare against, so
//! it must mean what `http::Uri` (the parser the check uses) makes of it.

use super::*;
use crate::fuzz::time_is_up;
use proptest::prelude::*;

fn origin_text() -> impl Strategy<Value = String> {
    let host = prop_oneof![
        Just(String::new()),
        "[a-zA-Z0-9.-]{1,12}",
        "\\[[0-9a-fA-F:.]{0,12}\\]",
        "[0-9a-fA-F:.]{1,12}",
        "[ -~]{0,10}",
    ];
    let port = proptest::option::of(prop_oneof![
        Just(String::new()),
        (0u32..70_000).prop_map(|p| p.to_string()),
        "[ -~]{0,4}",
    ]);
    let scheme = prop_oneof![
        4 => Just("http"),
        4 => Just("https"),
        1 => Just("ftp"),
        1 => Just("HTTP"),
    ];
    prop_oneof![
        9 => (scheme, host, port).prop_map(|(s, h, p)| match p {
            Some(p) => format!("{s}://{h}:{p}"),
            None => format!("{s}://{h}"),
        }),
        1 => ".{0,30}",
    ]
}

/// Found by the property below: text the egress check can never match was
/// accepted as an origin (and `[::1]` without a port was refused).
#[test]
fn origins_are_read_as_uri_authorities() {
    for bad in [
        "http://{",
        "http://:80",
        "http://::1",
        "http://[::1",
        "http://a b",
        "https://x:1:2",
    ] {
        assert!(Origin::parse(bad).is_err(), "{bad}");
    }
    let v6 = Origin::parse("http://[::1]").unwrap();
    assert_eq!((v6.host.as_str(), v6.port), ("::1", 80));
    assert_eq!(Origin::parse("http://[::1]:9").unwrap().port, 9);
    let named = Origin::parse("https://API.example.com:8443").unwrap();
    assert_eq!((named.host.as_str(), named.port), ("api.example.com", 8443));
}

proptest! {
    /// Whatever the manifest says, an accepted origin has a host, and
    /// `http::Uri` reads the same text as the same scheme, host and port
    /// with nothing else (no path, query or credentials).
    #[test]
    fn prop_an_accepted_origin_means_what_the_egress_check_reads(s in origin_text()) {
        if time_is_up() { return Ok(()); }
        let uri: Option<http::Uri> = s.parse().ok();
        let Ok(o) = Origin::parse(&s) else {
            // Refused: then it is not plainly scheme://host[:port] as http::Uri reads it.
            let plain = s.split_once("://").is_some_and(|(scheme, rest)| {
                (scheme == "http" || scheme == "https") && !rest.contains(['/', '?', '#', '@', '*'])
            });
            let read = uri.as_ref().and_then(|u| Some((u.authority()?.as_str(), u.host()?))).is_some_and(|(authority, host)| {
                let port = &authority[host.len()..];
                !host.trim_start_matches('[').trim_end_matches(']').is_empty()
                    && (port.is_empty() || port.strip_prefix(':').is_some_and(|p| p.parse::<u16>().is_ok()))
            });
            prop_assert!(!(plain && read), "{:?} refused, but http::Uri reads it as an origin", s);
            return Ok(());
        };
        prop_assert!(!o.host.is_empty(), "{:?} gave an empty host", s);
        let uri = uri.ok_or_else(|| TestCaseError::fail(format!("{s:?} accepted, but http::Uri does not read it")))?;
        prop_assert_eq!(uri.scheme_str(), Some(o.scheme.as_str()), "{:?}", s);
        let host = uri.host().unwrap_or("").trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        prop_assert_eq!(&host, &o.host, "{:?}", s);
        let port = uri.port_u16().unwrap_or(if o.scheme == "https" { 443 } else { 80 });
        prop_assert_eq!(port, o.port, "{:?}", s);
    }
}
