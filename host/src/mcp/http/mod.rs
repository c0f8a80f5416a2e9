//! HTTP for the MCP endpoint: the guards a request passes before anything
//! is parsed (`guards`), the bounded body read (`body`), the per-version
//! header rules (`headers`), and the response builders below.

pub mod body;
pub mod config;
pub mod cors;
pub mod guards;
pub mod headers;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::Full;

pub type HttpResponse = Response<Full<Bytes>>;

/// "The response is private and has a zero cache lifetime."
pub const PRIVATE_NO_STORE: &str = "private, max-age=0, no-store";

fn response(status: StatusCode, content_type: Option<&'static str>, body: Vec<u8>) -> HttpResponse {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Some(ct) = content_type {
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    }
    r
}

pub fn json(status: StatusCode, body: Vec<u8>) -> HttpResponse {
    response(status, Some("application/json"), body)
}

pub fn text(status: StatusCode, message: &str) -> HttpResponse {
    response(
        status,
        Some("text/plain; charset=utf-8"),
        message.as_bytes().to_vec(),
    )
}

/// No body: 202 for notifications and responses, 200 for DELETE.
pub fn empty(status: StatusCode) -> HttpResponse {
    response(status, None, Vec::new())
}

/// A request that was cancelled gets a stream that ends without a message.
pub fn cancelled() -> HttpResponse {
    let mut r = response(StatusCode::OK, Some("text/event-stream"), Vec::new());
    no_store(&mut r);
    r
}

pub fn cache_control(r: &mut HttpResponse, value: &'static str) {
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static(value));
}

pub fn no_store(r: &mut HttpResponse) {
    cache_control(r, "no-store");
}
