//! `kvw audit` against `kvw serve --openai` on 127.0.0.1: the pre-fix
//! cluster fails the isolation gate naming the leaked canary, the post-fix
//! one passes every gate, and the prefix-cache gate tells a shared cache
//! from a per-tenant one. Every server here starts on a free port and stops
//! itself.

use std::process::Command;

use kvw_evidence::audit::{AuditPredicate, GateResult, SizeSource};
use kvw_testkit::served::Process;

mod common;

use common::KVW;

/// `kvw serve --openai` on a free port; killed on drop.
struct Server {
    _process: Process,
    url: String,
}

impl Server {
    fn start(fixes: &str, cache: &str) -> Server {
        Server::with(fixes, cache, &[])
    }

    fn with(fixes: &str, cache: &str, extra: &[&str]) -> Server {
        let process = common::serve_openai_with(&common::KEYS, fixes, cache, extra);
        Server {
            url: process.url(),
            _process: process,
        }
    }
}

struct Audited {
    code: Option<i32>,
    gates: Vec<serde_json::Value>,
    receipts: Vec<AuditPredicate>,
    stderr: String,
}

fn audit(url: &str, extra: &[&str]) -> Audited {
    let (dir, signer, key) = common::signing_key();
    let public = dir.path().join("kvw.pub.json");
    signer.public().save(&public).unwrap();
    let out = dir.path().join("audit");
    let o = common::audit_command(url, &["alpha-key", "beta-key"])
        .args(["--json", "--max-seconds", "120"])
        .arg("--out")
        .arg(&out)
        .arg("--signing-key")
        .arg(&key)
        .args(extra)
        .output()
        .unwrap();
    // The plan comes first; then one line per gate.
    let gates: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v.get("gate").is_some())
        .collect();
    let mut receipts = Vec::new();
    for g in &gates {
        let path = out
            .join("receipts")
            .join(format!("{}.receipt.json", g["gate"].as_str().unwrap()));
        let bytes = std::fs::read(&path).unwrap();
        let v = kvw_evidence::verify_statement(&bytes, &signer.public()).unwrap();
        receipts.push(v.parse::<AuditPredicate>().unwrap());
        // `kvw verify` accepts the same file and names its gate.
        let check = Command::new(KVW)
            .arg("verify")
            .arg(&path)
            .arg("--key")
            .arg(&public)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&check.stdout);
        assert!(
            check.status.success(),
            "kvw verify refused {path:?}: {said}"
        );
        assert!(said.contains(&format!("audit {}", g["gate"].as_str().unwrap())));
    }
    Audited {
        code: o.status.code(),
        gates,
        receipts,
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn gate<'a>(a: &'a Audited, name: &str) -> &'a serde_json::Value {
    a.gates.iter().find(|g| g["gate"] == name).expect(name)
}

#[test]
fn pre_fix_isolation_fails_naming_the_canary_and_post_fix_passes_every_gate() {
    let pre = Server::start("none", "per-tenant");
    let a = audit(&pre.url, &[]);
    assert_eq!(a.code, Some(1), "{}", a.stderr);
    let iso = gate(&a, "isolation");
    assert_eq!(iso["result"], "fail", "{iso}");
    let leak = &iso["evidence"]["leaks"][0];
    let canary = leak["canary"].as_str().unwrap();
    assert!(canary.starts_with("CANARY-t"), "{leak}");
    assert!(iso["reason"].as_str().unwrap().contains(canary));
    assert!(leak["answer"].as_str().unwrap().contains(canary));
    let cap = gate(&a, "capacity");
    assert_eq!(cap["result"], "fail", "{cap}");
    assert_eq!(cap["evidence"]["precondition"], true, "{cap}");
    assert!(cap["reason"]
        .as_str()
        .unwrap()
        .contains("precondition holds (pool 4096 < context 8192"));
    // The pre-fix cluster declares the release without either change, and
    // the engine expects that release to leak.
    let v = gate(&a, "version");
    assert_eq!(v["result"], "pass", "{v}");
    assert_eq!(v["evidence"]["version"], "0.5.19", "{v}");
    assert_eq!(v["evidence"]["fixes"], serde_json::json!([]));
    assert_eq!(v["evidence"]["engine_expects"]["leak"], true, "{v}");
    assert!(v["reason"].as_str().unwrap().contains("capacity"), "{v}");
    // The receipt quotes the exchange that carried the other tenant's canary.
    let r = a.receipts.iter().find(|r| r.gate == "isolation").unwrap();
    let k = leak["exchange"].as_u64().unwrap() as usize;
    assert!(r.exchanges[k].response.contains(canary));
    assert_eq!(r.result, GateResult::Fail);
    assert!(r.exchanges.iter().all(|e| !e.request.contains("alpha-key")));
    drop(pre);

    let post = Server::start("all", "per-tenant");
    let a = audit(&post.url, &[]);
    assert_eq!(a.code, Some(0), "{:?} {}", a.gates, a.stderr);
    assert_eq!(a.gates.len(), kvw_evidence::audit::GATES.len());
    let v = gate(&a, "version");
    assert_eq!(v["evidence"]["version"], "0.5.23", "{v}");
    assert_eq!(
        v["evidence"]["fixes"],
        serde_json::json!(["retire-aborted-prefill-result", "retire-unadmitted-reject"])
    );
    assert_eq!(v["evidence"]["engine_expects"]["leak"], false, "{v}");
    for g in &a.gates {
        assert_eq!(g["result"], "pass", "{g}");
    }
    assert!(a.receipts.iter().all(|r| r.result == GateResult::Pass));
    assert_eq!(gate(&a, "capacity")["evidence"]["status"], 400);
    assert_eq!(gate(&a, "capacity")["evidence"]["precondition"], true);
    // The server's own /tokenize sized the prompts the refusals rest on.
    for (g, purpose) in [
        ("capacity", "beyond the pool"),
        ("status", "past the context"),
    ] {
        let r = a.receipts.iter().find(|r| r.gate == g).unwrap();
        let p = r.prompts.iter().find(|p| p.purpose == purpose).unwrap();
        assert_eq!(p.measured_by, SizeSource::Tokenize, "{p:?}");
        assert_eq!(p.tokens, p.chars, "one token per character: {p:?}");
    }
}

#[test]
fn the_timing_gate_finds_a_shared_prefix_cache_and_not_a_per_tenant_one() {
    let only = ["--gates", "prefix-cache", "--pairs", "16"];
    let shared = Server::start("all", "shared");
    let a = audit(&shared.url, &only);
    let g = gate(&a, "prefix-cache");
    assert_eq!(g["result"], "fail", "{g}");
    assert!(g["evidence"]["p_value"].as_f64().unwrap() < 0.01);
    assert_eq!(a.code, Some(1));
    // A per-request cache_salt keeps tenants apart even in a shared cache.
    let salted = audit(&shared.url, &[&only[..], &["--cache-salt"]].concat());
    assert_eq!(
        gate(&salted, "prefix-cache")["result"],
        "pass",
        "{:?}",
        salted.gates
    );
    drop(shared);
    let per = Server::start("all", "per-tenant");
    let a = audit(&per.url, &only);
    let g = gate(&a, "prefix-cache");
    assert_eq!(g["result"], "pass", "{g}");
    assert_eq!(a.code, Some(0));
}

#[test]
fn unreachable_and_incompatible_endpoints_are_one_line_errors() {
    // A port nothing listens on: bind, read the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let o = common::audit_command(&url, &["a", "b"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("cannot reach"), "{err}");

    // A static site server is not an OpenAI endpoint.
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("index.html"), "hi").unwrap();
    let site_server = common::serve_dir(site.path(), 60);
    let url = site_server.url();
    let o = common::audit_command(&url, &["a", "b"]).output().unwrap();
    drop(site_server);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("not an OpenAI-compatible endpoint"), "{err}");
    // One key is not an audit.
    let o = common::audit_command(&url, &["a"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// An OpenAI endpoint that declares no version (llama.cpp's server has no
/// `/version` and no `/get_server_info`).
fn no_version() -> kvw_testkit::served::App {
    use axum::response::IntoResponse;
    let handler = |req: axum::extract::Request| async move {
        if req.uri().path() == "/v1/models" {
            let list = serde_json::json!({"object": "list", "data": [{"id": "m"}]});
            return axum::Json(list).into_response();
        }
        axum::http::StatusCode::NOT_FOUND.into_response()
    };
    kvw_testkit::served::App::start(axum::Router::new().fallback(handler))
}

#[test]
fn a_server_that_declares_no_version_is_inconclusive_never_failed() {
    let app = no_version();
    let o = common::audit_command(&app.url(), &["a", "b"])
        .args(["--gates", "version", "--json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let g = common::gate_line(&o, "version");
    assert_eq!(g["result"], "inconclusive", "{g}");
    let reason = g["reason"].as_str().unwrap();
    assert!(reason.contains("declares no version"), "{reason}");
    assert!(reason.contains("GET /version answered 404"), "{reason}");
}

#[test]
fn a_pool_that_holds_the_context_lacks_the_incidents_precondition() {
    let server = Server::with("none", "off", &["--pool-tokens", "8192"]);
    let a = audit(&server.url, &["--gates", "capacity"]);
    let cap = gate(&a, "capacity");
    assert_eq!(cap["result"], "pass", "{cap}");
    assert_eq!(cap["evidence"]["precondition"], false, "{cap}");
    assert_eq!(
        cap["evidence"]["pool_source"],
        "GET /get_server_info max_total_num_tokens"
    );
    assert!(cap["reason"]
        .as_str()
        .unwrap()
        .contains("precondition (pool < context) is absent"));
    assert_eq!(a.code, Some(0), "{}", a.stderr);
}
