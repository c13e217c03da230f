//! Hostile and broken requests against the OpenAI endpoint over real
//! loopback HTTP: each gets the right 4xx in the OpenAI error shape, and
//! the server keeps answering ordinary requests after all of them.

use std::sync::Arc;

use kvw_server::openai::{router, OpenAi};
use kvw_server::service::{ClusterShape, EngineService};
use kvw_server::tenant_keys::Keys;
use kvw_testkit::http;
use kvw_testkit::served::App;

/// The endpoint on a free port, on a runtime thread of its own.
fn start() -> App {
    let service = EngineService::start(ClusterShape::default()).unwrap();
    let keys = Keys::load(&["k-one".into(), "k-two".into()], None).unwrap();
    App::start(router(Arc::new(OpenAi::new(
        service,
        keys,
        "kvw-echo".into(),
    ))))
}

fn post(port: u16, key: Option<&str>, path: &str, body: &[u8]) -> (u16, String) {
    let r = http::post_json(port, path, key, body);
    (r.status, r.text())
}

fn get(port: u16, target: &str) -> (u16, String) {
    let r = http::get(port, target, &[]);
    (r.status, r.text())
}

/// The body is an OpenAI error whose code is the status.
fn assert_error(status: u16, body: &str, want: u16, says: &str) {
    assert_eq!(status, want, "{body}");
    let v: serde_json::Value = serde_json::from_str(body).expect(body);
    assert_eq!(v["error"]["code"], want, "{body}");
    assert!(v["error"]["type"].is_string(), "{body}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains(says), "{msg}");
}

/// Key, path, body, expected status, a word of the expected message.
type Case = (
    Option<&'static str>,
    &'static str,
    Vec<u8>,
    u16,
    &'static str,
);

#[test]
fn bad_requests_get_openai_errors_and_the_server_keeps_serving() {
    let app = start();
    let port = app.port;
    let c = "/v1/completions";
    let k = Some("k-one");
    let ok = br#"{"model":"kvw-echo","prompt":"^still here","max_tokens":5}"#;
    let cases: Vec<Case> = vec![
        (None, c, ok.to_vec(), 401, "API key"),
        (Some("nope"), c, ok.to_vec(), 401, "API key"),
        (k, c, b"{\"model\": ".to_vec(), 400, "not valid JSON"),
        (k, c, b"[1,2]".to_vec(), 400, "JSON object"),
        (k, c, vec![b'"', 0xff, 0xfe, b'"'], 400, "UTF-8"),
        (k, c, br#"{"prompt":"x"}"#.to_vec(), 400, "'model'"),
        (k, c, br#"{"model":"kvw-echo"}"#.to_vec(), 400, "'prompt'"),
        (
            k,
            c,
            br#"{"model":"gpt-9","prompt":"x"}"#.to_vec(),
            404,
            "does not exist",
        ),
        (
            k,
            c,
            br#"{"model":"kvw-echo","prompt":"x","max_tokens":99999999999}"#.to_vec(),
            400,
            "max_tokens",
        ),
        (
            k,
            c,
            br#"{"model":"kvw-echo","prompt":"x","max_tokens":-1}"#.to_vec(),
            400,
            "max_tokens",
        ),
        (
            k,
            c,
            br#"{"model":"kvw-echo","prompt":"x","max_tokens":"ten"}"#.to_vec(),
            400,
            "max_tokens",
        ),
        (
            k,
            c,
            br#"{"model":"kvw-echo","prompt":"x","stream":"yes"}"#.to_vec(),
            400,
            "stream",
        ),
        (
            k,
            c,
            br#"{"model":"kvw-echo","prompt":""}"#.to_vec(),
            400,
            "empty",
        ),
        (
            k,
            c,
            format!(r#"{{"model":"kvw-echo","prompt":"{}"}}"#, "x".repeat(9000)).into_bytes(),
            400,
            "context length",
        ),
        (k, c, vec![b' '; 2 << 20], 413, "larger than"),
        (
            k,
            "/v1/chat/completions",
            br#"{"model":"kvw-echo","messages":"hi"}"#.to_vec(),
            400,
            "messages",
        ),
        (
            k,
            "/v1/chat/completions",
            br#"{"model":"kvw-echo","messages":[{"role":"user"}]}"#.to_vec(),
            400,
            "content",
        ),
    ];
    for (key, path, body, want, says) in cases {
        let (status, text) = post(port, key, path, &body);
        assert_error(status, &text, want, says);
    }
    // A chunked body past the limit is cut at the limit, not read to its end.
    let (status, text) = chunked(port, &[b' '; 64 * 1024], 24);
    assert_error(status, &text, 413, "larger than");
    let (status, text) = get(port, "/v1/models");
    assert_error(status, &text, 401, "API key");
    // Still serving, and still correct.
    let (status, text) = post(port, k, c, ok);
    assert_eq!(status, 200, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["choices"][0]["text"], "still");
    assert_eq!(get(port, "/healthz").0, 200);
}

/// POST `times` chunks of `chunk` as k-one, chunked; status and body.
fn chunked(port: u16, chunk: &[u8], times: usize) -> (u16, String) {
    let raw = http::chunked_bytes(
        "/v1/completions",
        &["Authorization: Bearer k-one"],
        chunk,
        times,
    );
    let r = http::exchange(port, &raw, http::READ_TIMEOUT);
    (r.status, r.text())
}
