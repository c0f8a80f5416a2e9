//! The one outbound HTTP client configuration the host itself uses (JWKS,
//! token introspection): rustls with the ring provider, no redirects; and
//! the one TLS configuration of the host's own hyper clients (guests'
//! outbound HTTP, the trace exporter).

use std::sync::{Arc, OnceLock};

pub fn client() -> Result<reqwest::Client, reqwest::Error> {
    // reqwest is built without a default crypto provider; ring is the one
    // wasmtime-wasi-http already brings.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
}

/// Why a response could not be read within its cap.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    #[error("the response is larger than {0} bytes")]
    TooLarge(usize),
}

/// The body of `resp`, read chunk by chunk and given up past `cap` bytes:
/// a huge (or endless) answer costs at most `cap` bytes of memory, never
/// its announced or actual size.
pub async fn read_capped(mut resp: reqwest::Response, cap: usize) -> Result<Vec<u8>, FetchError> {
    if resp.content_length().is_some_and(|n| n > cap as u64) {
        return Err(FetchError::TooLarge(cap));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        if body.len() + chunk.len() > cap {
            return Err(FetchError::TooLarge(cap));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// rustls with the ring provider and the web PKI roots, built once and
/// shared by every hyper client of the host.
pub fn public_tls_config() -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, rustls::Error>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            };
            Ok(Arc::new(
                rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()?
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            ))
        })
        .clone()
}
