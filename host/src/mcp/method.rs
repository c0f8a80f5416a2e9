//! The MCP methods, parsed once from the wire name, and what the pipeline
//! does differently for each: all of it data, in one table.

use super::App;
use super::errors::McpError;
use super::http::PRIVATE_NO_STORE;
use super::model::CacheScope;
use super::version::Version;
use crate::auth::{AuthError, Principal};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Initialize,
    Ping,
    SetLevel,
    Discover,
    ListResources,
    ListTemplates,
    Read,
    /// Anything else: -32601 (HTTP 404 in 2026-07-28).
    Unknown,
}

/// Who needs a token for a method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenRule {
    /// Only when `public_discovery` is off.
    UnlessPublicDiscovery,
    /// "Once a server registers an inventory callback, every resources/list
    /// request requires authentication, even with public discovery or legacy
    /// MCP clients."
    AlwaysOnceSourcesList,
}

/// What a 2026-07-28 request mirrors in `Mcp-Name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    None,
    /// The string param of this name.
    MirrorsParam(&'static str),
}

/// How a method's answers may be cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheRule {
    /// No caching fields, no header.
    Uncached,
    /// The same for everyone, for this long.
    Public { ttl_ms: u64 },
    /// Private whenever what is listed depends on who asks.
    Listing,
    /// Public for public static resources, else private.
    PerResource,
}

/// Which protocol versions have a method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Availability {
    All,
    HandshakeOnly,
    StatelessOnly,
    Never,
}

#[derive(Clone, Copy, Debug)]
pub struct Policy {
    pub name: &'static str,
    pub token: TokenRule,
    pub name_header: NameRule,
    pub cache: CacheRule,
    /// "The initialize request MUST NOT be part of a JSON-RPC batch."
    pub batchable: bool,
    pub available: Availability,
}

const fn policy(name: &'static str, available: Availability, cache: CacheRule) -> Policy {
    Policy {
        name,
        token: TokenRule::UnlessPublicDiscovery,
        name_header: NameRule::None,
        cache,
        batchable: true,
        available,
    }
}

use Availability::*;

// `Unknown` is the last variant, so `COUNT` bounds every `method as usize`.
const _: () = assert!(Method::Unknown as usize + 1 == Method::COUNT);

/// THE table.
static TABLE: [(Method, Policy); Method::COUNT] = [
    (
        Method::Initialize,
        Policy {
            batchable: false,
            ..policy("initialize", HandshakeOnly, CacheRule::Uncached)
        },
    ),
    (
        Method::Ping,
        policy("ping", HandshakeOnly, CacheRule::Uncached),
    ),
    (
        Method::SetLevel,
        policy("logging/setLevel", HandshakeOnly, CacheRule::Uncached),
    ),
    (
        Method::Discover,
        policy(
            "server/discover",
            StatelessOnly,
            CacheRule::Public { ttl_ms: 3_600_000 },
        ),
    ),
    (
        Method::ListResources,
        Policy {
            token: TokenRule::AlwaysOnceSourcesList,
            ..policy("resources/list", All, CacheRule::Listing)
        },
    ),
    (
        Method::ListTemplates,
        policy(
            "resources/templates/list",
            All,
            CacheRule::Public { ttl_ms: 300_000 },
        ),
    ),
    (
        Method::Read,
        Policy {
            name_header: NameRule::MirrorsParam("uri"),
            ..policy("resources/read", All, CacheRule::PerResource)
        },
    ),
    (Method::Unknown, policy("", Never, CacheRule::Uncached)),
];

impl Method {
    /// How many methods there are (`Unknown` included): `TABLE`'s length,
    /// and one past the largest `method as usize` (tables indexed by it).
    pub const COUNT: usize = 8;

    /// The method's wire name, or `unknown` (a bounded metric label).
    pub fn metric_name(self) -> &'static str {
        match self {
            Method::Unknown => "unknown",
            m => m.policy().name,
        }
    }

    pub fn parse(name: &str) -> Method {
        TABLE
            .iter()
            .find(|(m, p)| *m != Method::Unknown && p.name == name)
            .map_or(Method::Unknown, |(m, _)| *m)
    }

    pub fn policy(self) -> &'static Policy {
        &TABLE
            .iter()
            .find(|(m, _)| *m == self)
            .expect("every method is in the table")
            .1
    }

    pub fn available_in(self, version: Version) -> bool {
        match self.policy().available {
            All => true,
            HandshakeOnly => version.has_handshake(),
            StatelessOnly => version.is_stateless(),
            Never => false,
        }
    }

    /// Refuse an anonymous caller where this method needs a token.
    pub fn admit(self, app: &App, principal: Option<&Principal>) -> Result<(), McpError> {
        let required = app.auth.enabled()
            && (!app.auth.public_discovery
                || (self.policy().token == TokenRule::AlwaysOnceSourcesList
                    && app.pager.has_sources()));
        if required && principal.is_none() {
            return Err(McpError::Unauthorized {
                error: AuthError::Missing,
                scopes: app.pager.source_scopes(),
            });
        }
        Ok(())
    }

    /// How an error answer may be cached: a listing stays private whatever
    /// the outcome.
    pub fn error_caching(self, app: &App) -> Caching {
        match (self.policy().cache, Caching::of(self, app, false)) {
            (CacheRule::Listing, Caching::Private) => Caching::Private,
            _ => Caching::Uncached,
        }
    }

    /// `Cache-Control` of an error answer: private for a listing, else not
    /// to be stored.
    pub fn error_cache_control(self, app: &App) -> &'static str {
        self.error_caching(app).header().unwrap_or("no-store")
    }
}

/// How one answer may be cached: the result's `ttlMs`/`cacheScope` and the
/// `Cache-Control` header both come from this, so they cannot disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caching {
    Uncached,
    Public { ttl_ms: u64 },
    Private,
}

impl Caching {
    /// `public_resource`: for reads, whether the URI is a public static resource.
    pub fn of(method: Method, app: &App, public_resource: bool) -> Caching {
        match method.policy().cache {
            CacheRule::Uncached => Caching::Uncached,
            CacheRule::Public { ttl_ms } => Caching::Public { ttl_ms },
            // Listings that depend on who asks are private, with a zero lifetime.
            CacheRule::Listing if app.pager.has_sources() || app.auth.enabled() => Caching::Private,
            CacheRule::Listing => Caching::Public { ttl_ms: 0 },
            CacheRule::PerResource if public_resource => Caching::Public { ttl_ms: 0 },
            CacheRule::PerResource => Caching::Private,
        }
    }

    /// `(ttlMs, cacheScope)` for 2026-07-28 results.
    pub fn fields(self) -> Option<(u64, CacheScope)> {
        match self {
            Caching::Uncached => None,
            Caching::Public { ttl_ms } => Some((ttl_ms, CacheScope::Public)),
            Caching::Private => Some((0, CacheScope::Private)),
        }
    }

    /// "The response is private and has a zero cache lifetime."
    pub fn header(self) -> Option<&'static str> {
        (self == Caching::Private).then_some(PRIVATE_NO_STORE)
    }

    /// The caching of a response that carries several answers.
    pub fn strictest(self, other: Caching) -> Caching {
        match (self, other) {
            (Caching::Private, _) | (_, Caching::Private) => Caching::Private,
            (Caching::Public { ttl_ms: a }, Caching::Public { ttl_ms: b }) => {
                Caching::Public { ttl_ms: a.min(b) }
            }
            _ => Caching::Uncached,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_the_table() {
        for (m, p) in TABLE.iter().filter(|(m, _)| *m != Method::Unknown) {
            assert_eq!(Method::parse(p.name), *m);
            assert_eq!(m.policy().name, p.name);
        }
        assert_eq!(Method::parse(""), Method::Unknown);
        assert_eq!(Method::parse("tools/list"), Method::Unknown);
        assert!(!Method::Initialize.policy().batchable);
        assert!(Method::Ping.available_in(Version::V2025_03_26));
        assert!(!Method::Ping.available_in(Version::V2026_07_28));
        assert!(Method::Discover.available_in(Version::V2026_07_28));
        assert!(!Method::Unknown.available_in(Version::V2026_07_28));
    }

    #[test]
    fn the_strictest_caching_wins() {
        let public = Caching::Public { ttl_ms: 5 };
        assert_eq!(public.strictest(Caching::Private), Caching::Private);
        assert_eq!(
            public.strictest(Caching::Public { ttl_ms: 2 }),
            Caching::Public { ttl_ms: 2 }
        );
        assert_eq!(public.strictest(Caching::Uncached), Caching::Uncached);
        assert_eq!(Caching::Private.header(), Some(PRIVATE_NO_STORE));
        assert_eq!(public.header(), None);
    }
}
