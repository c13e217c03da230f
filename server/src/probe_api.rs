//! `POST /api/probe`: run a walkthrough-scale probe from a posted
//! configuration and answer its signed receipt.
//!
//! The body is a small JSON object — `fixes` (`none`, `all` or a comma
//! list), optional `seed` and `poison_on_free` (`off`, `log`, `refuse`) —
//! at most [`MAX_BODY_BYTES`]. At most [`MAX_CONCURRENT`] probes run at
//! once (more get 429) and each gets [`TIME_LIMIT`] (504 past it). Only the
//! walkthrough scale runs here: the incident scale needs about 1 GiB of KV
//! and belongs to `kvw probe` on the command line. The signing key is loaded
//! on the first probe (`--signing-key`, else the local key). With `--key`
//! (or `--keys-file`) given, a probe needs one of those keys in its
//! `Authorization: Bearer` header: without it the request is refused with
//! 401 from its headers, before its body is read, a probe runs or anything
//! is signed.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use kvw_evidence::{PoisonMode, Scale, Signer};
use serde_json::Value;

use crate::api_error::ApiError;
use crate::guard::Guard;
use crate::tenant_keys::Keys;

/// Largest probe request body.
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// Probes running at once.
pub const MAX_CONCURRENT: usize = 2;
/// Longest one probe may run.
pub const TIME_LIMIT: Duration = Duration::from_secs(30);

/// The probe API's state.
pub struct ProbeApi {
    key: Option<PathBuf>,
    /// Who may run a probe: with keys configured, only a request carrying
    /// one of them (checked before the body is read, [`crate::guard`]).
    keys: Arc<Keys>,
    body_time: Duration,
    signer: OnceLock<Signer>,
    slots: Arc<tokio::sync::Semaphore>,
}

impl ProbeApi {
    pub fn new(key: Option<PathBuf>) -> Self {
        ProbeApi {
            key,
            keys: Arc::new(Keys::default()),
            body_time: crate::guard::BODY_TIME_LIMIT,
            signer: OnceLock::new(),
            slots: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT)),
        }
    }

    /// Require one of `keys` on every probe (none: open, a local preview).
    pub fn with_keys(mut self, keys: Keys) -> Self {
        self.keys = Arc::new(keys);
        self
    }

    /// Longest a probe request's body may take to arrive.
    pub fn with_body_time(mut self, body_time: Duration) -> Self {
        self.body_time = body_time;
        self
    }

    fn signer(&self) -> Result<&Signer, ApiError> {
        if let Some(s) = self.signer.get() {
            return Ok(s);
        }
        let loaded = match &self.key {
            Some(k) => Signer::load(k),
            None => Signer::load_or_create_default().map(|(s, _)| s),
        }
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("no signing key: {e}"),
            )
        })?;
        Ok(self.signer.get_or_init(|| loaded))
    }
}

/// The probe API's route.
pub fn router(state: Arc<ProbeApi>) -> Router {
    let guard = Arc::new(Guard {
        keys: state.keys.clone(),
        key_when_open: false,
        max_body: MAX_BODY_BYTES,
        body_time: state.body_time,
    });
    Router::new()
        .route("/api/probe", post(probe))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(guard, crate::guard::guard))
        .with_state(state)
}

fn config(
    body: Result<Bytes, BytesRejection>,
) -> Result<kvw_engine::config::ValidConfig, ApiError> {
    let bytes = body.map_err(|r| ApiError::new(r.status(), r.body_text()))?;
    let v: Value = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|t| serde_json::from_str(t).ok())
        .filter(Value::is_object)
        .ok_or_else(|| ApiError::bad_request("the body must be a JSON object"))?;
    if let Some(k) = v.as_object().and_then(|m| {
        m.keys()
            .find(|k| !["fixes", "seed", "poison_on_free", "scale"].contains(&k.as_str()))
    }) {
        return Err(ApiError::bad_request(format!("unknown field '{k}'")));
    }
    if v.get("scale").is_some_and(|s| s != "walkthrough") {
        return Err(ApiError::bad_request(
            "only the walkthrough scale runs over the API; use `kvw probe` for the incident scale",
        ));
    }
    let fixes: kvw_evidence::FixSet = match v.get("fixes") {
        None => kvw_evidence::FixSet::NONE,
        Some(Value::String(s)) => s
            .parse()
            .map_err(|e: kvw_evidence::fix_set::UnknownFix| ApiError::bad_request(e.to_string()))?,
        Some(_) => return Err(ApiError::bad_request("'fixes' must be a string")),
    };
    let seed = match v.get("seed") {
        None => kvw_engine::config::DEFAULT_SEED,
        Some(s) => s
            .as_u64()
            .ok_or_else(|| ApiError::bad_request("'seed' must be a non-negative integer"))?,
    };
    let poison_on_free = match v.get("poison_on_free").and_then(Value::as_str) {
        None => PoisonMode::Off,
        Some(name) => name
            .parse()
            .map_err(|e| ApiError::bad_request(format!("poison_on_free: {e}")))?,
    };
    kvw_engine::config::ProbeSpec {
        poison_on_free,
        seed,
        ..kvw_engine::config::ProbeSpec::new(Scale::Walkthrough, fixes)
    }
    .validate()
    .map_err(|e| ApiError::bad_request(e.to_string()))
}

async fn probe(State(api): State<Arc<ProbeApi>>, body: Result<Bytes, BytesRejection>) -> Response {
    let config = match config(body) {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let Ok(_permit) = api.slots.clone().try_acquire_owned() else {
        return ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too many probes running; retry shortly",
        )
        .into_response();
    };
    let signer = match api.signer() {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let job = tokio::task::spawn_blocking(move || kvw_engine::probe::run(&config));
    let predicate = match tokio::time::timeout(TIME_LIMIT, job).await {
        Ok(Ok(Ok(p))) => p,
        Ok(Ok(Err(e))) => return ApiError::bad_request(e.to_string()).into_response(),
        Ok(Err(_)) => {
            return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "the probe stopped")
                .into_response()
        }
        Err(_) => {
            return ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "the probe ran past its time limit",
            )
            .into_response()
        }
    };
    tracing::info!(fixes = ?predicate.config.fixes, leak = predicate.verdict.leak, "probe");
    match kvw_evidence::sign_statement("probe.receipt.json", &predicate, signer) {
        Ok(env) => (
            [(header::CONTENT_TYPE, "application/json")],
            env.to_json_pretty(),
        )
            .into_response(),
        Err(e) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
