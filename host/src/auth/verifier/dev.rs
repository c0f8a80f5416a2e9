//! Dev mode: HS256 tokens signed with a secret the host generates on first
//! run and keeps in its state directory. `emseepea token` mints them; the
//! server refuses them unless the config says `mode = "dev"`.

use super::jwt::JwtVerifier;
use crate::config::{AuthMode, Config};
use jsonwebtoken::{EncodingKey, Header};
use serde_json::json;
use std::path::{Path, PathBuf};

pub const ISSUER: &str = "emseepea-dev";

fn secret_path(state_dir: &Path) -> PathBuf {
    state_dir.join("dev-secret")
}

/// The dev secret, made (32 random bytes, mode 0600) when missing.
pub fn load_or_create_secret(state_dir: &Path) -> anyhow::Result<Vec<u8>> {
    let path = secret_path(state_dir);
    if let Ok(text) = std::fs::read_to_string(&path) {
        return hex::decode(text.trim()).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()));
    }
    std::fs::create_dir_all(state_dir)?;
    let secret: [u8; 32] = rand::random();
    let tmp = path.with_extension("tmp");
    {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut f = options.open(&tmp)?;
        f.write_all(hex::encode(secret).as_bytes())?;
    }
    // Another process may have raced us: the first rename wins, re-read it.
    if std::fs::hard_link(&tmp, &path).is_err() {
        let _ = std::fs::remove_file(&tmp);
        let text = std::fs::read_to_string(&path)?;
        return hex::decode(text.trim()).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()));
    }
    let _ = std::fs::remove_file(&tmp);
    Ok(secret.to_vec())
}

pub fn verifier(config: &Config, resource: &str) -> anyhow::Result<JwtVerifier> {
    let secret = load_or_create_secret(&config.state_dir)?;
    Ok(JwtVerifier::hmac(&secret, ISSUER, resource, config))
}

/// What a minted token says.
pub struct TokenRequest<'a> {
    pub subject: Option<&'a str>,
    pub scopes: &'a str,
    pub client_id: &'a str,
    pub ttl_s: u64,
    pub audience: &'a str,
}

/// Mint a dev token (refused unless the config is in dev mode).
pub fn mint(config: &Config, req: &TokenRequest) -> anyhow::Result<String> {
    if config.auth.mode != AuthMode::Dev {
        anyhow::bail!(
            "{}: tokens can only be minted when [auth] mode = \"dev\"",
            config.file.display()
        );
    }
    if let Some(s) = req.subject
        && !crate::auth::valid_subject(s)
    {
        anyhow::bail!("--sub must be 1..=256 characters without control characters");
    }
    let secret = load_or_create_secret(&config.state_dir)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
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
