//! The request guard: what the headers decide before any body is read.
//!
//! A client that sends headers and then a body one byte at a time must not
//! hold the server's connection slots, and a client without a key must not
//! make it read (or act on) anything. [`guard`] runs in front of the
//! endpoint's and the probe API's handlers and, in this order:
//!
//! 1. refuses a request with more than one `Authorization` header (400):
//!    two keys are ambiguous, and taking the first lets a proxy's header
//!    and a client's disagree;
//! 2. checks the key from the headers ([`Keys::tenant`]) and refuses a
//!    missing or unknown one at once (401), without reading the body;
//! 3. refuses a declared `Content-Length` above the route's limit (413);
//! 4. reads the body within [`BODY_TIME_LIMIT`] in total (408 past it, for
//!    a slow `Content-Length` body and a chunked body that never ends
//!    alike) and at most the route's limit of bytes (413).
//!
//! Every refusal closes the connection, so what the client had not sent is
//! never read.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api_error::ApiError;
use crate::tenant_keys::Keys;

/// Longest the whole request body may take to arrive.
pub const BODY_TIME_LIMIT: Duration = Duration::from_secs(10);

/// What a route requires before its handler runs.
#[derive(Debug, Clone)]
pub struct Guard {
    pub keys: Arc<Keys>,
    /// With no key configured: whether a request must still carry a
    /// well-formed bearer key (the endpoint names tenants by it) or may come
    /// without one (the probe API of a local preview).
    pub key_when_open: bool,
    /// Largest body, in bytes.
    pub max_body: usize,
    /// Longest the body may take to arrive.
    pub body_time: Duration,
}

/// The refusal, with the connection closed after it.
fn refuse(e: ApiError) -> Response {
    let mut r = e.into_response();
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// The middleware: see the module documentation.
pub async fn guard(State(g): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let auth: Vec<_> = request
        .headers()
        .get_all(header::AUTHORIZATION)
        .iter()
        .collect();
    if auth.len() > 1 {
        return refuse(ApiError::bad_request(
            "more than one Authorization header; send exactly one",
        ));
    }
    let value = auth.first().and_then(|v| v.to_str().ok());
    let needs_key = !g.keys.is_open() || g.key_when_open;
    if needs_key && g.keys.tenant(value).is_none() {
        return refuse(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Incorrect or missing API key: send 'Authorization: Bearer <key>'",
        ));
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > g.max_body as u64) {
        return refuse(too_large(g.max_body));
    }
    let (parts, body) = request.into_parts();
    let read = axum::body::to_bytes(body, g.max_body);
    let bytes = match tokio::time::timeout(g.body_time, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            let too_big = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            return refuse(if too_big {
                too_large(g.max_body)
            } else {
                ApiError::bad_request("the request body could not be read")
            });
        }
        Err(_) => {
            tracing::info!(path = %parts.uri.path(), "request body too slow");
            return refuse(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {} s",
                    g.body_time.as_secs()
                ),
            ));
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

fn too_large(max: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the request body is larger than {max} bytes"),
    )
}
