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
    for n in 1..=7u8 {
        let name = kvw_words::probe::step_name(n, kvw_words::Lang::En);
        assert!(out.contains(&format!("{n}. {name}")), "missing step {name}");
    }
    assert!(out.contains("model assumptions:"), "assumptions are listed");
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
        assert!(s["step"].is_u64() && s["events"].is_array() && s["reached"].is_boolean());
        for f in s["facts"].as_array().unwrap() {
            assert!(f["claim"]["kind"].is_string() && f["basis"].is_string());
            let p = f["provenance"].as_str().unwrap();
            assert!([
                "disclosed",
                "upstream-test",
                "upstream-thread",
                "upstream-code",
                "model-assumption"
            ]
            .contains(&p));
        }
        assert!(s.get("summary").is_none(), "prose is rendered, not signed");
    }
    assert!(v["events"].as_array().unwrap()[0]["kind"].is_string());
    assert_eq!(
        v["config"]["fixes"],
        serde_json::json!(["retire-unadmitted-reject"])
    );
    let verdict = &v["verdict"];
    assert_eq!(verdict["leak"], false);
    assert_eq!(verdict["http_status"], 500);
    assert_eq!(verdict["outcome"], "refused");
    assert!(verdict["foreign_pages_read"].is_u64());
    assert!(verdict["canaries_leaked"].is_array());
    assert!(verdict["latency_us"].as_u64().unwrap() >= 300_000_000);
    assert_eq!(v["trace_sha256"].as_str().unwrap().len(), 64);
}

#[test]
fn bad_input_is_one_line_and_non_zero() {
    let cases: [(&[&str], &str); 9] = [
        (
            ["probe", "incident", "--fixes", "kv-checksum,nope"].as_slice(),
            "unknown fix 'nope'",
        ),
        (
            ["probe", "incident", "--page-size", "0"].as_slice(),
            "page size must be at least 1",
        ),
        (
            ["probe", "incident", "--prefill-pool", "8"].as_slice(),
            "prefill pool of 8 tokens is smaller than one page",
        ),
        (
            ["probe", "incident", "--seed", "18446744073709551616"].as_slice(),
            "--seed",
        ),
        (["probe", "incident", "--seed", "-3"].as_slice(), "-3"),
        (["probe", "incident", "--scale", "huge"].as_slice(), "huge"),
        (
            ["probe", "incident", "--poison-on-free", "raise"].as_slice(),
            "unknown poison-on-free mode 'raise'",
        ),
        (
            ["probe", "incident", "--lang", "fr"].as_slice(),
            "unknown language 'fr'",
        ),
        (["probe", "nothing"].as_slice(), "nothing"),
    ];
    for (args, needle) in cases {
        assert_one_line_error(args, needle);
    }
}

#[test]
fn check_finds_the_incident_pre_fix_and_holds_with_all_fixes() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let keys = kvw(&["keygen", "--out", &d("")]);
    assert!(keys.status.success(), "{}", stderr(&keys));
    let key = d("signing-key.json");

    let none = kvw(&[
        "check",
        "--fixes",
        "none",
        "--requests",
        "1",
        "--key",
        &key,
        "--out",
        &d("none.json"),
    ]);
    assert_eq!(none.status.code(), Some(1), "{}", stderr(&none));
    let out = String::from_utf8_lossy(&none.stdout);
    assert!(
        out.contains("isolation") && out.contains("Violated"),
        "{out}"
    );
    assert!(out.contains("shortest counterexample"), "{out}");
    assert!(
        out.contains("handoff_door: Admit"),
        "the short handoff is accepted: {out}"
    );

    let all = kvw(&[
        "check",
        "--fixes",
        "all",
        "--requests",
        "2",
        "--faults",
        "aborts,lost-ack",
        "--key",
        &key,
        "--out",
        &d("all.json"),
    ]);
    assert!(all.status.success(), "{}", stderr(&all));
    assert!(!String::from_utf8_lossy(&all.stdout).contains("Violated"));

    // A write later than deferred release's timeout breaks every fix, and
    // the output says which window it is.
    let late = kvw(&[
        "check",
        "--fixes",
        "all",
        "--requests",
        "2",
        "--faults",
        "all",
    ]);
    assert!(!late.status.success());
    let out = String::from_utf8_lossy(&late.stdout);
    assert!(out.contains("release_timeout"), "{out}");
    assert!(out.contains("deferred release timed out"), "{out}");

    for receipt in ["none.json", "all.json"] {
        let v = kvw(&["verify", &d(receipt)]);
        assert!(v.status.success(), "{receipt}: {}", stderr(&v));
    }
    assert_one_line_error(&["check", "--requests", "99"], "--requests must be between");
    assert_one_line_error(&["check", "--explore", "10.0.0.1:1"], "loopback");
}
