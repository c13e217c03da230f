//! `kvw audit` says what it will send before it sends it: per gate the
//! requests and prompt tokens, and a total. Against `kvw serve --openai`
//! (one token per character, a `/tokenize`) the calibrated plan is what the
//! gates then send; `--dry-run` and `--max-prompt-tokens` stop before any
//! prompt, which a server recording every request confirms. Every server
//! here listens on 127.0.0.1 and stops when dropped.

use std::process::Output;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::{Json, Router};
use kvw_testkit::served::{App, Process};
use serde_json::{json, Value};

mod common;

/// `kvw serve --openai --fixes all`.
fn serve_openai() -> Process {
    common::serve_openai("all", "per-tenant")
}

fn audit(url: &str, extra: &[&str]) -> Output {
    common::audit_command(url, &["alpha-key", "beta-key"])
        .args(["--json", "--max-seconds", "120"])
        .args(extra)
        .output()
        .unwrap()
}

/// The JSON lines of stdout.
fn lines(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn plans(o: &Output) -> Vec<Value> {
    lines(o)
        .into_iter()
        .filter_map(|v| v.get("plan").cloned())
        .collect()
}

fn step<'a>(plan: &'a Value, name: &str) -> &'a Value {
    plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == name)
        .unwrap_or_else(|| panic!("no step {name} in {plan}"))
}

/// The plan's totals are the sums of its steps.
fn assert_sums(plan: &Value) {
    let steps = plan["steps"].as_array().unwrap();
    let sum = |k: &str| steps.iter().map(|s| s[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(plan["requests"].as_u64(), Some(sum("requests")), "{plan}");
    assert_eq!(
        plan["prompt_tokens"].as_u64(),
        Some(sum("prompt_tokens")),
        "{plan}"
    );
}

#[test]
fn the_calibrated_plan_is_what_the_gates_send() {
    let server = serve_openai();
    let o = audit(
        &server.url(),
        &["--gates", "capacity,admission,isolation,lifetime,status"],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let all = lines(&o);
    // The estimate before any prompt, then the plan in the server's tokens,
    // then the gates.
    assert!(all[0].get("plan").is_some() && all[1].get("plan").is_some());
    let [estimate, calibrated] = &plans(&o)[..] else {
        panic!("two plans expected: {all:?}");
    };
    assert_eq!(estimate["sizes"], "estimate");
    assert_eq!(step(estimate, "calibration")["requests"], 6);
    assert_eq!(calibrated["sizes"], "server tokens");
    assert!(calibrated["how"].as_str().unwrap().contains("/tokenize"));
    assert_sums(estimate);
    assert_sums(calibrated);
    let gates: Vec<&Value> = all.iter().filter(|v| v.get("gate").is_some()).collect();
    assert_eq!(gates.len(), 5);
    for g in gates {
        let name = g["gate"].as_str().unwrap();
        let planned = step(calibrated, name);
        // One token per character and an exact /tokenize: nothing is resent,
        // so every request the plan counts is sent, and no other.
        assert_eq!(
            planned["requests"], g["requests"],
            "{name}: {planned} vs {g}"
        );
    }
    // Capacity aims past the server's 4,096-token pool, inside its context.
    let cap = step(calibrated, "capacity")["prompt_tokens"]
        .as_u64()
        .unwrap();
    assert!(cap > 4096 && cap < 8192, "{cap}");
    let cap_sent = lines(&o)
        .iter()
        .find(|v| v["gate"] == "capacity")
        .map(|g| g["evidence"]["prompt_tokens"].as_u64().unwrap());
    assert_eq!(cap_sent, Some(cap));
}

#[test]
fn max_prompt_tokens_refuses_an_audit_above_it_with_one_line() {
    let server = serve_openai();
    let dry = audit(&server.url(), &["--dry-run"]);
    assert_eq!(dry.status.code(), Some(0));
    let total = plans(&dry)[0]["prompt_tokens"].as_u64().unwrap();
    let below = (total - 1).to_string();
    let o = audit(&server.url(), &["--max-prompt-tokens", &below]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("would send {total} prompt tokens")),
        "{err}"
    );
    assert!(err.contains("no prompt sent"), "{err}");
    assert!(lines(&o).iter().all(|v| v.get("gate").is_none()));
    // At the total itself the audit runs.
    let o = audit(
        &server.url(),
        &[
            "--gates",
            "status",
            "--max-prompt-tokens",
            &total.to_string(),
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// An endpoint that answers discovery and records every request it gets.
fn recording() -> (App, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handler = |State(seen): State<Arc<Mutex<Vec<String>>>>, req: Request| async move {
        let line = format!("{} {}", req.method(), req.uri().path());
        seen.lock().unwrap().push(line);
        if req.uri().path() == "/v1/models" {
            let list = json!({"object": "list", "data": [{"id": "m", "max_model_len": 4096}]});
            return Json(list).into_response();
        }
        StatusCode::NOT_FOUND.into_response()
    };
    let app = App::start(Router::new().fallback(handler).with_state(seen.clone()));
    (app, seen)
}

#[test]
fn a_dry_run_and_a_refused_budget_send_no_prompt() {
    let (app, seen) = recording();
    let o = common::audit_command(&app.url(), &["a", "b"])
        .args(["--dry-run", "--pool-tokens", "2048"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("prompt tokens: estimate"), "{text}");
    // Calibration first, every gate, then the total.
    let lines = ["calibration"]
        .into_iter()
        .chain(kvw_evidence::audit::GATES)
        .chain(["total"]);
    for gate in lines {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(gate)),
            "no {gate} line in {text}"
        );
    }
    assert!(text.contains("dry run: only discovery's GET requests were sent"));
    let sent = std::mem::take(&mut *seen.lock().unwrap());
    assert!(
        !sent.is_empty() && sent.iter().all(|l| l.starts_with("GET ")),
        "{sent:?}"
    );

    let o = common::audit_command(&app.url(), &["a", "b"])
        .args(["--max-prompt-tokens", "10"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("above --max-prompt-tokens 10"), "{err}");
    let sent = seen.lock().unwrap().clone();
    assert!(sent.iter().all(|l| l.starts_with("GET ")), "{sent:?}");
}
