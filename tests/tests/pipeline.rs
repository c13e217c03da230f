//! probe → receipt → bundle → verify, across the engine and evidence crates,
//! with the same calls `kvw bundle` and `kvw verify --reproduce` make.

use std::path::Path;
use std::process::Command;

use kvw_engine::probe::{incident_config, run, ValidConfig};
use kvw_evidence::bundle::VerifyOptions;
use kvw_evidence::{
    sign_predicate, verify_bundle, write_bundle, Fix, PoisonMode, ProbeConfig, ProbePredicate,
    Scale, Signer,
};

fn configs() -> Vec<(String, ValidConfig)> {
    [
        ("none", vec![]),
        ("reject", vec![Fix::RetireUnadmittedReject]),
        ("tags", vec![Fix::PageTags]),
    ]
    .into_iter()
    .map(|(name, fixes)| {
        let c = incident_config(Scale::Walkthrough, &fixes, PoisonMode::Off, 2026).unwrap();
        (format!("incident-walkthrough-{name}.json"), c)
    })
    .collect()
}

fn write(dir: &Path, signer: &Signer) {
    let receipts = configs()
        .into_iter()
        .map(|(name, config)| {
            let p = run(&config).unwrap();
            let env = sign_predicate(&name, &p, signer).unwrap();
            (name, env, p)
        })
        .collect();
    write_bundle(dir, receipts, signer).unwrap();
}

/// What `kvw verify --reproduce` does with a recorded config: validate it
/// once, then run it.
fn reproduce(c: &ProbeConfig) -> Result<ProbePredicate, String> {
    let c = ValidConfig::new(c.clone()).map_err(|e| e.to_string())?;
    run(&c).map_err(|e| e.to_string())
}

#[test]
fn a_bundle_of_real_probes_verifies_and_reproduces() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bundle");
    let signer = Signer::generate();
    write(&dir, &signer);

    let report = verify_bundle(
        &dir,
        &VerifyOptions {
            trusted_key: Some(signer.public()),
            reproduce: Some(&reproduce),
            reproduce_other: None,
        },
    )
    .unwrap();
    assert!(report.ok(), "{report}");
    assert_eq!(report.receipts.len(), 3);

    // GNU sha256sum accepts the manifest as written.
    let sums = Command::new("sha256sum")
        .args(["-c", "SHA256SUMS"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        sums.status.success(),
        "{}",
        String::from_utf8_lossy(&sums.stdout)
    );

    // Another key is refused.
    let other = Signer::generate();
    let err = verify_bundle(
        &dir,
        &VerifyOptions {
            trusted_key: Some(other.public()),
            reproduce: None,
            reproduce_other: None,
        },
    );
    assert!(
        err.map(|r| !r.ok()).unwrap_or(true),
        "a foreign key must not verify"
    );
}

#[test]
fn a_receipt_whose_config_was_edited_and_resigned_does_not_reproduce() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bundle");
    let signer = Signer::generate();
    // Sign a predicate whose verdict was altered: signature and digests are
    // consistent, only a re-run can tell.
    let (name, config) = configs().remove(0);
    let mut p = run(&config).unwrap();
    p.verdict.leak = false;
    p.verdict.outcome = kvw_evidence::Outcome::Refused;
    let env = sign_predicate(&name, &p, &signer).unwrap();
    write_bundle(&dir, vec![(name.clone(), env, p)], &signer).unwrap();

    let plain = verify_bundle(
        &dir,
        &VerifyOptions {
            trusted_key: Some(signer.public()),
            reproduce: None,
            reproduce_other: None,
        },
    )
    .unwrap();
    assert!(plain.ok(), "signatures alone cannot see the edit: {plain}");
    let rerun = verify_bundle(
        &dir,
        &VerifyOptions {
            trusted_key: Some(signer.public()),
            reproduce: Some(&reproduce),
            reproduce_other: None,
        },
    );
    let failed = match rerun {
        Ok(r) => !r.ok(),
        Err(_) => true,
    };
    assert!(failed, "--reproduce must catch an edited verdict");
}
