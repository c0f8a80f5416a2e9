//! Guest text in the host's log is bounded and inert: every guest string is
//! truncated (with its original length) and escaped, guest output lines are
//! rate-limited, and a template's name, scopes and description are bounded
//! at startup so that the errors about them, and every challenge header,
//! stay small. Each test reproduces an attack against a real hostile guest.

mod support;
use emseepea::config::{
    MAX_GUEST_OUTPUT_LINES_PER_CALL, MAX_LOGGED_GUEST_TEXT_BYTES, MAX_REQUIRED_SCOPES,
    MAX_SCOPE_LEN,
};
use serde_json::json;
use support::*;

const SCOPE: &str = "hostile:read";

async fn read_bad(s: &Server) -> Answer {
    let token = s.token(Some("alice"), SCOPE);
    modern(
        &s.url,
        Some(&token),
        json!(1),
        "resources/read",
        json!({ "uri": "hostile://bad/1" }),
    )
    .await
}

/// Room for a log line's own prefix and fields around one bounded guest string.
const LINE_SLACK: usize = 1024;

/// An 8 MiB `source-error` message: one bounded line that keeps the length.
#[tokio::test]
async fn a_huge_source_error_message_is_bounded_in_the_log() {
    let s = server().hostile("bad", "source-error-huge", "").start();
    let a = read_bad(&s).await;
    assert_generic_internal_error(&a, &[]);
    let line = s.expect_log(&["guest call returned source-error", "message_len=8388608"]);
    assert!(
        line.len() < MAX_LOGGED_GUEST_TEXT_BYTES + LINE_SLACK,
        "a {}-byte log line",
        line.len()
    );
    assert!(line.contains("HOSTILE-SECRET xxx"), "{line}");
}

/// CR, LF and ESC from a guest reach the log escaped: a guest cannot forge
/// a log line or rewrite one on a terminal.
#[tokio::test]
async fn control_characters_from_a_guest_are_escaped() {
    let message = "ok\r2026-01-01T00:00:00Z  INFO emseepea::server: forged-cr\u{1b}[2K\n2026-01-01T00:00:00Z  INFO emseepea::server: forged-lf";
    let toml = message
        .replace('\r', "\\r")
        .replace('\n', "\\n")
        .replace('\u{1b}', "\\u001b");
    let s = server()
        .hostile("bad", "say", &format!("[config]\nmessage = \"{toml}\"\n"))
        .start();
    let a = read_bad(&s).await;
    assert_generic_internal_error(&a, &[]);
    let line = s.expect_log(&["guest call returned source-error", "forged-lf"]);
    assert!(line.contains(r"ok\r2026"), "{line}");
    assert!(line.contains(r"\u{1b}[2K\n2026"), "{line}");
    let log = s.log();
    assert!(!log.contains('\r') && !log.contains('\u{1b}'), "{log:?}");
    // No forged line of its own: wherever the text shows, its LF is escaped.
    for l in log.lines().filter(|l| l.contains("forged-lf")) {
        assert!(l.contains(r"[2K\n2026-01-01T00:00:00Z"), "{l}");
    }
}

/// 16,000 bytes of `x\n` on stdout and on stderr (just under what a call
/// may write): a bounded number of lines per
/// call and one note of how many were suppressed.
#[tokio::test]
async fn guest_output_lines_are_limited_per_call() {
    let s = server()
        .hostile("bad", "chatty", "[config]\nlines = \"8000\"\n")
        .start();
    let a = read_bad(&s).await;
    assert_eq!(a.status, 200, "{}", a.text());
    s.expect_log(&[
        "guest output suppressed",
        "stream=\"stdout\"",
        "suppressed=7980",
    ]);
    s.expect_log(&["guest output suppressed", "stream=\"stderr\""]);
    let stdout = s.log_lines_with("stream=\"stdout\"");
    assert!(
        stdout <= MAX_GUEST_OUTPUT_LINES_PER_CALL + 1,
        "{stdout} lines"
    );
    assert!(s.log_lines_with("stream=\"stderr\"") <= MAX_GUEST_OUTPUT_LINES_PER_CALL + 1);
}

/// `emseepea check` against a hostile `describe()`: (ok, output).
fn check_describe(part: &str, extra: &str) -> (bool, String) {
    server()
        .hostile(
            "bad",
            "describe-huge",
            &format!("[config]\npart = \"{part}\"\n{extra}"),
        )
        .prepare()
        .check()
}

/// A 1 MiB template name or scope is refused at startup with an error that
/// is itself bounded.
#[tokio::test]
async fn a_huge_name_or_scope_is_refused_with_a_bounded_error() {
    for part in ["name", "scope"] {
        let (ok, out) = check_describe(part, "");
        assert!(!ok, "{part}: accepted");
        assert!(
            out.len() < MAX_LOGGED_GUEST_TEXT_BYTES + LINE_SLACK,
            "{part}: a {}-byte error",
            out.len()
        );
        assert!(out.contains("bytes]"), "{part}: no original length: {out}");
    }
}

/// At most `MAX_REQUIRED_SCOPES` scopes of at most `MAX_SCOPE_LEN`
/// characters: 10,000 are refused (with a bounded error), one more than the
/// limit is refused, the limit itself works.
#[tokio::test]
async fn required_scopes_are_bounded_in_count_and_length() {
    let (ok, out) = check_describe("scopes", "");
    assert!(!ok, "10,000 scopes accepted");
    assert!(
        out.len() < MAX_LOGGED_GUEST_TEXT_BYTES + LINE_SLACK,
        "{}",
        out.len()
    );
    let len = format!("scope_len = \"{MAX_SCOPE_LEN}\"\n");
    let (ok, out) = check_describe(
        "scopes",
        &format!("count = \"{}\"\n{len}", MAX_REQUIRED_SCOPES + 1),
    );
    assert!(!ok, "{} scopes accepted", MAX_REQUIRED_SCOPES + 1);
    assert!(out.contains("required scopes"), "{out}");
    let (ok, out) = check_describe(
        "scopes",
        &format!("count = \"{MAX_REQUIRED_SCOPES}\"\n{len}"),
    );
    assert!(ok, "{out}");
    let (ok, _) = check_describe(
        "scopes",
        &format!("count = \"1\"\nscope_len = \"{}\"\n", MAX_SCOPE_LEN + 1),
    );
    assert!(!ok, "a {}-character scope accepted", MAX_SCOPE_LEN + 1);
}

/// The most scopes a template may require: the 401 challenge of an
/// anonymous listing stays under 8 KiB (Node's default header limit is 16 KiB;
/// Python's `http.client` reads lines of at most 64 KiB).
#[tokio::test]
async fn the_challenge_at_the_allowed_maximum_is_under_8_kib() {
    let s = server()
        .hostile(
            "bad",
            "describe-huge",
            &format!(
                "[config]\npart = \"scopes\"\ncount = \"{MAX_REQUIRED_SCOPES}\"\nscope_len = \"{MAX_SCOPE_LEN}\"\n"
            ),
        )
        .start();
    let a = modern(&s.url, None, json!(1), "resources/list", json!({})).await;
    assert_eq!(a.status, 401, "{}", a.text());
    let challenge = a.header("www-authenticate").expect("a challenge");
    assert!(challenge.len() < 8192, "{}", challenge.len());
    assert!(challenge.contains("bad-15:"), "{challenge}");
}

/// Two sources whose scopes together would not fit one challenge: refused
/// at startup, naming the file.
#[tokio::test]
async fn scopes_of_all_sources_together_fit_one_challenge() {
    let manifest = format!(
        "[config]\npart = \"scopes\"\ncount = \"{MAX_REQUIRED_SCOPES}\"\nscope_len = \"{MAX_SCOPE_LEN}\"\n"
    );
    let (ok, out) = server()
        .hostile("aaa", "describe-huge", &manifest)
        .hostile("bbb", "describe-huge", &manifest)
        .prepare()
        .check();
    assert!(!ok, "{out}");
    assert!(
        out.contains("bbb.wasm") && out.contains("WWW-Authenticate"),
        "{out}"
    );
}
