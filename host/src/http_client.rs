//! The one outbound HTTP client configuration the host itself uses (JWKS,
//! token introspection): rustls with the ring provider, no redirects.

pub fn client() -> anyhow::Result<reqwest::Client> {
    // reqwest is built without a default crypto provider; ring is the one
    // wasmtime-wasi-http already brings.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Ok(reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?)
}
