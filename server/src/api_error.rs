//! Errors in the OpenAI error shape: `{"error": {"message", "type", "param", "code"}}`.
//!
//! Clients (the official SDKs included) read `error.message` and the HTTP
//! status; every refusal of the endpoint goes through here so the shape and
//! the status never disagree.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// One refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub param: Option<&'static str>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            param: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn param(mut self, p: &'static str) -> Self {
        self.param = Some(p);
        self
    }

    /// OpenAI's `type` for a status.
    fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            401 => "authentication_error",
            404 => "not_found_error",
            413 | 400 | 422 => "invalid_request_error",
            429 => "rate_limit_error",
            s if s >= 500 => "server_error",
            _ => "invalid_request_error",
        }
    }

    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({
            "error": {
                "message": self.message,
                "type": self.kind(),
                "param": self.param,
                "code": self.status.as_u16(),
            }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}
