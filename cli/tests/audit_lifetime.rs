//! The lifetime gate against `kvw serve --openai` on 127.0.0.1 with the
//! late-write fault of SGLang #24527 (`--late-write-ms`): one tenant walks
//! away from its requests mid-request and mid-stream while the other's
//! run. Pre-fix the aborted request's pages are reused before its late
//! write lands, and the other tenant's answer carries the first tenant's
//! canary: the gate fails naming it. With deferred release (`--fixes all`)
//! the pages wait for the write, and the gate passes.
//!
//! The cluster's pages hold 64 tokens here: the model's KV is bound to its
//! position and pages are reused last-freed first, so the late page that
//! lands where the next tenant reads its own position is the first page
//! of a one-page prompt, and a 16-token page holds less than a whole
//! canary (a limit of what the audit can see, stated in the README).

mod common;

use kvw_evidence::audit::{AuditPredicate, GateResult};
use serde_json::Value;

fn lifetime(fixes: &str) -> (Option<i32>, Value, AuditPredicate) {
    let server = common::serve_openai_with(
        &common::KEYS,
        fixes,
        "per-tenant",
        &["--page-size", "64", "--late-write-ms", "300"],
    );
    let (dir, signer, key) = common::signing_key();
    let out = dir.path().join("audit");
    let o = common::audit_command(&server.url(), &common::KEYS)
        .args(["--gates", "lifetime", "--rounds", "1", "--json"])
        .args(["--max-seconds", "120"])
        .arg("--out")
        .arg(&out)
        .arg("--signing-key")
        .arg(&key)
        .output()
        .unwrap();
    let g = common::gate_line(&o, "lifetime");
    let bytes = std::fs::read(out.join("receipts/lifetime.receipt.json")).unwrap();
    let v = kvw_evidence::verify_statement(&bytes, &signer.public()).unwrap();
    (o.status.code(), g, v.parse::<AuditPredicate>().unwrap())
}

#[test]
fn pre_fix_a_late_write_after_a_walk_away_fails_the_gate_and_deferred_release_passes() {
    let (code, g, receipt) = lifetime("none");
    assert_eq!(code, Some(1), "{g}");
    assert_eq!(g["result"], "fail", "{g}");
    let leak = &g["evidence"]["leaks"][0];
    let canary = leak["canary"].as_str().unwrap();
    assert!(canary.starts_with("CANARY-t0-"), "{leak}");
    assert_eq!(leak["receiver"], "t1", "{leak}");
    assert!(g["reason"].as_str().unwrap().contains(canary), "{g}");
    // The receipt quotes the answer that carried it, and the walk-aways.
    let k = leak["exchange"].as_u64().unwrap() as usize;
    assert!(receipt.exchanges[k].response.contains(canary));
    assert_eq!(receipt.exchanges[k].tenant, "t1");
    assert!(receipt
        .exchanges
        .iter()
        .any(|e| e.tenant == "t0" && e.response.contains("abandoned by the audit")));
    assert_eq!(receipt.result, GateResult::Fail);

    let (code, g, receipt) = lifetime("all");
    assert_eq!(code, Some(0), "{g}");
    assert_eq!(g["result"], "pass", "{g}");
    assert_eq!(g["evidence"]["abandoned"], 4, "{g}");
    assert_eq!(receipt.result, GateResult::Pass);
}
