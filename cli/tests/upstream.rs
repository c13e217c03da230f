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

/// A signed upstream-run receipt of `case` on `release` in `dir`, as
/// `kvw upstream run --out` names it; the real code's `door` is `door`.
fn write_receipt(dir: &Path, signer: &Signer, release: &str, case: &str, door: &str) -> String {
    let upstream = BTreeMap::from([("door".to_string(), json!(door))]);
    let engine = upstream.clone();
    let p = UpstreamRunPredicate {
        release: release.into(),
        wheel: "sglang.whl".into(),
        wheel_sha256: "a".repeat(64),
        python: "3.11.7".into(),
        torch: "2.13.0".into(),
        probe_sha256: "b".repeat(64),
        case: case.into(),
        fixes: kvw_evidence::upstream_run::release_fixes(release)
            .unwrap()
            .to_vec(),
        stubs: vec![],
        fields: compare(&upstream, &engine, |_| None),
        upstream,
        engine,
        kvw_version: "0".into(),
    };
    let name = kvw_evidence::receipt_name::upstream(release, case);
    let env = kvw_evidence::sign_statement(&name, &p, signer).unwrap();
    std::fs::write(dir.join(&name), serde_json::to_vec(&env).unwrap()).unwrap();
    name
}

#[test]
fn reproduce_without_the_venv_says_so_in_one_line() {
    let home = tempfile::tempdir().unwrap();
    let signer = Signer::generate();
    let name = write_receipt(home.path(), &signer, "0.5.19", "input-cap", "admit");
    let file = home.path().join(name);
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
    // Without the venv the receipt is still checked, and the line says
    // what would re-run it; nothing is installed.
    let out = kvw(home.path(), &["verify", f, "--reproduce"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("the SGLang 0.5.19 venv is not set up here"),
        "{text}"
    );
    assert!(!home.path().join("sglang-0.5.19").exists());
    // A venv that is there but broken is an error, not a skip.
    std::fs::create_dir_all(home.path().join("sglang-0.5.19")).unwrap();
    std::fs::write(home.path().join("sglang-0.5.19/.kvw-ready"), "{").unwrap();
    let out = kvw(home.path(), &["verify", f, "--reproduce"]);
    assert!(!out.status.success());
}

#[test]
fn a_bundle_carries_upstream_runs_signed_by_its_key_and_refuses_others() {
    let home = tempfile::tempdir().unwrap();
    let d = home.path();
    let key = d.join("signing-key.json");
    assert!(kvw(d, &["keygen", "--out", d.to_str().unwrap()])
        .status
        .success());
    let signer = Signer::load(&key).unwrap();
    let runs = d.join("upstream-run");
    std::fs::create_dir(&runs).unwrap();
    let (prefill, decode) = (
        kvw_evidence::upstream_run::DOOR_CASES[0].1,
        kvw_evidence::upstream_run::DOOR_CASES[1].1,
    );
    let mut names = Vec::new();
    for (release, door) in [("0.5.19", "admit"), ("0.5.21", "retire")] {
        names.push(write_receipt(&runs, &signer, release, prefill, door));
        names.push(write_receipt(&runs, &signer, release, decode, door));
    }
    signer.public().save(runs.join("kvw.pub.json")).unwrap();
    let (k, r) = (key.to_str().unwrap(), runs.to_str().unwrap());
    let bundle = |out: &str, runs: &str| {
        let out = d.join(out);
        let o = out.to_str().unwrap().to_string();
        kvw(
            d,
            &[
                "bundle",
                "--out",
                &o,
                "--key",
                k,
                "--scales",
                "walkthrough",
                "--upstream-run",
                runs,
            ],
        )
    };
    let b = bundle("bundle", r);
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    assert!(String::from_utf8_lossy(&b.stdout).contains("4 upstream-run receipt(s)"));
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("bundle/index.json")).unwrap()).unwrap();
    let carried: Vec<&str> = index["others"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["facts"]["upstream_run"].is_object())
        .map(|o| o["file"].as_str().unwrap())
        .collect();
    assert_eq!(carried.len(), 4, "{index}");
    for name in &names {
        assert!(
            carried.contains(&format!("receipts/{name}").as_str()),
            "{name}"
        );
    }
    let v = kvw(d, &["verify", d.join("bundle").to_str().unwrap()]);
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));

    // The site draws each receipt's page and, beside steps 2 and 5, what
    // each release decided, linked to that page.
    let site = d.join("site");
    let s = kvw(
        d,
        &[
            "site",
            "build",
            "--bundle",
            d.join("bundle").to_str().unwrap(),
            "--out",
            site.to_str().unwrap(),
        ],
    );
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    // Hydration markers between text nodes are not part of what is read.
    let read = |page: &str| {
        std::fs::read_to_string(site.join(page))
            .unwrap()
            .replace("<!---->", "")
            .replace("<!>", "")
    };
    let page = read("en/incident-walkthrough-fixes-none.html");
    for (step, case) in [(2, prefill), (5, decode)] {
        let at = page.find(&format!("id=\"step-{step}\"")).unwrap();
        let end = page[at..].find("</section>").unwrap() + at;
        let section = &page[at..end];
        for (release, word) in [("0.5.19", "admitted"), ("0.5.21", "retired")] {
            let stem = kvw_evidence::receipt_name::upstream(release, case);
            let stem = stem.trim_end_matches(".json");
            assert!(
                section.contains(&format!("href=\"../en/{stem}.html\"")),
                "step {step} links {stem}"
            );
            assert!(
                section.contains(&format!("SGLang {release}</a>: {word}")),
                "step {step}: {release} {word}"
            );
            assert!(site.join(format!("en/{stem}.html")).exists());
            assert!(site.join(format!("it/{stem}.html")).exists());
        }
    }
    let it = read("it/incident-walkthrough-fixes-none.html");
    assert!(it.contains("SGLang 0.5.21</a>: ritirata"));

    // Signed by another key: refused before any probe runs, nothing written.
    let other = d.join("other-runs");
    std::fs::create_dir(&other).unwrap();
    write_receipt(&other, &Signer::generate(), "0.5.19", prefill, "admit");
    let o = bundle("refused", other.to_str().unwrap());
    let line = one_error_line(&o);
    assert!(
        line.contains("--upstream-run") && line.contains("same key"),
        "{line}"
    );
    assert!(!d.join("refused").exists());
    // A file the differential does not write, or a link, is refused.
    std::fs::write(runs.join("notes.txt"), "x").unwrap();
    let line = one_error_line(&bundle("refused", r));
    assert!(line.contains("unexpected file notes.txt"), "{line}");
    std::fs::remove_file(runs.join("notes.txt")).unwrap();
    std::os::unix::fs::symlink(runs.join(&names[0]), runs.join("upstream-link.json")).unwrap();
    let line = one_error_line(&bundle("refused", r));
    assert!(line.contains("upstream-link.json"), "{line}");
    assert!(!d.join("refused").exists());
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
