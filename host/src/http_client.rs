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
