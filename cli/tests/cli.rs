//! The `kvw` binary as a user meets it: output, exit codes, one-line errors.

use std::process::{Command, Output};

fn kvw(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kvw"))
        .args(args)
        .env(
            "KVW_KEY",
            std::env::temp_dir().join("kvw-cli-test-unused-key.json"),
        )
        .output()
        .expect("run kvw")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Bad input: exit non-zero, exactly one non-empty line on stderr, no panic.
fn assert_one_line_error(args: &[&str], needle: &str) {
    let o = kvw(args);
    let err = stderr(&o);
    assert!(!o.status.success(), "{args:?} should fail");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    let lines: Vec<_> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?} must print one line, got {err:?}");
    assert!(
        lines[0].contains(needle),
        "{args:?}: {:?} lacks {needle:?}",
        lines[0]
    );
    assert!(o.stdout.is_empty(), "{args:?} wrote to stdout");
}

#[test]
fn probe_prints_the_seven_step_account_with_the_leak() {
    let o = kvw(&["probe", "incident"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    for (n, name) in kvw_engine::probe::STEP_NAMES.iter().enumerate() {
        assert!(
            out.contains(&format!("{}. {name}", n + 1)),
            "missing step {name}"
        );
    }
    assert!(out.contains("HTTP 200"));
    assert!(out.contains(">>>CANARY-acme-"), "leaked canary is marked");
    assert!(out.contains("LEAK"));
}

#[test]
fn probe_json_has_the_documented_fields() {
    let o = kvw(&[
        "probe",
        "incident",
        "--fixes",
        "retire-unadmitted-reject",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["steps"].as_array().unwrap().len(), 7);
    for s in v["steps"].as_array().unwrap() {
        assert!(s["step"].is_u64() && s["name"].is_string() && s["events"].is_array());
        let p = s["provenance"].as_str().unwrap();
        assert!([
            "disclosed",
            "upstream-test",
            "upstream-thread",
            "model-assumption"
        ]
        .contains(&p));
    }
    assert_eq!(
        v["config"]["fixes"],
        serde_json::json!(["retire-unadmitted-reject"])
    );
    let verdict = &v["verdict"];
    assert_eq!(verdict["leak"], false);
    assert_eq!(verdict["http_status"], 400);
    assert!(verdict["foreign_pages_read"].is_u64());
    assert!(verdict["canaries_leaked"].is_array());
    assert!(verdict["latency_s"].is_f64());
    assert_eq!(v["trace_sha256"].as_str().unwrap().len(), 64);
}

#[test]
fn bad_input_is_one_line_and_non_zero() {
    assert_one_line_error(
        &["probe", "incident", "--fixes", "kv-checksum,nope"],
        "unknown fix 'nope'",
    );
    assert_one_line_error(
        &["probe", "incident", "--page-size", "0"],
        "page size must be at least 1",
    );
    assert_one_line_error(
        &["probe", "incident", "--prefill-pool", "8"],
        "prefill pool of 8 tokens is smaller than one page",
    );
    assert_one_line_error(
        &["probe", "incident", "--seed", "18446744073709551616"],
        "--seed",
    );
    assert_one_line_error(&["probe", "incident", "--seed", "-3"], "-3");
    assert_one_line_error(&["probe", "incident", "--scale", "huge"], "huge");
    assert_one_line_error(&["probe", "nothing"], "nothing");
}
