//! Writing bundles and every way a bundle folder is refused.

use std::path::{Path, PathBuf};

use kvw_evidence::bundle::{KeySource, SUMS_FILE};
use kvw_evidence::canonical::sha256_hex;
use kvw_evidence::sample::{sample_config, sample_name, sample_predicate};
use kvw_evidence::{
    sign_predicate, verify_bundle, write_bundle, Envelope, Fix, PoisonMode, ProbeConfig,
    ProbePredicate, Scale, Signer, VerifyOptions,
};

fn signer() -> Signer {
    Signer::from_seed(&[3u8; 32])
}

fn receipts(signer: &Signer) -> Vec<(String, Envelope, ProbePredicate)> {
    [vec![], vec![Fix::RetireAbortedPrefillResult]]
        .iter()
        .map(|fixes| {
            let p = sample_predicate(sample_config(Scale::Walkthrough, fixes, PoisonMode::Off, 5));
            let name = sample_name(&p.config);
            let env = sign_predicate(&name, &p, signer).unwrap();
            (name, env, p)
        })
        .collect()
}

/// A fresh, valid bundle in a temporary folder.
fn bundle() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bundle");
    let s = signer();
    write_bundle(&dir, receipts(&s), &s).unwrap();
    (tmp, dir)
}

fn verify(dir: &Path) -> Result<kvw_evidence::BundleReport, kvw_evidence::EvidenceError> {
    verify_bundle(dir, &VerifyOptions::default())
}

fn expect_err(dir: &Path, needle: &str) {
    let err = verify(dir).expect_err("bundle must be refused");
    let text = err.to_string();
    assert!(
        text.contains(needle),
        "error {text:?} should mention {needle:?}"
    );
    assert!(!text.contains('\n'), "error must be one line: {text:?}");
}

fn append_sum(dir: &Path, line: &str) {
    let path = dir.join(SUMS_FILE);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(line);
    text.push('\n');
    std::fs::write(path, text).unwrap();
}

/// Rewrite SHA256SUMS so it matches the folder again (tampering that a
/// careless attacker would also do).
/// Rewrite the bundle's `index.json` after `edit`.
fn edit_index(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("index.json");
    let mut index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut index);
    std::fs::write(&path, serde_json::to_vec_pretty(&index).unwrap()).unwrap();
}

fn reseal(dir: &Path) {
    let mut lines = vec![];
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for entry in std::fs::read_dir(dir.join(&rel)).unwrap() {
            let entry = entry.unwrap();
            let rel = rel.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                stack.push(rel);
            } else if rel != Path::new(SUMS_FILE) {
                let bytes = std::fs::read(dir.join(&rel)).unwrap();
                lines.push(format!("{}  {}\n", sha256_hex(&bytes), rel.display()));
            }
        }
    }
    lines.sort();
    std::fs::write(dir.join(SUMS_FILE), lines.concat()).unwrap();
}

#[test]
fn written_bundle_verifies() {
    let (_tmp, dir) = bundle();
    let report = verify(&dir).unwrap();
    assert!(report.ok(), "{report}");
    assert_eq!(report.receipts.len(), 2);
    assert_eq!(report.key_source, KeySource::Bundle);
    assert_eq!(report.files_checked, 7);
    assert!(report
        .to_string()
        .contains("proves integrity, not who signed"));
    for name in [
        "README.md",
        "index.json",
        "kvw.pub.json",
        "manifest.json",
        "SHA256SUMS",
    ] {
        assert!(dir.join(name).is_file(), "{name}");
    }
    let listing = std::fs::read_to_string(dir.join(SUMS_FILE)).unwrap();
    assert!(!listing.contains("SHA256SUMS"));
    let mut sorted: Vec<&str> = listing.lines().collect();
    sorted.sort_by_key(|l| &l[66..]);
    assert_eq!(sorted, listing.lines().collect::<Vec<_>>());
}

#[test]
fn no_private_key_in_bundle() {
    let (_tmp, dir) = bundle();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(!text.contains("\"private\""), "{}", path.display());
            assert!(
                !text.contains(&hex::encode([3u8; 32])),
                "{}",
                path.display()
            );
        }
    }
}

#[test]
fn trusted_key_and_wrong_trusted_key() {
    let (_tmp, dir) = bundle();
    let ok = verify_bundle(
        &dir,
        &VerifyOptions {
            trusted_key: Some(signer().public()),
            reproduce: None,
            reproduce_other: None,
        },
    )
    .unwrap();
    assert!(ok.ok());
    assert_eq!(ok.key_source, KeySource::Trusted);
    let other = Signer::from_seed(&[4u8; 32]).public();
    // The signed manifest is checked with the trusted key first.
    let bad = verify_bundle(
        &dir,
        &VerifyOptions {
            trusted_key: Some(other),
            reproduce: None,
            reproduce_other: None,
        },
    )
    .unwrap_err();
    assert!(
        bad.to_string()
            .contains("manifest.json: no signature by key"),
        "{bad}"
    );
}

#[test]
fn reproduce_callback() {
    let (_tmp, dir) = bundle();
    let same = |c: &ProbeConfig| -> Result<ProbePredicate, String> {
        let mut p = sample_predicate(c.clone());
        p.engine.commit = "another-commit".into();
        Ok(p)
    };
    let report = verify_bundle(
        &dir,
        &VerifyOptions {
            trusted_key: None,
            reproduce: Some(&same),
            reproduce_other: None,
        },
    )
    .unwrap();
    assert!(report.ok(), "{report}");
    assert!(report.to_string().contains("[reproduced]"));

    let different = |c: &ProbeConfig| -> Result<ProbePredicate, String> {
        let mut p = sample_predicate(c.clone());
        p.verdict.latency_us += 1_000_000;
        Ok(p)
    };
    let report = verify_bundle(
        &dir,
        &VerifyOptions {
            trusted_key: None,
            reproduce: Some(&different),
            reproduce_other: None,
        },
    )
    .unwrap();
    assert!(!report.ok());
    assert!(
        report.to_string().contains("does not reproduce"),
        "{report}"
    );

    let failing = |_: &ProbeConfig| -> Result<ProbePredicate, String> { Err("no engine".into()) };
    let report = verify_bundle(
        &dir,
        &VerifyOptions {
            trusted_key: None,
            reproduce: Some(&failing),
            reproduce_other: None,
        },
    )
    .unwrap();
    assert!(
        report.to_string().contains("re-run failed: no engine"),
        "{report}"
    );
}

#[test]
fn sums_entry_dot_dot() {
    let (tmp, dir) = bundle();
    std::fs::write(tmp.path().join("x"), b"outside").unwrap();
    append_sum(&dir, &format!("{}  ../x", sha256_hex(b"outside")));
    expect_err(&dir, "points outside the bundle");
}

#[test]
fn sums_entry_absolute_path() {
    let (tmp, dir) = bundle();
    let outside = tmp.path().join("x");
    std::fs::write(&outside, b"outside").unwrap();
    append_sum(
        &dir,
        &format!("{}  {}", sha256_hex(b"outside"), outside.display()),
    );
    expect_err(&dir, "absolute path");
}

#[cfg(unix)]
#[test]
fn symlink_out() {
    let (tmp, dir) = bundle();
    let outside = tmp.path().join("secret");
    std::fs::write(&outside, b"outside").unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("receipts/link.json")).unwrap();
    append_sum(
        &dir,
        &format!("{}  receipts/link.json", sha256_hex(b"outside")),
    );
    expect_err(&dir, "symbolic link");
}

#[cfg(unix)]
#[test]
fn symlink_inside_is_refused_too() {
    let (_tmp, dir) = bundle();
    std::os::unix::fs::symlink("index.json", dir.join("copy.json")).unwrap();
    expect_err(&dir, "symbolic link");
}

#[cfg(unix)]
#[test]
fn bundle_folder_itself_a_symlink() {
    let (tmp, dir) = bundle();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    expect_err(&link, "symbolic link");
}

#[test]
fn file_present_but_unlisted() {
    let (_tmp, dir) = bundle();
    std::fs::write(dir.join("receipts/extra.json"), b"{}").unwrap();
    expect_err(&dir, "not listed in SHA256SUMS");
}

#[test]
fn listed_but_missing() {
    let (_tmp, dir) = bundle();
    std::fs::remove_file(dir.join("README.md")).unwrap();
    expect_err(&dir, "README.md is listed but missing");
}

#[test]
fn digest_mismatch() {
    let (_tmp, dir) = bundle();
    let path = dir.join("README.md");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push('x');
    std::fs::write(path, text).unwrap();
    expect_err(&dir, "sha256 mismatch");
}

#[test]
fn empty_folder() {
    let tmp = tempfile::tempdir().unwrap();
    expect_err(tmp.path(), "is empty, not a bundle");
}

#[test]
fn missing_sums() {
    let (_tmp, dir) = bundle();
    std::fs::remove_file(dir.join(SUMS_FILE)).unwrap();
    expect_err(&dir, "no SHA256SUMS");
}

#[test]
fn missing_index() {
    let (_tmp, dir) = bundle();
    std::fs::remove_file(dir.join("index.json")).unwrap();
    reseal(&dir);
    expect_err(&dir, "no index.json");
}

#[test]
fn malformed_sums_line() {
    let (_tmp, dir) = bundle();
    append_sum(&dir, "not a checksum line");
    expect_err(&dir, "SHA256SUMS line");
}

#[test]
fn oversized_receipt_in_bundle() {
    let (_tmp, dir) = bundle();
    let path = dir.join("receipts/incident-walkthrough-none.json");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.resize(kvw_evidence::receipt::MAX_RECEIPT_BYTES as usize + 1, b' ');
    std::fs::write(&path, bytes).unwrap();
    reseal(&dir);
    expect_err(&dir, "limit");
}

#[test]
fn tampered_receipt_with_resealed_sums() {
    let (_tmp, dir) = bundle();
    let path = dir.join("receipts/incident-walkthrough-none.json");
    let mut env = Envelope::from_json(&std::fs::read(&path).unwrap()).unwrap();
    env.signatures[0].sig = Envelope::sign("x", b"y", &signer()).signatures[0]
        .sig
        .clone();
    std::fs::write(&path, env.to_json_pretty()).unwrap();
    reseal(&dir);
    // SHA256SUMS is unsigned; the signed manifest pins the receipt's bytes.
    expect_err(
        &dir,
        "receipts/incident-walkthrough-none.json differs from the file the signed manifest.json lists",
    );
}

#[test]
fn index_entry_not_matching_receipt() {
    let (_tmp, dir) = bundle();
    edit_index(&dir, |index| {
        index["receipts"][0]["verdict"]["leak"] = serde_json::json!(false);
    });
    reseal(&dir);
    expect_err(
        &dir,
        "index.json differs from the file the signed manifest.json lists",
    );
}

#[test]
fn receipt_not_in_index_and_index_entry_without_receipt() {
    let (_tmp, dir) = bundle();
    edit_index(&dir, |index| {
        index["receipts"][0]["file"] = serde_json::json!("receipts/gone.json");
    });
    reseal(&dir);
    expect_err(
        &dir,
        "index.json differs from the file the signed manifest.json lists",
    );
}

#[test]
fn unknown_index_field() {
    let (_tmp, dir) = bundle();
    edit_index(&dir, |index| {
        index["extra"] = serde_json::json!(true);
    });
    reseal(&dir);
    expect_err(&dir, "unknown field");
}

#[test]
fn receipt_renamed() {
    let (_tmp, dir) = bundle();
    std::fs::rename(
        dir.join("receipts/incident-walkthrough-none.json"),
        dir.join("receipts/renamed.json"),
    )
    .unwrap();
    reseal(&dir);
    expect_err(
        &dir,
        "receipts/renamed.json is in the bundle but not in the signed manifest.json",
    );
}

#[test]
fn rewrite_replaces_an_old_bundle() {
    let (_tmp, dir) = bundle();
    let s = signer();
    let mut fewer = receipts(&s);
    fewer.truncate(1);
    write_bundle(&dir, fewer, &s).unwrap();
    assert_eq!(verify(&dir).unwrap().receipts.len(), 1);
}

#[test]
fn refuses_to_overwrite_other_folders_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("notes");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("todo.txt"), b"keep me").unwrap();
    let s = signer();
    let err = write_bundle(&dir, receipts(&s), &s).unwrap_err();
    assert!(err.to_string().contains("not a bundle"), "{err}");
    assert_eq!(std::fs::read(dir.join("todo.txt")).unwrap(), b"keep me");
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn failed_write_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bundle");
    let s = signer();
    // Signed by one key, bundled with another: refused before anything is written.
    let other = Signer::from_seed(&[8u8; 32]);
    assert!(write_bundle(&dir, receipts(&s), &other).is_err());
    assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none());
    // Predicate that differs from the envelope's.
    let mut list = receipts(&s);
    list[0].2.verdict.leak = !list[0].2.verdict.leak;
    assert!(write_bundle(&dir, list, &s).is_err());
    assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none());
}

#[test]
fn writes_into_an_empty_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let s = signer();
    write_bundle(tmp.path(), receipts(&s), &s).unwrap();
    assert!(verify(tmp.path()).unwrap().ok());
}

/// A gates receipt with one failing row, signed as `gates-fixes-none.json`.
fn gates_receipt(s: &Signer) -> (String, Envelope) {
    use kvw_evidence::judged::{Breach, Expected, Observed, StaleWrite, Why};
    use kvw_evidence::scenario::{GateRow, GatesPredicate, ScenarioStatus};
    let engine =
        sample_predicate(sample_config(Scale::Walkthrough, &[], PoisonMode::Off, 5)).engine;
    let p = GatesPredicate {
        engine,
        fixes: vec![],
        rows: vec![GateRow {
            gate: "transfer-read".into(),
            scenario: "late_write_corrupts_next_tenant".into(),
            status: ScenarioStatus::Fail,
            expected: Expected::FailsWithout {
                guard: vec![Fix::DeferredRelease],
            },
            observed: Observed::AssertionFails,
            why: Why::Broke {
                breach: Breach::StaleWrites {
                    writes: vec![StaleWrite {
                        rid: "acme-1".into(),
                        page: 6,
                    }],
                },
                guard_off: vec![Fix::DeferredRelease],
            },
            as_recorded: true,
            trace_sha256: "0".repeat(64),
        }],
        capacity: vec![],
        all_pass: false,
    };
    let name = "gates-fixes-none.json".to_string();
    let env = kvw_evidence::sign_statement(&name, &p, s).unwrap();
    (name, env)
}

#[test]
fn other_kinds_are_listed_signed_and_re_run_through_the_caller() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bundle");
    let s = signer();
    kvw_evidence::bundle::write_bundle_with_others(&dir, receipts(&s), vec![gates_receipt(&s)], &s)
        .unwrap();
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["others"][0]["file"], "receipts/gates-fixes-none.json");
    assert_eq!(
        index["others"][0]["facts"]["gates"],
        serde_json::json!({"fixes": [], "rows": 1, "pass": 0, "fail": 1, "not_exercised": 0})
    );
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(readme.contains("| `receipts/gates-fixes-none.json` | gates | 0/1 pass |"));

    // Without a re-run the line is not marked reproduced; a re-run that
    // agrees marks it; one that disagrees fails that line only.
    let report = verify(&dir).unwrap();
    assert!(report.ok(), "{report}");
    let line = |r: &kvw_evidence::BundleReport| {
        r.receipts
            .iter()
            .find(|l| l.file == "receipts/gates-fixes-none.json")
            .unwrap()
            .clone()
    };
    assert!(!line(&report).result.unwrap().reproduced);
    let agree = |st: &kvw_evidence::VerifiedStatement| {
        assert_eq!(
            st.predicate_type,
            kvw_evidence::scenario::GATES_PREDICATE_TYPE
        );
        Ok(kvw_evidence::bundle::Rerun::Reproduced)
    };
    let opts = VerifyOptions {
        reproduce_other: Some(&agree),
        ..VerifyOptions::default()
    };
    let report = verify_bundle(&dir, &opts).unwrap();
    assert!(report.ok() && line(&report).result.unwrap().reproduced);
    assert!(report.summary().contains("1 reproduced, 0 not re-run"));
    // A kind the caller does not re-run is ok, and its line says so.
    let skip = |_: &kvw_evidence::VerifiedStatement| {
        Ok(kvw_evidence::bundle::Rerun::NotRerun("not here".into()))
    };
    let opts = VerifyOptions {
        reproduce_other: Some(&skip),
        ..VerifyOptions::default()
    };
    let report = verify_bundle(&dir, &opts).unwrap();
    let ok = line(&report).result.unwrap();
    assert!(report.ok() && !ok.reproduced && ok.not_rerun.as_deref() == Some("not here"));
    assert!(report.to_string().contains("[not re-run: not here]"));
    let disagree = |_: &kvw_evidence::VerifiedStatement| Err("re-run differs".to_string());
    let opts = VerifyOptions {
        reproduce_other: Some(&disagree),
        ..VerifyOptions::default()
    };
    let report = verify_bundle(&dir, &opts).unwrap();
    assert_eq!(report.failures(), 1, "{report}");
    assert_eq!(line(&report).result.unwrap_err(), "re-run differs");

    // A probe receipt handed in as another kind is refused, nothing written.
    let other = tmp.path().join("other");
    let mut probes = receipts(&s);
    let (name, env, _) = probes.remove(0);
    let err = kvw_evidence::bundle::write_bundle_with_others(&other, probes, vec![(name, env)], &s)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("not one a bundle carries beside probe runs"),
        "{err}"
    );
    assert!(!other.exists());
}
