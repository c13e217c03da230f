//! `kvw scenario`, `kvw gates` and `kvw fuzz` as a user meets them: exit
//! codes, one-line errors, and signed receipts that `kvw verify
//! --reproduce` accepts.

use std::process::{Command, Output};

fn kvw(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kvw"))
        .args(args)
        .output()
        .expect("run kvw")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_scenario_holds_with_its_guard_and_fails_without() {
    let name = "test_rejected_request_is_retired_at_each_pd_door.prefill";
    let on = kvw(&[
        "scenario",
        "run",
        name,
        "--fixes",
        "retire-unadmitted-reject",
    ]);
    assert_eq!(on.status.code(), Some(0), "{}", text(&on));
    let off = kvw(&["scenario", "run", name, "--fixes", "none"]);
    assert_eq!(off.status.code(), Some(1), "{}", text(&off));
    let bad = kvw(&["scenario", "run", "no-such-scenario"]);
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("unknown scenario"), "{err}");
}

#[test]
fn list_json_names_the_upstream_tests() {
    let o = kvw(&["scenario", "list", "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let items = v.as_array().unwrap();
    let upstream: Vec<_> = items.iter().filter(|i| !i["upstream"].is_null()).collect();
    // 15 admission subtests/tests and 11 collected cleanup cases.
    assert_eq!(upstream.len(), 26);
    for i in items {
        assert!(i["name"].is_string() && i["gate"].is_string() && i["description"].is_string());
    }
}

#[test]
fn gates_and_fuzz_exit_codes_and_receipts_verify() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert!(kvw(&["keygen", "--out", d]).status.success());
    let key = format!("{d}/signing-key.json");
    let public = format!("{d}/kvw.pub.json");
    let all = kvw(&["gates", "--fixes", "all", "--key", &key, "--out", d]);
    assert_eq!(all.status.code(), Some(0), "{}", text(&all));
    let none = kvw(&["gates", "--fixes", "none"]);
    assert_eq!(none.status.code(), Some(1), "{}", text(&none));
    assert!(text(&none).contains("not exercised"));
    let fuzz = kvw(&[
        "fuzz", "--fixes", "none", "--runs", "60", "--key", &key, "--out", d,
    ]);
    assert_eq!(fuzz.status.code(), Some(1), "{}", text(&fuzz));
    assert!(text(&fuzz).contains("runs/s") && text(&fuzz).contains("shrunk"));
    for file in [
        "gates-fixes-all.json".to_string(),
        "scenario-late_write_corrupts_next_tenant-fixes-all.json".to_string(),
        "fuzz-fixes-none-seed-2026.json".to_string(),
    ] {
        let path = format!("{d}/{file}");
        let v = kvw(&["verify", &path, "--key", &public, "--reproduce"]);
        assert!(v.status.success(), "{file}: {}", text(&v));
        assert!(text(&v).contains("[reproduced]"), "{}", text(&v));
    }
    // A tampered receipt is refused.
    let path = format!("{d}/gates-fixes-all.json");
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len() / 2;
    bytes[n] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    assert!(!kvw(&["verify", &path, "--key", &public]).status.success());
}

#[test]
fn a_bundle_carries_the_gate_runs_for_none_and_all_and_reproduces_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert!(kvw(&["keygen", "--out", d]).status.success());
    let key = format!("{d}/signing-key.json");
    let out = format!("{d}/bundle");
    let b = kvw(&[
        "bundle",
        "--out",
        &out,
        "--key",
        &key,
        "--scales",
        "walkthrough",
    ]);
    assert!(b.status.success(), "{}", text(&b));
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(format!("{out}/index.json")).unwrap()).unwrap();
    let others: Vec<&str> = index["others"]
        .as_array()
        .expect("index lists the other receipts")
        .iter()
        .map(|o| o["file"].as_str().unwrap())
        .collect();
    let scenarios = kvw(&["scenario", "list", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&scenarios.stdout).unwrap();
    let n = listed.as_array().unwrap().len();
    assert_eq!(others.len(), 2 * (n + 1), "{others:?}");
    for label in ["none", "all"] {
        assert!(others.contains(&format!("receipts/gates-fixes-{label}.json").as_str()));
        assert!(others.contains(
            &format!("receipts/scenario-late_write_corrupts_next_tenant-fixes-{label}.json")
                .as_str()
        ));
    }
    let v = kvw(&["verify", &out, "--reproduce"]);
    assert!(v.status.success(), "{}", text(&v));
    let t = text(&v);
    let line = |file: &str| {
        t.lines()
            .find(|l| l.contains(&format!("receipts/{file} ")))
            .unwrap_or_else(|| panic!("no line for {file}: {t}"))
            .to_string()
    };
    let none = line("gates-fixes-none.json");
    assert!(
        none.starts_with("ok") && none.contains("[reproduced]"),
        "{none}"
    );
    assert!(
        !none.contains(", 0 fail,"),
        "without fixes some rows fail: {none}"
    );
    let all = line("gates-fixes-all.json");
    assert!(all.contains(&format!("{n} of {n} rows pass")), "{all}");
    let pre = line("scenario-late_write_corrupts_next_tenant-fixes-none.json");
    assert!(
        pre.contains("fixes=none: fail") && pre.contains("[reproduced]"),
        "{pre}"
    );
    let post = line("scenario-late_write_corrupts_next_tenant-fixes-all.json");
    assert!(
        post.contains("fixes=all: pass") && post.contains("[reproduced]"),
        "{post}"
    );
}

#[test]
fn gates_and_a_scenario_speak_the_readers_language() {
    let en = text(&kvw(&["gates", "--fixes", "none"]));
    let it = text(&kvw(&["gates", "--fixes", "none", "--lang", "it"]));
    assert!(en.contains("fails without deferred-release"), "{en}");
    assert!(!it.contains("fails without"), "{it}");
    assert!(it.contains("fallisce senza deferred-release"), "{it}");
    assert!(
        it.contains("non esercitato senza retire-unadmitted-reject"),
        "{it}"
    );
    let one = text(&kvw(&[
        "scenario",
        "run",
        "late_write_corrupts_next_tenant",
        "--fixes",
        "none",
        "--lang",
        "it",
    ]));
    assert!(one.contains("decode va in timeout su acme"), "{one}");
    assert!(
        one.contains(
            "scritture arrivate in pagine che il loro autore non possedeva più: pagina 6 (acme-1)"
        ),
        "{one}"
    );
    let bad = kvw(&["gates", "--lang", "fr"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("fr"), "{err}");
}
