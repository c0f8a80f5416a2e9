//! The protocol versions we speak and what differs between them.

/// A protocol version this server implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
}

impl Version {
    /// Every supported version, newest first (as sent in -32022's `data.supported`).
    pub const ALL: [Version; 4] = [
        Version::V2026_07_28,
        Version::V2025_11_25,
        Version::V2025_06_18,
        Version::V2025_03_26,
    ];
    /// The newest version with the `initialize` handshake.
    pub const LATEST_LEGACY: Version = Version::V2025_11_25;
    /// The stateless version (requests in its form skip the handshake).
    pub const STATELESS: Version = Version::V2026_07_28;
    /// Errors before any version is known are framed as this one ("an
    /// absent MCP-Protocol-Version header means 2025-03-26").
    pub const UNNEGOTIATED: Version = Version::V2025_03_26;

    pub fn parse(s: &str) -> Option<Version> {
        Some(match s {
            "2025-03-26" => Version::V2025_03_26,
            "2025-06-18" => Version::V2025_06_18,
            "2025-11-25" => Version::V2025_11_25,
            "2026-07-28" => Version::V2026_07_28,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Version::V2025_03_26 => "2025-03-26",
            Version::V2025_06_18 => "2025-06-18",
            Version::V2025_11_25 => "2025-11-25",
            Version::V2026_07_28 => "2026-07-28",
        }
    }

    /// Stateless: no handshake, no sessions; version and client capabilities
    /// in every request's `_meta`, mirrored in headers (2026-07-28).
    pub fn is_stateless(self) -> bool {
        self >= Version::V2026_07_28
    }

    /// Reached through the `initialize` handshake and a session.
    pub fn has_handshake(self) -> bool {
        !self.is_stateless()
    }

    /// Results carry `resultType`, `ttlMs`/`cacheScope` and `_meta.serverInfo`.
    pub fn has_result_metadata(self) -> bool {
        self.is_stateless()
    }

    /// `Mcp-Method` / `Mcp-Name` mirror the body and are checked (-32020).
    pub fn mirrors_headers(self) -> bool {
        self.is_stateless()
    }

    /// `ping` and `logging/setLevel` (deprecated, then removed in 2026-07-28).
    pub fn has_ping_and_logging(self) -> bool {
        self.has_handshake()
    }

    /// `server/discover` replaces the handshake.
    pub fn has_discover(self) -> bool {
        self.is_stateless()
    }

    /// An unknown method travels with HTTP 404 (200 before).
    pub fn unknown_method_is_404(self) -> bool {
        self.is_stateless()
    }

    /// JSON-RPC batches exist only in 2025-03-26.
    pub fn allows_batch(self) -> bool {
        self == Version::V2025_03_26
    }

    /// Resource not found is an invalid-params error with `data.uri`
    /// (2026-07-28) rather than its own code (legacy).
    pub fn not_found_is_invalid_params(self) -> bool {
        self.is_stateless()
    }

    /// The version answered to an `initialize` asking for `requested`: the same
    /// when we support it with a handshake, else our newest handshake version.
    pub fn negotiate(requested: &str) -> Version {
        match Version::parse(requested) {
            Some(v) if v.has_handshake() => v,
            _ => Version::LATEST_LEGACY,
        }
    }

    pub fn supported_strings() -> Vec<&'static str> {
        Version::ALL.iter().map(|v| v.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation() {
        assert_eq!(Version::negotiate("2025-06-18"), Version::V2025_06_18);
        assert_eq!(Version::negotiate("2025-03-26"), Version::V2025_03_26);
        assert_eq!(Version::negotiate("2024-11-05"), Version::V2025_11_25);
        assert_eq!(Version::negotiate("2026-07-28"), Version::V2025_11_25);
        assert_eq!(Version::negotiate("garbage"), Version::V2025_11_25);
        for v in Version::ALL {
            assert_eq!(Version::parse(v.as_str()), Some(v));
        }
    }
}
