//! Sealed cursors: opaque, encrypted, integrity-protected `nextCursor` values.
//! (Over 500 lines: about 400 of code; the rest tests every way a cursor
//! can fail to open.)
//!
//! "The framework returns opaque, encrypted, integrity-protected nextCursor
//! values. Cursors bind the caller identity, subject, permissions, resource
//! audience, registered sources, and traversal position."
//!
//! Layout (then base64url without padding):
//! `version (1) || key id (4) || nonce (12) || AES-256-GCM(plaintext) || tag (16)`
//! with plaintext `traversal start, Unix ms (8) || position`, and as AAD the
//! version, key id and a SHA-256 over the binding (client id, subject, sorted
//! scopes, audience, source-set fingerprint). Any change to any of them makes
//! the tag check fail.
//!
//! Keys are made at process start from the OS random source and never
//! written anywhere ("Cursors use a process-local key ... Shutdown discards
//! the key"). "Never more than 2^32 cursors under one key": the ring rotates
//! to a fresh key before that and keeps the previous key for one traversal
//! lifetime, so cursors already handed out keep working.
//!
//! (Over 500 lines: half of it is tests, of sealing, rotation and tampering.)

use crate::limits::TRAVERSAL_LIFETIME;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex};

const VERSION: u8 = 1;
const HEADER: usize = 1 + 4 + 12;
const TAG: usize = 16;
/// Rotate strictly before 2^32 seals under one key.
pub const ROTATE_AFTER: u64 = (1 << 32) - 1;

/// Where a traversal stands: what the next page starts after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Position {
    /// Next: the static resource at this offset of the configured list.
    Static { offset: u32 },
    /// Next: entries of the source at `index` (registration order) with keys
    /// strictly greater than `after` (`None`: from its start).
    Source { index: u32, after: Option<String> },
    /// `resources/templates/list`: next template at this offset.
    Template { offset: u32 },
}

/// What a cursor carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CursorState {
    /// When the traversal's first page was served (Unix ms). Carried from
    /// page to page unchanged: later pages never extend a traversal.
    pub started_ms: u64,
    pub position: Position,
}

/// The caller and source set a cursor is bound to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CursorBinding {
    digest: [u8; 32],
}

impl CursorBinding {
    pub fn new(
        client_id: Option<&str>,
        subject: Option<&str>,
        sorted_scopes: &[String],
        audience: Option<&str>,
        sources_fingerprint: &[u8; 32],
    ) -> Self {
        let mut h = Sha256::new();
        let mut field = |tag: u8, v: Option<&str>| {
            h.update([tag]);
            match v {
                Some(v) => {
                    h.update([1]);
                    h.update((v.len() as u64).to_be_bytes());
                    h.update(v.as_bytes());
                }
                None => h.update([0]),
            }
        };
        field(b'c', client_id);
        field(b's', subject);
        for scope in sorted_scopes {
            field(b'p', Some(scope));
        }
        field(b'a', audience);
        h.update(b"f");
        h.update(sources_fingerprint);
        Self {
            digest: h.finalize().into(),
        }
    }
}

/// The clock cursors are timed by; injectable so tests need no real sleeps.
pub trait Clock: Send + Sync {
    fn now_ms(&self) -> u64;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64
    }
}

/// Every way a cursor can fail. Clients see one generic "Invalid cursor".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    #[error("not base64url")]
    Encoding,
    #[error("wrong length or version")]
    Format,
    #[error("unknown or retired key")]
    UnknownKey,
    #[error("authentication failed (forged, altered, or bound to another caller or source set)")]
    Tag,
    #[error("bad plaintext")]
    Plaintext,
    #[error("traversal expired")]
    Expired,
}

impl CursorError {
    /// The `reason` label of `emseepea_cursor_rejections_total`. An AEAD
    /// cannot tell a cursor altered in transit from one sealed for another
    /// caller or source set: both are `tampered`. `foreign` is an authentic
    /// cursor whose position this caller may not resume (`Position`).
    pub fn reason(&self) -> &'static str {
        match self {
            CursorError::Encoding | CursorError::Format | CursorError::Tag => "tampered",
            CursorError::UnknownKey => "stale_key",
            CursorError::Plaintext => "foreign",
            CursorError::Expired => "expired",
        }
    }

    /// Count this rejection (every place a cursor is refused calls this).
    pub fn record(self) -> Self {
        let m = crate::telemetry::metrics();
        crate::telemetry::metrics::Metrics::reason(&m.cursor_rejections, self.reason());
        self
    }
}

struct Key {
    id: u32,
    cipher: Arc<Aes256Gcm>,
    seals: u64,
}

struct Retired {
    id: u32,
    cipher: Arc<Aes256Gcm>,
    retired_ms: u64,
}

struct Ring {
    current: Key,
    previous: Option<Retired>,
}

/// The process's cursor keys.
pub struct CursorKeys {
    ring: Mutex<Ring>,
    clock: Arc<dyn Clock>,
    rotate_after: u64,
}

fn fresh_key(id: u32) -> Key {
    let mut bytes = [0u8; 32];
    getrandom(&mut bytes);
    let cipher = Aes256Gcm::new_from_slice(&bytes).expect("32-byte key");
    bytes.fill(0);
    Key {
        id,
        cipher: Arc::new(cipher),
        seals: 0,
    }
}

fn getrandom(buf: &mut [u8]) {
    use rand::TryRngCore;
    rand::rngs::OsRng
        .try_fill_bytes(buf)
        .expect("the OS random source failed");
}

impl CursorKeys {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self::with_rotation(clock, ROTATE_AFTER)
    }

    /// Rotation after `rotate_after` seals (tests use small numbers).
    pub fn with_rotation(clock: Arc<dyn Clock>, rotate_after: u64) -> Self {
        let first_id = rand::random::<u32>();
        Self {
            ring: Mutex::new(Ring {
                current: fresh_key(first_id),
                previous: None,
            }),
            clock,
            rotate_after: rotate_after.min(ROTATE_AFTER),
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Seal a cursor for `state` bound to `binding`.
    pub fn seal(&self, state: &CursorState, binding: &CursorBinding) -> String {
        let (id, cipher) = {
            let mut ring = self.ring.lock().unwrap();
            if ring.current.seals >= self.rotate_after {
                let next = fresh_key(ring.current.id.wrapping_add(1));
                let old = std::mem::replace(&mut ring.current, next);
                ring.previous = Some(Retired {
                    id: old.id,
                    cipher: old.cipher,
                    retired_ms: self.clock.now_ms(),
                });
            }
            ring.current.seals += 1;
            (ring.current.id, ring.current.cipher.clone())
        };
        let mut nonce = [0u8; 12];
        rand::fill(&mut nonce);
        let plaintext = encode_state(state);
        let mut header = [0u8; HEADER];
        header[0] = VERSION;
        header[1..5].copy_from_slice(&id.to_be_bytes());
        header[5..].copy_from_slice(&nonce);
        let aad = aad(&header[..5], binding);
        let ciphertext = cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &plaintext,
                    aad: &aad,
                },
            )
            .expect("AES-GCM encryption cannot fail for short messages");
        let mut out = Vec::with_capacity(HEADER + ciphertext.len());
        out.extend_from_slice(&header);
        out.extend_from_slice(&ciphertext);
        URL_SAFE_NO_PAD.encode(out)
    }

    /// Open a cursor: checks encoding, key, tag (and with it the binding),
    /// plaintext and the traversal's 15-minute lifetime.
    pub fn open(&self, cursor: &str, binding: &CursorBinding) -> Result<CursorState, CursorError> {
        // Longest valid cursor: header + tag + plaintext with a 256-byte key.
        if cursor.len() > 512 {
            return Err(CursorError::Format);
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(cursor)
            .map_err(|_| CursorError::Encoding)?;
        if bytes.len() < HEADER + TAG + 9 || bytes[0] != VERSION {
            return Err(CursorError::Format);
        }
        let id = u32::from_be_bytes(bytes[1..5].try_into().unwrap());
        let now = self.clock.now_ms();
        let cipher = {
            let ring = self.ring.lock().unwrap();
            if ring.current.id == id {
                ring.current.cipher.clone()
            } else {
                match &ring.previous {
                    Some(p)
                        if p.id == id
                            && now.saturating_sub(p.retired_ms)
                                <= TRAVERSAL_LIFETIME.as_millis() as u64 =>
                    {
                        p.cipher.clone()
                    }
                    _ => return Err(CursorError::UnknownKey),
                }
            }
        };
        let aad = aad(&bytes[..5], binding);
        let plaintext = cipher
            .decrypt(
                Nonce::from_slice(&bytes[5..HEADER]),
                Payload {
                    msg: &bytes[HEADER..],
                    aad: &aad,
                },
            )
            .map_err(|_| CursorError::Tag)?;
        let state = decode_state(&plaintext).ok_or(CursorError::Plaintext)?;
        // "A traversal expires 15 minutes after its first page. Fetching another
        // page or replaying a cursor does not extend that time."
        if now
            >= state
                .started_ms
                .saturating_add(TRAVERSAL_LIFETIME.as_millis() as u64)
            || state.started_ms > now + 60_000
        {
            return Err(CursorError::Expired);
        }
        Ok(state)
    }

    /// The exact length of the cursor `seal` makes for `position`: the pager
    /// budgets page bytes with it before sealing.
    pub fn encoded_len(position: &Position) -> usize {
        encoded_len_of(position_len(position))
    }

    /// `encoded_len` of `Position::Source { after: Some(key), .. }`, without
    /// building that position (the pager asks for every listed entry).
    pub fn encoded_len_after(key: &str) -> usize {
        encoded_len_of(source_position_len(Some(key)))
    }
}

fn encoded_len_of(position_len: usize) -> usize {
    let raw = HEADER + TAG + 8 + position_len;
    (4 * raw).div_ceil(3)
}

fn aad(header: &[u8], binding: &CursorBinding) -> [u8; 37] {
    let mut out = [0u8; 37];
    out[..5].copy_from_slice(header);
    out[5..].copy_from_slice(&binding.digest);
    out
}

fn position_len(p: &Position) -> usize {
    match p {
        Position::Static { .. } | Position::Template { .. } => 1 + 4,
        Position::Source { after, .. } => source_position_len(after.as_deref()),
    }
}

fn source_position_len(after: Option<&str>) -> usize {
    1 + 4 + 2 + after.map_or(0, str::len)
}

fn encode_state(s: &CursorState) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + position_len(&s.position));
    out.extend_from_slice(&s.started_ms.to_be_bytes());
    match &s.position {
        Position::Static { offset } => {
            out.push(b'S');
            out.extend_from_slice(&offset.to_be_bytes());
        }
        Position::Template { offset } => {
            out.push(b'T');
            out.extend_from_slice(&offset.to_be_bytes());
        }
        Position::Source { index, after } => {
            out.push(b'Q');
            out.extend_from_slice(&index.to_be_bytes());
            // Length 0xFFFF marks "from the start"; keys are at most 256 bytes.
            match after {
                None => out.extend_from_slice(&u16::MAX.to_be_bytes()),
                Some(a) => {
                    out.extend_from_slice(&(a.len() as u16).to_be_bytes());
                    out.extend_from_slice(a.as_bytes());
                }
            }
        }
    }
    out
}

fn decode_state(b: &[u8]) -> Option<CursorState> {
    let started_ms = u64::from_be_bytes(b.get(..8)?.try_into().ok()?);
    let kind = *b.get(8)?;
    let num = u32::from_be_bytes(b.get(9..13)?.try_into().ok()?);
    let position = match kind {
        b'S' if b.len() == 13 => Position::Static { offset: num },
        b'T' if b.len() == 13 => Position::Template { offset: num },
        b'Q' => {
            let len = u16::from_be_bytes(b.get(13..15)?.try_into().ok()?);
            let rest = b.get(15..)?;
            let after = if len == u16::MAX {
                if !rest.is_empty() {
                    return None;
                }
                None
            } else {
                if rest.len() != len as usize {
                    return None;
                }
                Some(String::from_utf8(rest.to_vec()).ok()?)
            };
            Position::Source { index: num, after }
        }
        _ => return None,
    };
    Some(CursorState {
        started_ms,
        position,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A clock tests move by hand.
    pub struct TestClock(pub AtomicU64);

    impl Clock for TestClock {
        fn now_ms(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    impl TestClock {
        pub fn advance(&self, ms: u64) {
            self.0.fetch_add(ms, Ordering::SeqCst);
        }
    }

    fn binding(client: &str, subject: &str, scopes: &[&str], aud: &str, fp: u8) -> CursorBinding {
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        CursorBinding::new(Some(client), Some(subject), &scopes, Some(aud), &[fp; 32])
    }

    fn alice() -> CursorBinding {
        binding(
            "app",
            "alice",
            &["documents:read"],
            "https://mcp.example/mcp",
            7,
        )
    }

    fn state() -> CursorState {
        CursorState {
            started_ms: 1_000_000,
            position: Position::Source {
                index: 2,
                after: Some("key-0042".into()),
            },
        }
    }

    fn keys() -> (Arc<TestClock>, CursorKeys) {
        let clock = Arc::new(TestClock(AtomicU64::new(1_000_000)));
        (clock.clone(), CursorKeys::new(clock))
    }

    #[test]
    fn round_trip_and_exact_length() {
        let (_, k) = keys();
        for position in [
            Position::Static { offset: 3 },
            Position::Template { offset: 0 },
            Position::Source {
                index: 1,
                after: None,
            },
            Position::Source {
                index: 1,
                after: Some("k".repeat(256)),
            },
            Position::Source {
                index: 9,
                after: Some("a".into()),
            },
        ] {
            let s = CursorState {
                started_ms: 1_000_000,
                position,
            };
            let c = k.seal(&s, &alice());
            assert_eq!(c.len(), CursorKeys::encoded_len(&s.position));
            assert!(
                c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            );
            assert_eq!(k.open(&c, &alice()).unwrap(), s);
        }
    }

    #[test]
    fn bound_to_the_caller_and_sources() {
        let (_, k) = keys();
        let c = k.seal(&state(), &alice());
        let others = [
            binding(
                "app",
                "bob",
                &["documents:read"],
                "https://mcp.example/mcp",
                7,
            ),
            binding(
                "app",
                "alice",
                &["documents:read", "documents:write"],
                "https://mcp.example/mcp",
                7,
            ),
            binding("app", "alice", &[], "https://mcp.example/mcp", 7),
            binding(
                "other-app",
                "alice",
                &["documents:read"],
                "https://mcp.example/mcp",
                7,
            ),
            binding(
                "app",
                "alice",
                &["documents:read"],
                "https://other.example/mcp",
                7,
            ),
            binding(
                "app",
                "alice",
                &["documents:read"],
                "https://mcp.example/mcp",
                8,
            ),
        ];
        for b in others {
            assert_eq!(k.open(&c, &b), Err(CursorError::Tag));
        }
        // No subject vs an empty one are different bindings too.
        let none = CursorBinding::new(Some("app"), None, &[], None, &[7; 32]);
        let empty = CursorBinding::new(Some("app"), Some(""), &[], None, &[7; 32]);
        let c = k.seal(&state(), &none);
        assert_eq!(k.open(&c, &empty), Err(CursorError::Tag));
    }

    #[test]
    fn fails_after_restart() {
        let (_, k1) = keys();
        let (_, k2) = keys();
        let c = k1.seal(&state(), &alice());
        assert!(k2.open(&c, &alice()).is_err());
    }

    #[test]
    fn every_flipped_bit_fails() {
        let (_, k) = keys();
        let c = k.seal(&state(), &alice());
        let raw = URL_SAFE_NO_PAD.decode(&c).unwrap();
        for i in 0..raw.len() * 8 {
            let mut m = raw.clone();
            m[i / 8] ^= 1 << (i % 8);
            let forged = URL_SAFE_NO_PAD.encode(&m);
            assert!(k.open(&forged, &alice()).is_err(), "bit {i}");
        }
        for bad in [
            "",
            "!!!",
            "AAAA",
            &c[..c.len() - 1],
            &format!("{c}A"),
            &"A".repeat(600),
        ] {
            assert!(k.open(bad, &alice()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn expiry_counts_from_the_first_page() {
        let (clock, k) = keys();
        let first = k.seal(&state(), &alice());
        // Pages fetched in between carry the original start...
        clock.advance(10 * 60 * 1000);
        let s = k.open(&first, &alice()).unwrap();
        let second = k.seal(
            &CursorState {
                started_ms: s.started_ms,
                position: Position::Static { offset: 1 },
            },
            &alice(),
        );
        clock.advance(4 * 60 * 1000 + 59_999);
        assert!(k.open(&second, &alice()).is_ok());
        assert!(
            k.open(&first, &alice()).is_ok(),
            "replay is allowed until expiry"
        );
        // ...so the traversal still ends 15 minutes after its first page.
        clock.advance(1);
        assert_eq!(k.open(&second, &alice()), Err(CursorError::Expired));
        assert_eq!(k.open(&first, &alice()), Err(CursorError::Expired));
    }

    #[test]
    fn rotation_keeps_recent_cursors() {
        let clock = Arc::new(TestClock(AtomicU64::new(1_000_000)));
        let k = CursorKeys::with_rotation(clock.clone(), 3);
        let old = k.seal(&state(), &alice());
        let id_of = |c: &str| URL_SAFE_NO_PAD.decode(c).unwrap()[1..5].to_vec();
        let mut ids = vec![id_of(&old)];
        for _ in 0..3 {
            ids.push(id_of(&k.seal(&state(), &alice())));
        }
        assert_eq!(ids[0], ids[2], "three seals per key");
        assert_ne!(ids[2], ids[3], "the fourth seal uses a new key");
        assert!(k.open(&old, &alice()).is_ok(), "previous key still opens");
        clock.advance(TRAVERSAL_LIFETIME.as_millis() as u64 + 1);
        assert_eq!(k.open(&old, &alice()), Err(CursorError::UnknownKey));
    }

    // Properties (`cargo xtask fuzz` runs them longer; see crate::fuzz).

    use crate::auth::Principal;
    use crate::fuzz::time_is_up;
    use crate::inventory::pager::cursor_binding;
    use crate::limits::MAX_KEY_LEN;
    use proptest::prelude::*;

    const NOW: u64 = 1_000_000_000;
    const LIFETIME_MS: u64 = TRAVERSAL_LIFETIME.as_millis() as u64;

    fn position() -> impl Strategy<Value = Position> {
        // Keys are 1..=256 printable ASCII ("Keys contain 1–256 printable
        // ASCII characters"); the cursor carries any UTF-8 up to that size.
        let key = prop_oneof!["[ -~]{1,256}", "\\PC{1,64}"]
            .prop_filter("at most 256 bytes", |k| k.len() <= MAX_KEY_LEN);
        prop_oneof![
            any::<u32>().prop_map(|offset| Position::Static { offset }),
            any::<u32>().prop_map(|offset| Position::Template { offset }),
            (any::<u32>(), proptest::option::of(key))
                .prop_map(|(index, after)| Position::Source { index, after }),
        ]
    }

    fn live_state() -> impl Strategy<Value = CursorState> {
        (0..LIFETIME_MS, position()).prop_map(|(age, position)| CursorState {
            started_ms: NOW - age,
            position,
        })
    }

    /// Principals drawn from tiny alphabets, so that two draws are often
    /// equal or differ by one character, one scope, or where a field ends.
    fn principal() -> impl Strategy<Value = Option<Principal>> {
        let field = "[ab]{0,3}";
        proptest::option::weighted(
            0.9,
            (
                proptest::option::of(field),
                field,
                proptest::collection::vec(field, 0..3),
                proptest::option::of(prop_oneof![Just("r"), Just("r/"), Just("s")]),
            )
                .prop_map(|(subject, client, scopes, audience)| {
                    Principal::new(subject, client, scopes, audience.map(String::from))
                }),
        )
    }

    fn keys_at(now: u64) -> (Arc<TestClock>, CursorKeys) {
        let clock = Arc::new(TestClock(AtomicU64::new(now)));
        (clock.clone(), CursorKeys::new(clock))
    }

    proptest! {
        /// Every position and caller round-trips, at exactly the length the
        /// pager budgets for, in the base64url alphabet.
        #[test]
        fn prop_any_state_round_trips(state in live_state(), p in principal(), fp in any::<[u8; 32]>()) {
            if time_is_up() { return Ok(()); }
            let (_, k) = keys_at(NOW);
            let b = cursor_binding(p.as_ref(), &fp);
            let c = k.seal(&state, &b);
            prop_assert_eq!(c.len(), CursorKeys::encoded_len(&state.position));
            if let Position::Source { after: Some(key), .. } = &state.position {
                prop_assert_eq!(c.len(), CursorKeys::encoded_len_after(key));
            }
            prop_assert!(c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
            prop_assert_eq!(k.open(&c, &b), Ok(state));
        }

        /// Arbitrary text, of any characters or of the base64url alphabet,
        /// never opens, whatever its length.
        #[test]
        fn prop_arbitrary_text_never_opens(
            text in prop_oneof![".{0,700}", "[A-Za-z0-9_-]{0,700}", "\\PC{0,40}"],
        ) {
            if time_is_up() { return Ok(()); }
            let (_, k) = keys_at(NOW);
            prop_assert!(k.open(&text, &alice()).is_err());
        }

        /// Bytes that carry the live key's id but were not sealed by it fail
        /// the tag check (or, if too short or too long, the format check).
        #[test]
        fn prop_forged_bytes_under_the_live_key_are_rejected(tail in proptest::collection::vec(any::<u8>(), 0..400)) {
            if time_is_up() { return Ok(()); }
            let (_, k) = keys_at(NOW);
            let real = URL_SAFE_NO_PAD.decode(k.seal(&state(), &alice())).unwrap();
            let mut forged = real[..5].to_vec();
            forged.extend_from_slice(&tail);
            let text = URL_SAFE_NO_PAD.encode(&forged);
            let expected = if forged.len() < HEADER + TAG + 9 || text.len() > 512 {
                CursorError::Format
            } else {
                CursorError::Tag
            };
            prop_assert_eq!(k.open(&text, &alice()), Err(expected));
        }

        /// Any single-bit flip of any valid cursor's bytes, and any change of
        /// one of its characters, is rejected.
        #[test]
        fn prop_any_single_change_is_rejected(
            state in live_state(),
            p in principal(),
            bit in any::<prop::sample::Index>(),
            at in any::<prop::sample::Index>(),
            replacement in "[A-Za-z0-9_-]",
        ) {
            if time_is_up() { return Ok(()); }
            let (_, k) = keys_at(NOW);
            let b = cursor_binding(p.as_ref(), &[3; 32]);
            let c = k.seal(&state, &b);
            let mut raw = URL_SAFE_NO_PAD.decode(&c).unwrap();
            let i = bit.index(raw.len() * 8);
            raw[i / 8] ^= 1 << (i % 8);
            prop_assert!(k.open(&URL_SAFE_NO_PAD.encode(&raw), &b).is_err(), "bit {}", i);
            let i = at.index(c.len());
            if c[i..i + 1] != replacement {
                let edited = format!("{}{}{}", &c[..i], replacement, &c[i + 1..]);
                prop_assert!(k.open(&edited, &b).is_err(), "character {}", i);
            }
        }

        /// "Cursors bind the caller identity, subject, permissions, resource
        /// audience, registered sources": a cursor opens for exactly the
        /// caller and source set it was sealed for (anonymous included).
        #[test]
        fn prop_a_cursor_opens_only_for_its_own_caller(
            state in live_state(),
            (p1, p2) in (principal(), principal()),
            (fp1, fp2) in (0u8..2, 0u8..2),
        ) {
            if time_is_up() { return Ok(()); }
            let (_, k) = keys_at(NOW);
            let c = k.seal(&state, &cursor_binding(p1.as_ref(), &[fp1; 32]));
            let opened = k.open(&c, &cursor_binding(p2.as_ref(), &[fp2; 32]));
            if p1 == p2 && fp1 == fp2 {
                prop_assert_eq!(opened, Ok(state));
            } else {
                prop_assert_eq!(opened, Err(CursorError::Tag), "{:?} opened for {:?}", p1, p2);
            }
        }

        /// A traversal opens from its first page until 15 minutes later, and
        /// never when it claims to start (more than a minute) in the future.
        #[test]
        fn prop_expiry_follows_the_start(
            started_ms in 0u64..(1 << 50),
            now in 0u64..(1 << 50),
            edge in 0u8..3,
            near in -70_000i64..70_000,
        ) {
            if time_is_up() { return Ok(()); }
            // Two thirds of the cases within ±70 s of the start or the end.
            let now = match edge {
                0 => now,
                1 => started_ms.saturating_add_signed(near),
                _ => (started_ms + LIFETIME_MS).saturating_add_signed(near),
            };
            let (_, k) = keys_at(now);
            let state = CursorState { started_ms, position: Position::Static { offset: 0 } };
            let c = k.seal(&state, &alice());
            let live = now < started_ms + LIFETIME_MS && started_ms <= now + 60_000;
            let expected = if live { Ok(state) } else { Err(CursorError::Expired) };
            prop_assert_eq!(k.open(&c, &alice()), expected);
        }

        /// The plaintext decoder accepts only what the encoder writes: any
        /// bytes it accepts re-encode to exactly those bytes.
        #[test]
        fn prop_plaintext_decoding_is_canonical(
            bytes in prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..300),
                (any::<u64>(), prop_oneof![Just(b'S'), Just(b'T'), Just(b'Q'), any::<u8>()], any::<u32>(),
                 prop_oneof![Just(u16::MAX), 0u16..300, any::<u16>()],
                 proptest::collection::vec(any::<u8>(), 0..300))
                    .prop_map(|(t, kind, n, len, rest)| {
                        let mut b = t.to_be_bytes().to_vec();
                        b.push(kind);
                        b.extend_from_slice(&n.to_be_bytes());
                        b.extend_from_slice(&len.to_be_bytes());
                        b.extend_from_slice(&rest);
                        b
                    }),
            ],
        ) {
            if time_is_up() { return Ok(()); }
            if let Some(state) = decode_state(&bytes) {
                prop_assert_eq!(encode_state(&state), bytes);
            }
        }
    }
}
