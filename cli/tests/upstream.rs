//! `kvw upstream run` and upstream-run receipts on bad input: an unknown
//! release or case, a broken venv, a probe that raises, and `--reproduce`
//! without the venv. Each ends with one line naming what failed, a
//! non-zero exit and no receipt folder. The venvs here are folders made by
//! the test (`KVW_UPSTREAM_HOME`), so nothing is installed or downloaded.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use kvw_evidence::upstream_run::{compare, UpstreamRunPredicate};
use kvw_evidence::Signer;
use serde_json::json;

const KVW: &str = env!("CARGO_BIN_EXE_kvw");

fn kvw(home: &Path, args: &[&str]) -> Output {
    Command::new(KVW)
        .args(args)
        .env("KVW_UPSTREAM_HOME", home)
        .output()
        .unwrap()
}

fn one_error_line(out: &Output) -> String {
    assert!(!out.status.success(), "expected failure");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "one error line, got: {err}");
    lines[0].to_string()
}

/// A release venv marked ready whose `bin/python` is `script`.
fn fake_venv(home: &Path, release: &str, script: Option<&str>) {
    let dir = home.join(format!("sglang-{release}"));
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::write(
        dir.join(".kvw-ready"),
        json!({"release": release, "wheel": "sglang.whl", "wheel_sha256": "a".repeat(64),
               "python": "3.11.7", "torch": "2.13.0"})
        .to_string(),
    )
    .unwrap();
    if let Some(script) = script {
        let py = dir.join("bin/python");
        std::fs::write(&py, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&py, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

#[test]
fn an_unknown_release_or_case_is_one_line_and_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("receipts");
    let o = out.to_str().unwrap();
    let line = one_error_line(&kvw(
        home.path(),
        &["upstream", "run", "--sglang", "0.4.0", "--out", o],
    ));
    assert!(line.contains("unknown SGLang release \"0.4.0\""), "{line}");
    let line = one_error_line(&kvw(
        home.path(),
        &["upstream", "run", "--cases", "nope", "--out", o],
    ));
    assert!(line.contains("unknown case \"nope\""), "{line}");
    assert!(!out.exists());
}

#[test]
fn a_broken_venv_names_the_release() {
    let home = tempfile::tempdir().unwrap();
    fake_venv(home.path(), "0.5.19", None);
    let line = one_error_line(&kvw(
        home.path(),
        &["upstream", "run", "--sglang", "0.5.19"],
    ));
    assert!(line.contains("SGLang 0.5.19: broken venv"), "{line}");
}

#[test]
fn a_probe_that_raises_names_release_and_case_and_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let raised = json!({"release": "0.5.19", "python": "3.11.7", "torch": "2.13.0", "stubs": [],
        "inputs": {"context_len": 1024, "pool": 512, "overlong": 600, "valid": 100},
        "cases": {"input-cap": {"error": "AttributeError: boom (tp_worker.py:1)"}}});
    fake_venv(
        home.path(),
        "0.5.19",
        Some(&format!("#!/bin/sh\necho '{raised}'\nexit 3\n")),
    );
    let out = home.path().join("receipts");
    let line = one_error_line(&kvw(
        home.path(),
        &[
            "upstream",
            "run",
            "--sglang",
            "0.5.19",
            "--cases",
            "input-cap",
            "--out",
            out.to_str().unwrap(),
        ],
    ));
    assert!(
        line.contains("SGLang 0.5.19, case input-cap: the probe raised AttributeError: boom"),
        "{line}"
    );
    assert!(!out.exists());
}

#[test]
fn reproduce_without_the_venv_says_so_in_one_line() {
    let home = tempfile::tempdir().unwrap();
    let upstream = BTreeMap::from([("input_cap".to_string(), json!(506))]);
    let engine = upstream.clone();
    let p = UpstreamRunPredicate {
        release: "0.5.19".into(),
        wheel: "sglang.whl".into(),
        wheel_sha256: "a".repeat(64),
        python: "3.11.7".into(),
        torch: "2.13.0".into(),
        probe_sha256: "b".repeat(64),
        case: "input-cap".into(),
        fixes: vec![],
        stubs: vec![],
        fields: compare(&upstream, &engine, |_| None),
        upstream,
        engine,
        kvw_version: "0".into(),
    };
    let signer = Signer::generate();
    let name = "upstream-0-5-19-input-cap.json";
    let env = kvw_evidence::sign_statement(name, &p, &signer).unwrap();
    let file = home.path().join(name);
    std::fs::write(&file, serde_json::to_vec(&env).unwrap()).unwrap();
    signer
        .public()
        .save(home.path().join("kvw.pub.json"))
        .unwrap();
    let f = file.to_str().unwrap();
    let ok = kvw(home.path(), &["verify", f]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("upstream run input-cap on SGLang 0.5.19"));
    let out = kvw(home.path(), &["verify", f, "--reproduce"]);
    assert!(!out.status.success());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("--reproduce needs the SGLang 0.5.19 venv"),
        "{text}"
    );
}

#[test]
fn require_agree_all_fails_on_an_unexplained_difference() {
    let home = tempfile::tempdir().unwrap();
    // The real cap for these inputs is min(1023, 511) - 5 = 506; say 507.
    let wrong = json!({"release": "0.5.19", "python": "3.11.7", "torch": "2.13.0", "stubs": [],
        "inputs": {"context_len": 1024, "pool": 512, "overlong": 600, "valid": 100},
        "cases": {"input-cap": {"fields": {"input_cap": 507, "rejects_at_cap": true,
            "rejects_below_cap": false}}}});
    fake_venv(
        home.path(),
        "0.5.19",
        Some(&format!("#!/bin/sh\necho '{wrong}'\n")),
    );
    let args = |require: &'static str| {
        vec![
            "upstream",
            "run",
            "--sglang",
            "0.5.19",
            "--cases",
            "input-cap",
            "--require-agree",
            require,
        ]
    };
    let line = one_error_line(&kvw(home.path(), &args("all")));
    assert!(
        line.contains("real SGLang and the engine differ: input-cap on 0.5.19"),
        "{line}"
    );
    let out = kvw(home.path(), &args("aborted-final-result"));
    assert!(out.status.success(), "only input-cap differs");
}
