//! What a worker of a split pair (`kvw serve --role prefill|decode`) serves
//! to SGLang's PD router beyond the OpenAI routes.
//!
//! The router (`sglang-router` 0.3.x, the `sgl-model-gateway` crate)
//! registers a worker with `GET /health` (any 2xx), reads
//! `GET /server_info` and `GET /model_info` for labels (either may be
//! 404), health-checks `GET /health` every 60 s, and sends each client
//! request — `/generate`, `/v1/completions`, `/v1/chat/completions` — as
//! the same body to the prefill and the decode it picked, with
//! `bootstrap_host`, `bootstrap_port` and `bootstrap_room` added
//! (`inject_bootstrap_into_value` in `src/routers/http/pd_router.rs`;
//! arrays of one entry per prompt for a batch). It forwards the client's
//! `Authorization` header, so the bearer key names the tenant here as on
//! the whole-cluster endpoint.
//!
//! `/server_info` leaves `model_path` out on purpose: given one, the router
//! tries to load a tokenizer from it (`register_tokenizer`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use kvw_engine::live::BootstrapFields;
use kvw_engine::sim::Role;
use serde_json::{json, Map, Value};

use crate::api_error::ApiError;
use crate::openai::{self, OpenAi};

/// The router's fields of one request body. A field sent as an array (the
/// router's batch form) is taken when it has one entry; a batch of several
/// prompts is refused.
pub fn bootstrap_fields(map: &Map<String, Value>, role: Role) -> Result<BootstrapFields, ApiError> {
    let field = |name: &'static str| -> Result<Option<&Value>, ApiError> {
        match map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) if a.len() == 1 => Ok(Some(&a[0]).filter(|v| !v.is_null())),
            Some(Value::Array(_)) => Err(ApiError::bad_request(format!(
                "'{name}' is a batch; this PD worker serves one prompt per request"
            ))
            .param(name)),
            Some(v) => Ok(Some(v)),
        }
    };
    let missing = |name: &'static str| {
        ApiError::bad_request(format!(
            "missing '{name}': a PD {} worker takes requests from SGLang's router, which adds bootstrap_host, bootstrap_port and bootstrap_room",
            role.name()
        ))
        .param(name)
    };
    let room = field("bootstrap_room")?
        .ok_or_else(|| missing("bootstrap_room"))?
        .as_u64()
        .ok_or_else(|| {
            ApiError::bad_request("'bootstrap_room' must be a non-negative integer")
                .param("bootstrap_room")
        })?;
    if role == Role::Prefill {
        return Ok(BootstrapFields {
            room,
            prefill: None,
        });
    }
    let host = field("bootstrap_host")?.ok_or_else(|| missing("bootstrap_host"))?;
    let host = host.as_str().and_then(parse_host).ok_or_else(|| {
        ApiError::bad_request("'bootstrap_host' must be an IP address (or localhost)")
            .param("bootstrap_host")
    })?;
    let port = field("bootstrap_port")?
        .ok_or_else(|| missing("bootstrap_port"))?
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|&p| p != 0)
        .ok_or_else(|| {
            ApiError::bad_request("'bootstrap_port' must be a port number from 1 to 65535")
                .param("bootstrap_port")
        })?;
    Ok(BootstrapFields {
        room,
        prefill: Some(SocketAddr::new(host, port)),
    })
}

fn parse_host(h: &str) -> Option<IpAddr> {
    if h == "localhost" {
        return Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    h.trim_start_matches('[').trim_end_matches(']').parse().ok()
}

/// Routes behind the key guard: SGLang's native `/generate`.
pub fn keyed_routes(r: Router<Arc<OpenAi>>) -> Router<Arc<OpenAi>> {
    r.route("/generate", post(generate))
}

/// Routes the router calls without a client's key.
pub fn open_routes(r: Router<Arc<OpenAi>>) -> Router<Arc<OpenAi>> {
    r.route("/health", get(|| async { "ok\n" }))
        .route("/server_info", get(server_info))
        .route("/model_info", get(model_info))
        .route("/get_model_info", get(model_info))
        .route("/flush_cache", post(|| async { "ok\n" }))
}

/// The worker's shape, as SGLang's `/server_info` names it.
async fn server_info(State(s): State<Arc<OpenAi>>) -> Response {
    let shape = &s.service.shape;
    let role = shape.role.map_or("null", Role::name);
    let pool = match shape.role {
        Some(Role::Decode) => shape.decode_pool_tokens,
        _ => shape.prefill_pool_tokens,
    };
    Json(json!({
        "served_model_name": s.model,
        "disaggregation_mode": role,
        "tp_size": 1,
        "dp_size": 1,
        "context_length": shape.context_len,
        "max_total_num_tokens": pool,
        "page_size": shape.page_size,
        "version": kvw_evidence::upstream_run::release_with(&shape.fixes),
        "kvw_version": env!("CARGO_PKG_VERSION"),
        "fixes": shape.fixes.iter().map(|f| f.name()).collect::<Vec<_>>(),
    }))
    .into_response()
}

async fn model_info(State(s): State<Arc<OpenAi>>) -> Response {
    Json(json!({
        "model_path": s.model,
        "is_generation": true,
        "model_type": "kvw-echo",
    }))
    .into_response()
}

/// SGLang's `POST /generate`: `text` (or `input_ids`), `sampling_params`
/// with `max_new_tokens`, `stream`; the answer is `text`, `output_ids` and
/// `meta_info`.
async fn generate(
    State(s): State<Arc<OpenAi>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let ask = (|| {
        let map = openai::tenant_body(&s, &headers, body)?;
        let prompt = match (map.get("text"), map.get("input_ids")) {
            (Some(Value::String(t)), _) => kvw_engine::attention::encode(t),
            (_, Some(Value::Array(ids))) => ids
                .iter()
                .map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok()))
                .collect::<Option<Vec<u32>>>()
                .ok_or_else(|| {
                    ApiError::bad_request("'input_ids' must be a list of token ids (one prompt)")
                        .param("input_ids")
                })?,
            _ => {
                return Err(ApiError::bad_request(
                    "'text' must be a string, or 'input_ids' a list of token ids",
                )
                .param("text"))
            }
        };
        let params = match map.get("sampling_params") {
            None | Some(Value::Null) => None,
            Some(Value::Object(p)) => Some(p),
            Some(_) => {
                return Err(ApiError::bad_request("'sampling_params' must be an object")
                    .param("sampling_params"))
            }
        };
        let max_tokens = openai::max_tokens_of(params.and_then(|p| p.get("max_new_tokens")))?;
        let stream = openai::stream_of(&map)?;
        openai::checked_ask(&s, &map, prompt, max_tokens, stream, None)
    })();
    let ask = match ask {
        Ok(a) => a,
        Err(e) => return e.into_response(),
    };
    let stream = ask.stream;
    let answer = match openai::answer(&s, &headers, ask).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    let prefill = s.service.shape.role == Some(Role::Prefill);
    let (text, ids) = if prefill {
        (String::new(), Vec::new())
    } else {
        (answer.text.clone(), answer.output_ids.clone())
    };
    let body = json!({
        "text": text,
        "output_ids": ids,
        "meta_info": {
            "id": answer.rid,
            "finish_reason": {"type": "length", "length": ids.len()},
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": ids.len(),
            "cached_tokens": answer.cached_tokens,
        },
    });
    if !stream {
        return Json(body).into_response();
    }
    let events = [
        Event::default().data(body.to_string()),
        Event::default().data("[DONE]"),
    ];
    Sse::new(futures_util::stream::iter(
        events.into_iter().map(Ok::<_, std::convert::Infallible>),
    ))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn the_routers_fields_are_read_scalar_or_as_a_batch_of_one() {
        let f = bootstrap_fields(
            &map(json!({"bootstrap_host": "127.0.0.1", "bootstrap_port": 18901, "bootstrap_room": 9178940439010150588u64})),
            Role::Decode,
        )
        .unwrap();
        assert_eq!(f.room, 9178940439010150588);
        assert_eq!(f.prefill, Some("127.0.0.1:18901".parse().unwrap()));
        let f = bootstrap_fields(
            &map(json!({"bootstrap_host": ["localhost"], "bootstrap_port": [5], "bootstrap_room": [3]})),
            Role::Decode,
        )
        .unwrap();
        assert_eq!(
            (f.room, f.prefill),
            (3, Some("127.0.0.1:5".parse().unwrap()))
        );
        // Prefill needs only the room; its port may be null (none configured).
        let f = bootstrap_fields(
            &map(json!({"bootstrap_port": null, "bootstrap_room": 4})),
            Role::Prefill,
        )
        .unwrap();
        assert_eq!((f.room, f.prefill), (4, None));
    }

    #[test]
    fn missing_or_malformed_fields_name_the_field() {
        for (body, role, field) in [
            (json!({}), Role::Prefill, "bootstrap_room"),
            (
                json!({"bootstrap_room": -1}),
                Role::Prefill,
                "bootstrap_room",
            ),
            (
                json!({"bootstrap_room": [1, 2]}),
                Role::Prefill,
                "bootstrap_room",
            ),
            (json!({"bootstrap_room": 1}), Role::Decode, "bootstrap_host"),
            (
                json!({"bootstrap_room": 1, "bootstrap_host": "not a host", "bootstrap_port": 1}),
                Role::Decode,
                "bootstrap_host",
            ),
            (
                json!({"bootstrap_room": 1, "bootstrap_host": "::1", "bootstrap_port": null}),
                Role::Decode,
                "bootstrap_port",
            ),
            (
                json!({"bootstrap_room": 1, "bootstrap_host": "::1", "bootstrap_port": 70000}),
                Role::Decode,
                "bootstrap_port",
            ),
        ] {
            let e = bootstrap_fields(&map(body.clone()), role).unwrap_err();
            let b = e.body();
            assert_eq!(b["error"]["param"], field, "{body} -> {b}");
            assert_eq!(b["error"]["code"], 400, "{b}");
        }
    }
}
