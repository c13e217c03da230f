//! A published bundle verifies by its facts, never by its words: the
//! committed incident bundle keeps verifying when its README's prose is
//! rewritten, and is refused when a README row misstates a fact.

use std::path::{Path, PathBuf};

use kvw_evidence::bundle::{read_bundle, sums, README_FILE, SUMS_FILE};
use kvw_evidence::{verify_bundle, BundleReport, EvidenceError, VerifyOptions};

/// The committed bundle, relative to this crate.
fn committed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bundles/incident")
}

/// A copy of the committed bundle whose README is `edit(README)`, with
/// `SHA256SUMS` (unsigned) sealed over the new README.
fn with_readme(edit: impl Fn(&str) -> String) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bundle");
    let mut all = read_bundle(&committed()).unwrap().files;
    let readme = String::from_utf8(all[README_FILE].clone()).unwrap();
    all.insert(README_FILE.into(), edit(&readme).into_bytes());
    all.remove(SUMS_FILE);
    let sums = sums::render(&all);
    all.insert(SUMS_FILE.into(), sums.into_bytes());
    for (rel, bytes) in &all {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    (tmp, dir)
}

fn verify(dir: &Path) -> Result<BundleReport, EvidenceError> {
    verify_bundle(dir, &VerifyOptions::default())
}

/// A README row naming a receipt.
fn is_row(line: &str) -> bool {
    line.starts_with("| `receipts/")
}

#[test]
fn committed_bundle_verifies_with_its_readme_prose_rewritten() {
    let before = verify(&committed()).expect("the committed bundle verifies");
    assert!(before.ok(), "{}", before.summary());
    // Other words everywhere but in the rows: every full stop gone, the
    // headings and prose in Italian-ish words, the rows in reverse order.
    let (_tmp, dir) = with_readme(|text| {
        let (rows, prose): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| is_row(l));
        let mut out: Vec<String> = prose
            .iter()
            .map(|l| {
                l.replace('.', "")
                    .replace("receipt", "ricevuta")
                    .replace("Receipts", "Ricevute")
            })
            .collect();
        out.extend(rows.iter().rev().map(|r| r.to_string()));
        out.join("\n")
    });
    let after = verify(&dir).expect("rewording the README keeps the bundle verifying");
    assert!(after.ok(), "{}", after.summary());
    assert_eq!(after.receipts.len(), before.receipts.len());
}

#[test]
fn readme_row_misstating_a_fact_is_refused() {
    let (_tmp, dir) = with_readme(|text| {
        text.lines()
            .map(|l| {
                if is_row(l) && l.contains("| leak |") {
                    l.replacen("| leak |", "| refused |", 1)
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    assert!(std::fs::read_to_string(dir.join(README_FILE))
        .unwrap()
        .contains("| refused |"));
    let err = verify(&dir).expect_err("a README saying no leak where the index says leak");
    let text = err.to_string();
    assert!(
        text.contains("does not state what index.json says"),
        "{text}"
    );
    assert!(text.contains("outcome leak"), "{text}");
}

#[test]
fn readme_without_a_row_or_with_an_invented_one_is_refused() {
    let (_tmp, dir) = with_readme(|text| {
        let mut dropped = false;
        text.lines()
            .filter(|l| {
                let drop = !dropped && is_row(l);
                dropped |= drop;
                !drop
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    let err = verify(&dir)
        .expect_err("a README missing a receipt")
        .to_string();
    assert!(err.contains("no row for receipts/"), "{err}");

    let (_tmp, dir) = with_readme(|text| {
        format!(
            "{text}| `receipts/made-up.json` | walkthrough | none | off | 200 | correct | 0 |\n"
        )
    });
    let err = verify(&dir)
        .expect_err("a README inventing a receipt")
        .to_string();
    assert!(err.contains("receipts/made-up.json"), "{err}");
}

#[test]
fn the_evidence_crate_renders_no_sentences() {
    // Words live in kvw-words, which depends on this crate and not the
    // other way round: no sentence can be part of what verification checks.
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    assert!(!manifest.contains("kvw-words"), "{manifest}");
}
