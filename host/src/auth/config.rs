//! Auth's settings: `[auth]`, `[auth.jwt]` and `[auth.introspection]`,
//! checked while parsing into an [`AuthConfig`] whose [`AuthMethod`]
//! carries its own mode's table and no other, and the fetchers' bounds.

use crate::secret::Secret;
use serde::Deserialize;
use std::path::PathBuf;

/// Outbound introspection requests in flight at once; more callers wait.
pub const DEFAULT_MAX_CONCURRENT_INTROSPECTION: usize = 8;
/// How long an inactive (invalid) token's introspection answer is
/// remembered, so a flood of one bad token costs one outbound call.
pub const DEFAULT_INTROSPECTION_NEGATIVE_CACHE_S: u64 = 10;
/// Inactive tokens remembered at most (by hash; oldest forgotten first).
pub const DEFAULT_INTROSPECTION_NEGATIVE_CACHE_ENTRIES: usize = 10_000;

/// Least `[auth.jwt] jwks_refresh_interval_s`: the JWKS is fetched at most
/// once per interval (scheduled, or on an unknown `kid`), so this also bounds
/// how often a stream of made-up `kid`s can make the host call the
/// authorization server.
pub const MIN_JWKS_REFRESH_INTERVAL_S: u64 = 1;
/// Default JWKS refresh interval: a key removed at the authorization server
/// stops verifying here within this long.
pub const DEFAULT_JWKS_REFRESH_INTERVAL_S: u64 = 60;
/// Default `[auth] cache_max_age_s`: a verified token's principal is reused
/// for at most min(`exp`, this long) (introspected revocations show within it).
pub const DEFAULT_TOKEN_CACHE_MAX_AGE_S: u64 = 300;
/// Most `[auth] leeway_s`: five minutes covers any real clock skew; more
/// would accept a token that long after its `exp` (`leeway_s = 1e9` did:
/// expired tokens forever).
pub const MAX_LEEWAY_S: u64 = 300;
/// Most `[auth] cache_max_age_s`: an hour, the same cap an introspected
/// token gets (`introspection.rs`), so a revocation shows within it.
pub const MAX_TOKEN_CACHE_MAX_AGE_S: u64 = 3600;
/// A JWKS larger than this is a fetch error (read in chunks and given up
/// past it, never held whole): real key sets are a few KiB.
pub const MAX_JWKS_BYTES: usize = 1 << 20;
/// An introspection answer larger than this is "unavailable", read the
/// same way: a real one is a few hundred bytes.
pub const MAX_INTROSPECTION_RESPONSE_BYTES: usize = 64 << 10;

/// `auth.mode` as written: which verifier. [`AuthMethod`] is the same choice
/// with that verifier's settings.
#[derive(
    Debug, Clone, Copy, Default, Deserialize, serde::Serialize, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    #[default]
    None,
    Dev,
    Jwt,
    Introspection,
}

impl std::fmt::Display for AuthMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AuthMode::None => "none",
            AuthMode::Dev => "dev",
            AuthMode::Jwt => "jwt",
            AuthMode::Introspection => "introspection",
        })
    }
}

/// `[auth]` as written: `mode` names the verifier, and `[auth.jwt]` or
/// `[auth.introspection]` holds its settings. Checked into [`AuthConfig`]
/// while parsing, so a mode without its table (or a table its mode does not
/// read) never reaches the server.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
struct AuthFile {
    /// How bearer tokens are verified: `none` (refused once a source exports
    /// `inventory` or a resource is protected), `dev` (tokens minted by
    /// `emseepea token`), `jwt` (needs `[auth.jwt]`) or `introspection`
    /// (needs `[auth.introspection]`).
    mode: AuthMode,
    /// `initialize`, `server/discover`, `ping`, `resources/templates/list`
    /// and public reads need no token; `false`: every request does.
    /// `resources/list` always needs one once an inventory source exists.
    public_discovery: bool,
    /// This server's canonical URL, the audience tokens must carry (RFC 8707).
    /// Default: `http://LISTEN/ENDPOINT`.
    resource: Option<String>,
    /// Authorization servers advertised in the protected-resource metadata.
    /// `dev` may leave it empty (the server's own origin); `jwt` and
    /// `introspection` must list one.
    authorization_servers: Vec<String>,
    /// The claim that holds the user id.
    subject_claim: String,
    /// The claims scopes arrive in, each a space-separated string (`scope`)
    /// or an array of strings (`scp`, `roles`); the scopes are their union.
    scope_claims: Vec<String>,
    /// More audiences accepted besides `resource` (an identity provider's
    /// `api://` application URI, say); tokens for any other audience get 401.
    accepted_audiences: Vec<String>,
    /// Clock skew tolerated on `exp` and `nbf`, in seconds.
    leeway_s: u64,
    /// Tokens longer than this are refused without parsing.
    max_token_bytes: usize,
    /// Verified tokens remembered (by hash) until they expire.
    cache_entries: usize,
    /// A remembered token is verified again after at most this long, even
    /// if its `exp` is later (0: never remembered). A changed JWKS flushes them.
    cache_max_age_s: u64,
    /// Allow `http://` (not only `https://`) to a non-loopback JWKS or
    /// introspection endpoint; the startup log names it. Default false.
    allow_plain_http: bool,
    /// JWS access tokens verified with a JWKS (`mode = "jwt"`).
    jwt: Option<JwtFile>,
    /// RFC 7662 token introspection (`mode = "introspection"`).
    introspection: Option<IntrospectionConfig>,
}

impl Default for AuthFile {
    fn default() -> Self {
        Self {
            mode: AuthMode::None,
            public_discovery: true,
            resource: None,
            authorization_servers: vec![],
            subject_claim: "sub".into(),
            scope_claims: vec!["scope".into(), "scp".into()],
            accepted_audiences: vec![],
            leeway_s: 30,
            max_token_bytes: 8192,
            cache_entries: 10_000,
            cache_max_age_s: DEFAULT_TOKEN_CACHE_MAX_AGE_S,
            allow_plain_http: false,
            jwt: None,
            introspection: None,
        }
    }
}

/// Why an `[auth]` section cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    #[error("auth.mode = \"{mode}\" needs [{table}]")]
    TableMissing { mode: AuthMode, table: &'static str },
    #[error("[{table}] is set but auth.mode = \"{mode}\" does not read it")]
    TableUnused { mode: AuthMode, table: &'static str },
    #[error("[auth.jwt] needs exactly one of jwks_file or jwks_url")]
    JwksSource,
    #[error(
        "[auth.jwt] jwks_refresh_interval_s must be at least {MIN_JWKS_REFRESH_INTERVAL_S}, got {0}"
    )]
    JwksRefreshInterval(u64),
    #[error("auth.introspection.max_concurrent must be positive")]
    IntrospectionConcurrency,
    #[error("[auth] authorization_servers must list at least one server")]
    NoAuthorizationServer,
    #[error("[auth] scope_claims must name at least one claim, and no empty one")]
    ScopeClaims,
    #[error("[auth] accepted_audiences must not hold an empty string")]
    EmptyAudience,
    #[error(
        "{key}: plain http is allowed only to a loopback host (127.0.0.0/8, ::1, localhost): \
         anyone on the path could read the tokens and secrets it carries or swap the keys; \
         use https, or set auth.allow_plain_http = true to accept that"
    )]
    PlainHttp { key: &'static str },
    #[error("{key}: not an https (or loopback http) URL")]
    NotHttpUrl { key: &'static str },
    #[error("auth.leeway_s must be at most {MAX_LEEWAY_S}, got {0}")]
    Leeway(u64),
    #[error("auth.cache_max_age_s must be at most {MAX_TOKEN_CACHE_MAX_AGE_S}, got {0}")]
    CacheMaxAge(u64),
}

/// `url` (the value of `key`) is https, or http to a loopback host, or
/// `allow_plain_http` says plain http anywhere is accepted.
fn check_fetch_url(
    key: &'static str,
    url: &str,
    allow_plain_http: bool,
) -> Result<(), AuthConfigError> {
    let parsed = reqwest::Url::parse(url).map_err(|_| AuthConfigError::NotHttpUrl { key })?;
    let loopback = || {
        let host = parsed.host_str().unwrap_or("");
        let ip = host.trim_start_matches('[').trim_end_matches(']');
        match ip.parse::<std::net::IpAddr>() {
            Ok(ip) => ip.to_canonical().is_loopback(),
            Err(_) => host.eq_ignore_ascii_case("localhost"),
        }
    };
    match parsed.scheme() {
        "https" if parsed.has_host() => Ok(()),
        "http" if parsed.has_host() && (allow_plain_http || loopback()) => Ok(()),
        "http" if parsed.has_host() => Err(AuthConfigError::PlainHttp { key }),
        _ => Err(AuthConfigError::NotHttpUrl { key }),
    }
}

/// `[auth]`, checked: the verifier with the settings only it has, and what
/// every verifier shares.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "AuthFile")]
#[schemars(with = "AuthFile")]
pub struct AuthConfig {
    pub method: AuthMethod,
    /// When true, initialize/discover/ping/templates/list and public reads
    /// need no token. `resources/list` always needs one once an inventory
    /// source exists.
    pub public_discovery: bool,
    /// This server's canonical resource URL (RFC 8707 audience). Default:
    /// `http://LISTEN/ENDPOINT`.
    pub resource: Option<String>,
    /// Authorization servers advertised in the protected-resource metadata.
    /// Dev mode may leave it empty (it advertises the server's own origin);
    /// `jwt` and `introspection` must list one.
    pub authorization_servers: Vec<String>,
    /// Claim that holds the user id.
    pub subject_claim: String,
    /// Claims whose values are the caller's scopes (a space-separated
    /// string or an array of strings each), united: `scope` and `scp` by
    /// default; e.g. `roles` for Entra ID app roles, `permissions` for Auth0 RBAC.
    pub scope_claims: Vec<String>,
    /// Audiences accepted besides the resource URL, for providers that
    /// cannot put the URL in `aud` (an Entra ID `api://` App ID URI or
    /// client id, an Okta authorization server's audience). The guest
    /// still sees the resource URL as the audience.
    pub accepted_audiences: Vec<String>,
    /// Clock skew tolerated on `exp`/`nbf`; at most [`MAX_LEEWAY_S`].
    pub leeway_s: u64,
    /// Tokens longer than this are rejected without parsing.
    pub max_token_bytes: usize,
    /// Verified tokens remembered (by hash) until they expire.
    pub cache_entries: usize,
    /// A remembered token is re-verified after at most this long, even if
    /// its `exp` is later (0: never remembered). At most
    /// [`MAX_TOKEN_CACHE_MAX_AGE_S`].
    pub cache_max_age_s: u64,
    /// Accept `http://` for the JWKS URL and the introspection endpoint to
    /// any host (default: only to a loopback host). Named in the startup log.
    pub allow_plain_http: bool,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self::with_method(AuthMethod::None, AuthFile::default())
    }
}

/// How tokens are verified, with the settings of that way only.
#[derive(Debug, Clone)]
pub enum AuthMethod {
    /// No tokens at all: only valid when no source exports `inventory` and
    /// no resource is protected.
    None,
    /// HS256 tokens minted by `emseepea token` with a secret kept in the state dir.
    Dev,
    /// JWS access tokens verified with a JWKS.
    Jwt(JwtConfig),
    /// RFC 7662 token introspection.
    Introspection(IntrospectionConfig),
}

impl TryFrom<AuthFile> for AuthConfig {
    type Error = AuthConfigError;

    fn try_from(mut f: AuthFile) -> Result<Self, AuthConfigError> {
        let unused = |table: &'static str| AuthConfigError::TableUnused {
            mode: f.mode,
            table,
        };
        let missing = |table: &'static str| AuthConfigError::TableMissing {
            mode: f.mode,
            table,
        };
        let method = match (f.mode, f.jwt.take(), f.introspection.take()) {
            (AuthMode::None, None, None) => AuthMethod::None,
            (AuthMode::Dev, None, None) => AuthMethod::Dev,
            (AuthMode::Jwt, Some(jwt), None) => AuthMethod::Jwt(jwt.try_into()?),
            (AuthMode::Introspection, None, Some(i)) if i.max_concurrent == 0 => {
                return Err(AuthConfigError::IntrospectionConcurrency);
            }
            (AuthMode::Introspection, None, Some(i)) => AuthMethod::Introspection(i),
            (AuthMode::Jwt, None, _) => return Err(missing("auth.jwt")),
            (AuthMode::Introspection, _, None) => return Err(missing("auth.introspection")),
            (AuthMode::Jwt, Some(_), Some(_)) => return Err(unused("auth.introspection")),
            (_, Some(_), _) => return Err(unused("auth.jwt")),
            (_, None, Some(_)) => return Err(unused("auth.introspection")),
        };
        match &method {
            AuthMethod::Jwt(JwtConfig {
                jwks: JwksSource::Url(url),
                ..
            }) => check_fetch_url("auth.jwt.jwks_url", url, f.allow_plain_http)?,
            AuthMethod::Introspection(i) => check_fetch_url(
                "auth.introspection.endpoint",
                &i.endpoint,
                f.allow_plain_http,
            )?,
            _ => {}
        }
        if f.leeway_s > MAX_LEEWAY_S {
            return Err(AuthConfigError::Leeway(f.leeway_s));
        }
        if f.cache_max_age_s > MAX_TOKEN_CACHE_MAX_AGE_S {
            return Err(AuthConfigError::CacheMaxAge(f.cache_max_age_s));
        }
        // Dev mode advertises the server's own origin when none is listed.
        if matches!(method, AuthMethod::Jwt(_) | AuthMethod::Introspection(_))
            && f.authorization_servers.is_empty()
        {
            return Err(AuthConfigError::NoAuthorizationServer);
        }
        if f.scope_claims.is_empty() || f.scope_claims.iter().any(String::is_empty) {
            return Err(AuthConfigError::ScopeClaims);
        }
        if f.accepted_audiences.iter().any(String::is_empty) {
            return Err(AuthConfigError::EmptyAudience);
        }
        Ok(Self::with_method(method, f))
    }
}

impl AuthConfig {
    /// `method` with the settings every mode shares, from `f`.
    fn with_method(method: AuthMethod, f: AuthFile) -> Self {
        Self {
            method,
            public_discovery: f.public_discovery,
            resource: f.resource,
            authorization_servers: f.authorization_servers,
            subject_claim: f.subject_claim,
            scope_claims: f.scope_claims,
            accepted_audiences: f.accepted_audiences,
            leeway_s: f.leeway_s,
            max_token_bytes: f.max_token_bytes,
            cache_entries: f.cache_entries,
            cache_max_age_s: f.cache_max_age_s,
            allow_plain_http: f.allow_plain_http,
        }
    }
}

/// Where `[auth.jwt]` reads its keys.
#[derive(Debug, Clone)]
pub enum JwksSource {
    /// A JWKS file, read once at startup (relative to the config file).
    File(PathBuf),
    /// A JWKS URL, fetched at startup and refreshed.
    Url(String),
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct JwtFile {
    /// The `iss` every token must carry.
    issuer: String,
    /// A JWKS file, read at startup (relative to the config file); exactly
    /// one of `jwks_file` and `jwks_url`.
    jwks_file: Option<PathBuf>,
    /// A JWKS URL, fetched at startup and refreshed.
    jwks_url: Option<String>,
    /// A `jwks_url` is refetched this often, and on an unknown `kid` at most
    /// once per interval: a key removed at the issuer stops verifying within
    /// one interval.
    #[serde(default = "default_jwks_refresh_s")]
    #[schemars(range(min = 1))]
    jwks_refresh_interval_s: u64,
    /// Timeout of one JWKS fetch.
    #[serde(default = "default_fetch_timeout_ms")]
    jwks_timeout_ms: u64,
    /// If set, the JOSE `typ` header must equal it (e.g. `at+jwt`, RFC 9068).
    required_typ: Option<String>,
}

/// `[auth.jwt]`, checked.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    pub issuer: String,
    pub jwks: JwksSource,
    /// The JWKS is refetched every this many seconds, and on an unknown
    /// `kid` (at most once per interval). At least [`MIN_JWKS_REFRESH_INTERVAL_S`].
    pub jwks_refresh_interval_s: u64,
    pub jwks_timeout_ms: u64,
    /// If set, the JOSE `typ` header must equal it (e.g. `at+jwt`, RFC 9068).
    pub required_typ: Option<String>,
}

impl TryFrom<JwtFile> for JwtConfig {
    type Error = AuthConfigError;

    fn try_from(f: JwtFile) -> Result<Self, AuthConfigError> {
        let jwks = match (f.jwks_file, f.jwks_url) {
            (Some(file), None) => JwksSource::File(file),
            (None, Some(url)) => JwksSource::Url(url),
            _ => return Err(AuthConfigError::JwksSource),
        };
        if f.jwks_refresh_interval_s < MIN_JWKS_REFRESH_INTERVAL_S {
            return Err(AuthConfigError::JwksRefreshInterval(
                f.jwks_refresh_interval_s,
            ));
        }
        Ok(Self {
            issuer: f.issuer,
            jwks,
            jwks_refresh_interval_s: f.jwks_refresh_interval_s,
            jwks_timeout_ms: f.jwks_timeout_ms,
            required_typ: f.required_typ,
        })
    }
}

fn default_jwks_refresh_s() -> u64 {
    DEFAULT_JWKS_REFRESH_INTERVAL_S
}
fn default_fetch_timeout_ms() -> u64 {
    5_000
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionConfig {
    /// The RFC 7662 introspection endpoint.
    pub endpoint: String,
    /// This server's client id at the authorization server.
    pub client_id: String,
    /// Its client secret (HTTP Basic authentication). Exactly one of
    /// `client_secret`, `client_secret_file` and `client_secret_env`
    /// (`config/secret.rs`); after `Config::load`, the value is here and the
    /// other two are `None`.
    pub client_secret: Option<Secret>,
    /// A file holding the client secret (one trailing newline is dropped).
    pub client_secret_file: Option<PathBuf>,
    /// An environment variable holding the client secret.
    pub client_secret_env: Option<String>,
    /// Timeout of one introspection call (and of waiting for a free one).
    #[serde(default = "default_fetch_timeout_ms")]
    pub timeout_ms: u64,
    /// Expected issuer (`iss` of the introspection response), if the server sends one.
    pub issuer: Option<String>,
    /// Introspection requests in flight at once (one per distinct token).
    #[serde(default = "default_max_concurrent_introspection")]
    pub max_concurrent: usize,
    /// Of those, how many one peer (an IPv4 address, an IPv6 /64) may hold;
    /// default a quarter (at least 1). Behind a proxy every client is the
    /// proxy's address: raise it there, up to `max_concurrent`.
    pub max_concurrent_per_peer: Option<usize>,
    /// Seconds an inactive token's answer is remembered (0: not at all).
    #[serde(default = "default_introspection_negative_cache_s")]
    pub negative_cache_s: u64,
    /// Inactive tokens remembered at most.
    #[serde(default = "default_introspection_negative_cache_entries")]
    pub negative_cache_entries: usize,
}

fn default_max_concurrent_introspection() -> usize {
    DEFAULT_MAX_CONCURRENT_INTROSPECTION
}
fn default_introspection_negative_cache_s() -> u64 {
    DEFAULT_INTROSPECTION_NEGATIVE_CACHE_S
}
fn default_introspection_negative_cache_entries() -> usize {
    DEFAULT_INTROSPECTION_NEGATIVE_CACHE_ENTRIES
}
