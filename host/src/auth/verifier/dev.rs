//! Dev mode: HS256 tokens signed with a secret the host generates on first
//! run and keeps in its state directory (`dev-secret`: 32 raw bytes, 0600). `emseepea token` mints them; the
//! server refuses them unless the config says `mode = "dev"`.

use crate::auth::config::{AuthConfig, AuthMethod};
use crate::state;
use jsonwebtoken::{EncodingKey, Header};
use serde_json::json;
use std::path::{Path, PathBuf};

pub const ISSUER: &str = "emseepea-dev";

fn secret_path(state_dir: &Path) -> PathBuf {
    state_dir.join("dev-secret")
}

/// The dev secret: exactly 32 random bytes in a 0600 file, made when
/// missing (see [`crate::state`] for how two starts at once agree on it).
pub fn load_or_create_secret(
    state_dir: &Path,
) -> Result<[u8; state::SECRET_LEN], state::StateError> {
    state::load_or_create_secret(&secret_path(state_dir))
}

/// What a minted token says.
pub struct TokenRequest<'a> {
    pub subject: Option<&'a str>,
    pub scopes: &'a str,
    pub client_id: &'a str,
    pub ttl_s: u64,
    pub audience: &'a str,
}

/// Why `emseepea token` cannot mint.
#[derive(Debug, thiserror::Error)]
pub enum MintError {
    #[error("{}: tokens can only be minted when [auth] mode = \"dev\"", .0.display())]
    NotDevMode(PathBuf),
    #[error("--sub must be 1..=256 characters without control characters")]
    Subject,
    #[error(transparent)]
    Secret(#[from] state::StateError),
    #[error("the system clock is before 1970")]
    Clock,
    #[error("signing the token: {0}")]
    Sign(#[from] jsonwebtoken::errors::Error),
}

/// Mint a dev token (refused unless `config`, the `[auth]` of
/// `config_file`, is in dev mode); the secret lives in `state_dir`.
pub fn mint(
    config: &AuthConfig,
    config_file: &Path,
    state_dir: &Path,
    req: &TokenRequest,
) -> Result<String, MintError> {
    if !matches!(config.method, AuthMethod::Dev) {
        return Err(MintError::NotDevMode(config_file.to_owned()));
    }
    if let Some(s) = req.subject
        && !crate::auth::valid_subject(s)
    {
        return Err(MintError::Subject);
    }
    let secret = load_or_create_secret(state_dir)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| MintError::Clock)?
        .as_secs();
    let mut claims = json!({
        "iss": ISSUER,
        "aud": req.audience,
        "client_id": req.client_id,
        "scope": req.scopes,
        "iat": now,
        "nbf": now,
        "exp": now + req.ttl_s,
        "jti": hex::encode(rand::random::<[u8; 12]>()),
    });
    if let Some(s) = req.subject {
        claims["sub"] = json!(s);
    }
    Ok(jsonwebtoken::encode(
        &Header::default(),
        &claims,
        &EncodingKey::from_secret(&secret)?,
    )?)
}
