//! The OpenAI-compatible endpoint: `/v1/models`, `/v1/completions`,
//! `/v1/chat/completions` (plain and SSE streaming), SGLang's
//! `/get_server_info`, `/version`, vLLM's `/tokenize`, and `/healthz`.
//!
//! **model-assumption `declared-release`**: the endpoint declares, as its
//! `version`, the SGLang release whose upstream changes are exactly the
//! cluster's upstream fixes (`--fixes none` declares 0.5.19, `--fixes all`
//! the newest release of the table), from the one release table
//! ([`kvw_evidence::upstream_run::release_with`]); a set no release carries
//! (#38935 without #36988) declares none. `kvw_version` says what it is.
//!
//! The bearer key names the tenant ([`crate::tenant_keys`]). Every refusal uses the
//! OpenAI error shape ([`crate::api_error`]); the body is parsed by hand so
//! malformed JSON, invalid UTF-8, missing fields, oversized bodies and
//! absurd `max_tokens` each get their own 4xx and message.
//!
//! **model-assumption `char-tokenizer`**: one token per character (the
//! engine's [`kvw_engine::attention::encode`]: ASCII as itself, anything else as
//! `?`); a chat's prompt is its messages' contents joined by newlines, with
//! no chat template. The model answers by attention over the KV it reads,
//! so on a correct cluster it echoes its own prompt from position 1.
//!
//! Logs carry tenant, request id, status and token counts, never prompt or
//! answer text, so no route (logs included) shows a tenant another's data.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::api_error::ApiError;
use crate::guard::Guard;
use crate::service::{EngineService, ServiceError};
use crate::tenant_keys::Keys;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// Largest `max_tokens` accepted.
pub const MAX_TOKENS_LIMIT: u32 = 256;
/// `max_tokens` when the request gives none.
pub const DEFAULT_MAX_TOKENS: u32 = 16;
/// Longest a completion may take before the client gets 504.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(60);
/// Completions in flight at once; more get 429.
pub const MAX_IN_FLIGHT: usize = 512;

/// Everything the endpoint's handlers share.
pub struct OpenAi {
    pub service: EngineService,
    pub keys: Arc<Keys>,
    pub model: String,
    /// Longest a request body may take to arrive ([`crate::guard`]).
    pub body_time: Duration,
    slots: tokio::sync::Semaphore,
}

impl OpenAi {
    pub fn new(service: EngineService, keys: Keys, model: String) -> Self {
        OpenAi {
            service,
            keys: Arc::new(keys),
            model,
            body_time: crate::guard::BODY_TIME_LIMIT,
            slots: tokio::sync::Semaphore::new(MAX_IN_FLIGHT),
        }
    }
}

/// The endpoint's routes, behind the request guard: the key is checked
/// from the headers before any body is read.
pub fn router(state: Arc<OpenAi>) -> Router {
    let guard = Arc::new(Guard {
        keys: state.keys.clone(),
        key_when_open: true,
        max_body: MAX_BODY_BYTES,
        body_time: state.body_time,
    });
    let worker = state.service.shape.role.is_some();
    let routes = Router::new()
        .route("/v1/models", get(models))
        .route("/get_server_info", get(server_info))
        .route("/version", get(version))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/tokenize", post(tokenize));
    let routes = if worker {
        crate::pd_worker::keyed_routes(routes)
    } else {
        routes
    };
    let routes = routes
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(guard, crate::guard::guard))
        // Added after the guard: a health check needs no key.
        .route("/healthz", get(|| async { "ok\n" }));
    let routes = if worker {
        crate::pd_worker::open_routes(routes)
    } else {
        routes
    };
    routes.with_state(state)
}

pub(crate) fn tenant<'a>(s: &'a OpenAi, headers: &'a HeaderMap) -> Result<&'a str, ApiError> {
    let auth = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    s.keys.tenant(auth).ok_or_else(|| {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Incorrect or missing API key: send 'Authorization: Bearer <key>'",
        )
    })
}

async fn models(State(s): State<Arc<OpenAi>>, headers: HeaderMap) -> Response {
    if let Err(e) = tenant(&s, &headers) {
        return e.into_response();
    }
    Json(json!({
        "object": "list",
        "data": [{
            "id": s.model,
            "object": "model",
            "created": 0,
            "owned_by": "kvwitness",
            "max_model_len": s.service.shape.context_len,
        }]
    }))
    .into_response()
}

/// SGLang's `/get_server_info` fields an auditor reads to size prompts.
async fn server_info(State(s): State<Arc<OpenAi>>, headers: HeaderMap) -> Response {
    if let Err(e) = tenant(&s, &headers) {
        return e.into_response();
    }
    let shape = &s.service.shape;
    Json(json!({
        "version": declared_release(&s.service.shape.fixes),
        "kvw_version": env!("CARGO_PKG_VERSION"),
        "model_path": s.model,
        "context_length": shape.context_len,
        "max_total_num_tokens": shape.prefill_pool_tokens,
        "page_size": shape.page_size,
        "disaggregation_mode": "prefill-decode",
        "fixes": shape.fixes.iter().map(|f| f.name()).collect::<Vec<_>>(),
        "prefix_cache": shape.prefix_cache.name(),
    }))
    .into_response()
}

/// The SGLang release the cluster's upstream fixes are (model-assumption
/// `declared-release`).
fn declared_release(fixes: &[kvw_evidence::Fix]) -> Option<&'static str> {
    kvw_evidence::upstream_run::release_with(fixes)
}

/// `GET /version` (SGLang's and vLLM's shape): `{"version"}`, or 404 when
/// the cluster's fixes are no release's.
async fn version(State(s): State<Arc<OpenAi>>, headers: HeaderMap) -> Response {
    if let Err(e) = tenant(&s, &headers) {
        return e.into_response();
    }
    match declared_release(&s.service.shape.fixes) {
        Some(v) => Json(json!({"version": v})).into_response(),
        None => ApiError::new(
            StatusCode::NOT_FOUND,
            "this cluster's fixes are no SGLang release's; it declares no version",
        )
        .into_response(),
    }
}

/// What a completion request asked for, once validated.
pub(crate) struct Ask {
    pub prompt: Vec<u32>,
    pub max_tokens: u32,
    pub stream: bool,
    pub cache_salt: Option<String>,
    /// The router's bootstrap fields, on a worker of a split pair.
    pub bootstrap: Option<kvw_engine::live::BootstrapFields>,
}

/// Parse the body into a JSON object, refusing what is not one.
/// A tenant's request body as a JSON object: the tenant is checked first, so
/// an unknown key is refused before its body is read.
pub(crate) fn tenant_body(
    s: &OpenAi,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<serde_json::Map<String, Value>, ApiError> {
    tenant(s, headers)?;
    parse_body(body)
}

fn parse_body(
    body: Result<Bytes, BytesRejection>,
) -> Result<serde_json::Map<String, Value>, ApiError> {
    let bytes = body.map_err(|r| ApiError::new(r.status(), r.body_text()))?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| ApiError::bad_request("request body is not valid UTF-8"))?;
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::bad_request("request body must be a JSON object")),
        Err(e) => Err(ApiError::bad_request(format!(
            "request body is not valid JSON: {e}"
        ))),
    }
}

fn common(
    s: &OpenAi,
    map: &serde_json::Map<String, Value>,
    prompt: String,
    max_key: &'static str,
) -> Result<Ask, ApiError> {
    check_model(s, map)?;
    let max_tokens = max_tokens_of(map.get(max_key).or_else(|| map.get("max_tokens")))?;
    let stream = stream_of(map)?;
    let cache_salt = match map.get("cache_salt") {
        None | Some(Value::Null) => None,
        Some(Value::String(salt)) => Some(salt.clone()),
        Some(_) => {
            return Err(ApiError::bad_request("'cache_salt' must be a string").param("cache_salt"))
        }
    };
    let prompt = kvw_engine::attention::encode(&prompt);
    checked_ask(s, map, prompt, max_tokens, stream, cache_salt)
}

/// The prompt's size against the context, and on a split worker the
/// router's bootstrap fields.
pub(crate) fn checked_ask(
    s: &OpenAi,
    map: &serde_json::Map<String, Value>,
    prompt: Vec<u32>,
    max_tokens: u32,
    stream: bool,
    cache_salt: Option<String>,
) -> Result<Ask, ApiError> {
    if prompt.is_empty() {
        return Err(ApiError::bad_request("the prompt is empty").param("prompt"));
    }
    let context = s.service.shape.context_len;
    let asked = prompt.len() as u64 + max_tokens as u64;
    if asked > context {
        return Err(ApiError::bad_request(format!(
            "This model's maximum context length is {context} tokens. However, you requested {asked} tokens ({} in the prompt, {max_tokens} in the completion).",
            asked - max_tokens as u64
        ))
        .param("prompt"));
    }
    let bootstrap = match s.service.shape.role {
        Some(role) => Some(crate::pd_worker::bootstrap_fields(map, role)?),
        None => None,
    };
    Ok(Ask {
        prompt,
        max_tokens,
        stream,
        cache_salt,
        bootstrap,
    })
}

/// `model` must name the served model.
fn check_model(s: &OpenAi, map: &serde_json::Map<String, Value>) -> Result<(), ApiError> {
    match map.get("model") {
        Some(Value::String(m)) if *m == s.model => Ok(()),
        Some(Value::String(m)) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!(
                "The model '{m}' does not exist; this server serves '{}'",
                s.model
            ),
        )
        .param("model")),
        Some(_) => Err(ApiError::bad_request("'model' must be a string").param("model")),
        None => Err(ApiError::bad_request("missing required field 'model'").param("model")),
    }
}

/// `max_tokens` (or the route's own name for it), bounded.
pub(crate) fn max_tokens_of(v: Option<&Value>) -> Result<u32, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(DEFAULT_MAX_TOKENS),
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MAX_TOKENS_LIMIT as u64).contains(&n) => Ok(n as u32),
            _ => Err(ApiError::bad_request(format!(
                "'max_tokens' must be an integer from 1 to {MAX_TOKENS_LIMIT} (got {v})"
            ))
            .param("max_tokens")),
        },
    }
}

/// `stream`, false when absent.
pub(crate) fn stream_of(map: &serde_json::Map<String, Value>) -> Result<bool, ApiError> {
    match map.get("stream") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::bad_request("'stream' must be a boolean").param("stream")),
    }
}

async fn completions(
    State(s): State<Arc<OpenAi>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let ask = (|| {
        let map = tenant_body(&s, &headers, body)?;
        let prompt = prompt_of(&map)?;
        common(&s, &map, prompt, "max_tokens")
    })();
    match ask {
        Ok(ask) => run(&s, &headers, ask, Kind::Completion).await,
        Err(e) => e.into_response(),
    }
}

/// The `prompt` of a completion or tokenize request.
fn prompt_of(map: &serde_json::Map<String, Value>) -> Result<String, ApiError> {
    match map.get("prompt") {
        Some(Value::String(p)) => Ok(p.clone()),
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => {
            Ok(a[0].as_str().unwrap_or_default().to_string())
        }
        Some(_) => Err(ApiError::bad_request(
            "'prompt' must be a string (or a list of one string)",
        )
        .param("prompt")),
        None => Err(ApiError::bad_request("missing required field 'prompt'").param("prompt")),
    }
}

/// vLLM's `POST /tokenize` (`{"model", "prompt"}` → `count`, `tokens`,
/// `max_model_len`): the prompt's tokens as the engine counts them.
async fn tokenize(
    State(s): State<Arc<OpenAi>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let tokens = (|| {
        let prompt = prompt_of(&tenant_body(&s, &headers, body)?)?;
        Ok::<_, ApiError>(kvw_engine::attention::encode(&prompt))
    })();
    match tokens {
        Ok(t) => Json(json!({
            "count": t.len(),
            "max_model_len": s.service.shape.context_len,
            "tokens": t,
        }))
        .into_response(),
        Err(e) => e.into_response(),
    }
}

async fn chat_completions(
    State(s): State<Arc<OpenAi>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let ask = (|| {
        let map = tenant_body(&s, &headers, body)?;
        let Some(Value::Array(messages)) = map.get("messages") else {
            return Err(
                ApiError::bad_request("missing required field 'messages' (a list)")
                    .param("messages"),
            );
        };
        let mut parts = Vec::new();
        for m in messages {
            match m.get("content") {
                Some(Value::String(c)) if m.get("role").is_some_and(Value::is_string) => {
                    parts.push(c.clone())
                }
                _ => {
                    return Err(ApiError::bad_request(
                        "each message needs a string 'role' and a string 'content'",
                    )
                    .param("messages"))
                }
            }
        }
        common(&s, &map, parts.join("\n"), "max_completion_tokens")
    })();
    match ask {
        Ok(ask) => run(&s, &headers, ask, Kind::Chat).await,
        Err(e) => e.into_response(),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Completion,
    Chat,
}

/// Run one request through the cluster: its 200 answer, or the error
/// response the client gets (the cluster's own non-200 answer included).
pub(crate) async fn answer(
    s: &OpenAi,
    headers: &HeaderMap,
    ask: Ask,
) -> Result<kvw_engine::live::LiveAnswer, Response> {
    let Ok(tenant) = tenant(s, headers) else {
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, "Incorrect API key").into_response());
    };
    let Ok(_slot) = s.slots.try_acquire() else {
        return Err(
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too many requests in flight")
                .into_response(),
        );
    };
    let answer = match s
        .service
        .complete(
            tenant,
            ask.prompt,
            ask.max_tokens,
            ask.cache_salt,
            ask.bootstrap,
            REQUEST_DEADLINE,
        )
        .await
    {
        Ok(a) => a,
        Err(ServiceError::TimedOut) => {
            return Err(ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "the cluster did not answer in time",
            )
            .into_response())
        }
        Err(ServiceError::Stopped) => {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the cluster is shutting down",
            )
            .into_response())
        }
    };
    tracing::info!(
        tenant,
        rid = %answer.rid,
        status = answer.status,
        prompt_tokens = answer.prompt_tokens,
        cached_tokens = answer.cached_tokens,
        "completion"
    );
    if answer.status != 200 {
        let status =
            StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return Err(ApiError::new(status, answer.text).into_response());
    }
    Ok(answer)
}

async fn run(s: &OpenAi, headers: &HeaderMap, ask: Ask, kind: Kind) -> Response {
    let stream = ask.stream;
    let mut answer = match answer(s, headers, ask).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    // A prefill worker's 200 carries no text: its answer is the KV it sent.
    if s.service.shape.role == Some(kvw_engine::sim::Role::Prefill) {
        answer.text.clear();
        answer.output_ids.clear();
    }
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let id = format!("cmpl-{}", answer.rid);
    let usage = json!({
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.output_ids.len(),
        "total_tokens": answer.prompt_tokens + answer.output_ids.len(),
        "prompt_tokens_details": {"cached_tokens": answer.cached_tokens},
    });
    // The model never stops early: every answer ends at max_tokens.
    let finish = "length";
    if !stream {
        let choice = match kind {
            Kind::Completion => {
                json!({"index": 0, "text": answer.text, "logprobs": null, "finish_reason": finish})
            }
            Kind::Chat => {
                json!({"index": 0, "message": {"role": "assistant", "content": answer.text}, "logprobs": null, "finish_reason": finish})
            }
        };
        let object = match kind {
            Kind::Completion => "text_completion",
            Kind::Chat => "chat.completion",
        };
        return Json(json!({
            "id": id, "object": object, "created": created, "model": s.model,
            "choices": [choice], "usage": usage,
        }))
        .into_response();
    }
    // The cluster answers whole; the stream carries it one token per chunk.
    let object = match kind {
        Kind::Completion => "text_completion",
        Kind::Chat => "chat.completion.chunk",
    };
    let chars: Vec<char> = answer.text.chars().collect();
    let n = chars.len();
    let mut events = Vec::with_capacity(n + 2);
    for (i, c) in chars.into_iter().enumerate() {
        let last = i + 1 == n;
        let finish = if last { json!(finish) } else { Value::Null };
        let choice = match kind {
            Kind::Completion => {
                json!({"index": 0, "text": c.to_string(), "logprobs": null, "finish_reason": finish})
            }
            Kind::Chat => {
                let mut delta = json!({"content": c.to_string()});
                if i == 0 {
                    delta["role"] = json!("assistant");
                }
                json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish})
            }
        };
        let mut chunk = json!({"id": id, "object": object, "created": created, "model": s.model, "choices": [choice]});
        if last {
            chunk["usage"] = usage.clone();
        }
        events.push(Event::default().data(chunk.to_string()));
    }
    events.push(Event::default().data("[DONE]"));
    Sse::new(futures_util::stream::iter(
        events.into_iter().map(Ok::<_, Infallible>),
    ))
    .into_response()
}
