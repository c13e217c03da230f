//! `kvw audit` sizes its prompts in the server's tokens, not in characters.
//!
//! The server here is healthy and counts one token per three characters: it
//! refuses with 400 a prompt past its 2,048-token context or its 1,024-token
//! KV pool. An audit counting one token per character sends "past the
//! context" prompts a third of the context long, gets 200 and accuses it;
//! calibrated on the server's `/tokenize` or on `usage.prompt_tokens`, the
//! audit passes it and its receipts say how each size was counted. A server
//! that counts nothing leaves the size an assumption: inconclusive, never
//! a failure. Each server listens on 127.0.0.1 and stops when dropped.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use kvw_evidence::audit::{AuditPredicate, SizeSource};
use kvw_testkit::served::App;
use serde_json::{json, Value};

mod common;
const CONTEXT: u64 = 2048;
const POOL: u64 = 1024;
const CHARS_PER_TOKEN: u64 = 3;

/// What the server tells about its token counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counts {
    /// vLLM's `POST /tokenize` and `usage.prompt_tokens`.
    Tokenize,
    /// `usage.prompt_tokens` only.
    Usage,
    /// Neither.
    Silent,
}

/// The server's tokens of `prompt`.
fn count(prompt: &str) -> u64 {
    (prompt.chars().count() as u64).div_ceil(CHARS_PER_TOKEN)
}

fn error(message: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": {"message": message, "type": "BadRequestError"}})),
    )
        .into_response()
}

async fn models() -> Json<Value> {
    Json(
        json!({"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": CONTEXT}]}),
    )
}

async fn server_info() -> Json<Value> {
    Json(json!({"context_length": CONTEXT, "max_total_num_tokens": POOL}))
}

async fn tokenize(State(c): State<Counts>, body: String) -> Response {
    let v: Value = serde_json::from_str(&body).unwrap_or_default();
    match (c, v["prompt"].as_str()) {
        (Counts::Tokenize, Some(p)) => {
            Json(json!({"count": count(p), "max_model_len": CONTEXT})).into_response()
        }
        (Counts::Tokenize, None) => error("missing prompt".into()),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn completions(State(c): State<Counts>, body: String) -> Response {
    let Ok(v) = serde_json::from_str::<Value>(&body) else {
        return error("not JSON".into());
    };
    let (Some(prompt), Some(max)) = (v["prompt"].as_str(), v["max_tokens"].as_u64()) else {
        return error("prompt and a positive max_tokens are required".into());
    };
    let n = count(prompt);
    if n + max > CONTEXT {
        return error(format!(
            "{n} prompt tokens and {max} more exceed the {CONTEXT}-token context"
        ));
    }
    if n > POOL {
        return error(format!(
            "{n} prompt tokens do not fit the {POOL}-token KV pool"
        ));
    }
    let mut answer = json!({
        "object": "text_completion",
        "choices": [{"index": 0, "text": "ok", "finish_reason": "length"}],
    });
    if c != Counts::Silent {
        answer["usage"] = json!({"prompt_tokens": n, "completion_tokens": max.min(2)});
    }
    Json(answer).into_response()
}

/// The healthy three-characters-per-token server; stops when dropped.
fn start(counts: Counts) -> App {
    App::start(
        Router::new()
            .route("/v1/models", get(models))
            .route("/get_server_info", get(server_info))
            .route("/tokenize", post(tokenize))
            .route("/v1/completions", post(completions))
            .with_state(counts),
    )
}

struct Audited {
    code: Option<i32>,
    gates: Vec<Value>,
    receipts: Vec<AuditPredicate>,
    stderr: String,
}

/// `kvw audit --gates capacity,status` against `url`, its signed receipts read back.
fn audit(url: &str) -> Audited {
    let (dir, signer, key) = common::signing_key();
    let out = dir.path().join("audit");
    let o = common::audit_command(url, &["alpha", "beta"])
        .args([
            "--gates",
            "capacity,status",
            "--json",
            "--max-seconds",
            "60",
        ])
        .arg("--out")
        .arg(&out)
        .arg("--signing-key")
        .arg(&key)
        .output()
        .unwrap();
    let gates = common::json_lines(&o.stdout);
    let receipts = gates
        .iter()
        .filter_map(|g| {
            let path = out
                .join("receipts")
                .join(format!("{}.receipt.json", g["gate"].as_str()?));
            let bytes = std::fs::read(path).ok()?;
            let v = kvw_evidence::verify_statement(&bytes, &signer.public()).ok()?;
            v.parse::<AuditPredicate>().ok()
        })
        .collect();
    Audited {
        code: o.status.code(),
        gates,
        receipts,
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

impl Audited {
    fn gate(&self, name: &str) -> &Value {
        self.gates
            .iter()
            .find(|g| g["gate"] == name)
            .unwrap_or_else(|| panic!("no {name} gate in {:?}; stderr {}", self.gates, self.stderr))
    }

    fn receipt(&self, name: &str) -> &AuditPredicate {
        self.receipts
            .iter()
            .find(|r| r.gate == name)
            .unwrap_or_else(|| panic!("no signed {name} receipt; stderr {}", self.stderr))
    }
}

/// The healthy server passes both gates, and the receipt of each states the
/// decisive prompt's size as counted by `source`, past the limit it tests.
fn passes_with_sizes_from(counts: Counts, source: SizeSource) {
    let server = start(counts);
    let a = audit(&server.url());
    for (gate, purpose, limit) in [
        ("status", "past the context", CONTEXT),
        ("capacity", "beyond the pool", POOL),
    ] {
        let g = a.gate(gate);
        assert_eq!(g["result"], "pass", "{counts:?}: {g}");
        let r = a.receipt(gate);
        let size = r
            .prompts
            .iter()
            .find(|p| p.purpose == purpose)
            .unwrap_or_else(|| {
                panic!("{gate} receipt states no '{purpose}' size: {:?}", r.prompts)
            });
        assert_eq!(size.measured_by, source, "{size:?}");
        assert!(size.tokens > limit, "{gate}: {size:?} is not past {limit}");
        // The size in the receipt is the server's count of what was sent:
        // exactly where the server counted this prompt, within 1% where a
        // calibrated rate scaled it.
        let counted = size.chars.div_ceil(CHARS_PER_TOKEN);
        let slack = if source == SizeSource::Tokenize {
            0
        } else {
            counted / 100 + 2
        };
        assert!(
            size.tokens.abs_diff(counted) <= slack,
            "{size:?} vs {counted}"
        );
    }
    assert_eq!(a.code, Some(0), "{:?} {}", a.gates, a.stderr);
}

#[test]
fn a_server_with_a_tokenizer_endpoint_is_sized_by_it_and_not_accused() {
    passes_with_sizes_from(Counts::Tokenize, SizeSource::Tokenize);
}

#[test]
fn a_server_reporting_usage_is_sized_by_calibration_and_not_accused() {
    passes_with_sizes_from(Counts::Usage, SizeSource::Calibrated);
}

#[test]
fn a_server_that_counts_nothing_is_inconclusive_never_failed_on_an_assumed_size() {
    let server = start(Counts::Silent);
    let a = audit(&server.url());
    assert_eq!(a.code, Some(1), "{:?} {}", a.gates, a.stderr);
    for gate in ["status", "capacity"] {
        let g = a.gate(gate);
        assert_eq!(g["result"], "inconclusive", "{g}");
        assert!(g["reason"].as_str().unwrap().contains("assumed"), "{g}");
        let r = a.receipt(gate);
        assert!(!r.prompts.is_empty());
        assert!(
            r.prompts
                .iter()
                .all(|p| p.measured_by == SizeSource::Assumed),
            "{:?}",
            r.prompts
        );
        assert!(
            r.prompts[0].how.contains("--chars-per-token"),
            "{:?}",
            r.prompts
        );
    }
}
