//! Randomized runs: every fix on keeps every invariant; no fix breaks one,
//! and the shrunk case still breaks it.

use kvw_engine::fuzz::{generate, run_case, shrink};
use kvw_evidence::Fix;

#[test]
fn all_fixes_keep_every_invariant_and_none_breaks_one() {
    let mut found = None;
    for i in 0..80 {
        let case = generate(2026, i);
        let all = run_case(&case, &Fix::ALL);
        assert!(
            all.violation.is_none(),
            "case {i} with all fixes: {:?}\n{case:?}",
            all.violation
        );
        if found.is_none() {
            if let Some(v) = run_case(&case, &[]).violation {
                found = Some((case, v));
            }
        }
    }
    let (case, v) = found.expect("no fixes: some run breaks an invariant");
    let small = shrink(&case, &[], v.invariant);
    let again = run_case(&small, &[])
        .violation
        .expect("the shrunk case still fails");
    assert_eq!(again.invariant, v.invariant);
    assert!(small.requests.len() <= case.requests.len());
    // The shrunk case is guarded: with every fix it holds.
    assert!(run_case(&small, &Fix::ALL).violation.is_none());
}
