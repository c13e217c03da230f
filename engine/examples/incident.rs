//! The incident at walkthrough scale, twice: with no fix the probed tenant's
//! answer carries another tenant's canary; with SGLang PR #36988
//! (`retire-aborted-prefill-result`) it does not.
//!
//! ```sh
//! cargo run -p kvw-engine --example incident
//! ```
//!
//! Each run is the same deterministic probe `kvw probe --scale walkthrough`
//! makes (seed 2026): the probed tenant's prompt fits decode's pool but not
//! prefill's, prefill aborts it, the handoff goes ahead all the same, and
//! decode attends over reserved pages that still hold bytes another tenant
//! freed. The example prints what each run's receipt predicate records and
//! panics if the run without the fix does not leak, or the run with it does.

use kvw_engine::config::{incident_config, DEFAULT_SEED};
use kvw_engine::probe::run;
use kvw_evidence::{Fix, Outcome, PoisonMode, ProbePredicate, Scale};

fn probe(fixes: &[Fix]) -> ProbePredicate {
    let config = incident_config(Scale::Walkthrough, fixes, PoisonMode::Off, DEFAULT_SEED)
        .expect("the walkthrough preset is a valid configuration");
    run(&config).expect("the incident probe answers the probed request")
}

fn report(label: &str, p: &ProbePredicate) {
    let v = &p.verdict;
    println!("{label}:");
    println!(
        "  outcome          {:?} (HTTP {})",
        v.outcome, v.http_status
    );
    println!(
        "  foreign pages    {} read by decode attention",
        v.foreign_pages_read
    );
    if v.canaries_leaked.is_empty() {
        println!("  canaries leaked  none");
    } else {
        println!(
            "  canaries leaked  {} (tenants {})",
            v.canaries_leaked.join(", "),
            v.tenants_leaked.join(", ")
        );
    }
    let reached = p.steps.iter().filter(|s| s.reached).count();
    println!("  steps reached    {reached} of {}", p.steps.len());
    println!("  trace sha256     {}", p.trace_sha256);
}

fn main() {
    let before = probe(&[]);
    report("no fix", &before);
    let after = probe(&[Fix::RetireAbortedPrefillResult]);
    report("fix retire-aborted-prefill-result", &after);

    let v = &before.verdict;
    assert!(v.leak, "without a fix the probed request must leak");
    assert_eq!(v.outcome, Outcome::Leak);
    assert!(v.foreign_pages_read > 0);
    assert!(
        v.canaries_leaked
            .iter()
            .all(|c| v.response_text.contains(c.as_str())),
        "each leaked canary stands verbatim in the answer"
    );
    let v = &after.verdict;
    assert!(!v.leak, "with the fix nothing leaks");
    assert_eq!(v.foreign_pages_read, 0);
    assert!(v.canaries_leaked.is_empty());
    println!("the leak reproduces without the fix and is gone with it");
}

/// `cargo test -p kvw-engine` runs the example too (`test = true` in the
/// crate's manifest), so the front door cannot rot.
#[cfg(test)]
mod tests {
    #[test]
    fn the_incident_leaks_without_the_fix_and_not_with_it() {
        super::main();
    }
}
