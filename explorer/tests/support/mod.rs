//! Signed receipts of the kinds the published bundle may lack (a model
//! check's counterexample, a shrunk randomized run), made by the real
//! checker and engine and signed with the sample key. Shared by the
//! explorer's tests and the `results_bundle` example the browser tests
//! build a site from.

#![allow(dead_code)]

use kvw_check::{run, CheckOptions, FaultBudget};
use kvw_evidence::receipt::sign_statement;
use kvw_evidence::signing::Signer;
use kvw_evidence::{Envelope, Fix};

/// The model check of `fixes` with one request, signed as `<stem>.json`:
/// (file name, envelope, steps in its counterexample path).
pub fn model_check_receipt(
    fixes: &[Fix],
    stem: &str,
    signer: &Signer,
) -> (String, Envelope, usize) {
    let report = run(
        &CheckOptions {
            fixes: fixes.to_vec(),
            requests: 1,
            faults: FaultBudget::default(),
            ..CheckOptions::default()
        },
        &mut |_| {},
    )
    .expect("valid bounds");
    let predicate = kvw_check::predicate(&report, kvw_engine::probe::engine_info());
    let steps = predicate
        .counterexample
        .as_ref()
        .map_or(0, |c| c.steps.len());
    let name = format!("{stem}.json");
    let envelope = sign_statement(&name, &predicate, signer).expect("signs");
    (name, envelope, steps)
}

/// The first violating random case without fixes, shrunk, as a signed
/// fuzz receipt `fuzz-fixes-none-seed-2026.json`.
pub fn fuzz_receipt(signer: &Signer) -> (String, Envelope) {
    use kvw_engine::fuzz;
    use kvw_evidence::scenario::{FuzzPredicate, InvariantCount};
    let (i, case, inv) = (0..500)
        .find_map(|i| {
            let case = fuzz::generate(2026, i);
            let v = fuzz::run_case(&case, &[]).violation?;
            Some((i, case, v.invariant))
        })
        .expect("a violating case without fixes");
    let small = fuzz::shrink(&case, &[], inv);
    let c = fuzz::counterexample(i, &case, &small, &[]).expect("the shrunk case still fails");
    let p = FuzzPredicate {
        engine: kvw_engine::probe::engine_info(),
        fixes: vec![],
        seed: 2026,
        runs: i + 1,
        violating_runs: 1,
        stalled_runs: 0,
        by_invariant: vec![InvariantCount {
            invariant: c.invariant.clone(),
            runs: 1,
        }],
        counterexample: Some(c),
    };
    let name = "fuzz-fixes-none-seed-2026.json".to_string();
    let envelope = sign_statement(&name, &p, signer).unwrap();
    (name, envelope)
}

/// A static result page reads without scripts (no module script, no wasm)
/// and carries the browser's check of each receipt it reports: the data the
/// check reads and one banner per receipt.
pub fn assert_static_with_checks(html: &str, stems: &[&str]) {
    assert!(
        !html.contains("type=\"module\"") && !html.contains("pkg/"),
        "a static result page loads no wasm"
    );
    assert!(html.contains("id=\"kvw-results\""), "no browser check data");
    assert!(html.contains("window.kvwVerifyReceipt"), "no browser check");
    for stem in stems {
        assert!(
            html.contains(&format!("id=\"kvw-trust-{stem}\"")),
            "no banner for {stem}"
        );
        assert!(
            html.contains(&format!("\"stem\":\"{stem}\"")),
            "{stem} is not in the check's list"
        );
    }
}
