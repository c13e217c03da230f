//! `kvw verify --reproduce` for scenario, gates and fuzz receipts.
//!
//! The envelope, signature, subject digest, the kind's own check and its
//! summary line are `kvw_evidence`'s ([`kvw_evidence::bundle::others`]);
//! this re-runs the result — the scenario under its recorded fixes, every
//! gate, or the fuzz receipt's shrunk case — and compares what must not
//! change (everything but the engine version and commit). The same re-run
//! serves a lone receipt and every receipt of a bundle.

use kvw_engine::fuzz;
use kvw_engine::scenarios::receipts;
use kvw_evidence::scenario::{
    events_sha256, reproducible_sha256, FuzzPredicate, GatesPredicate, ScenarioPredicate,
    FUZZ_PREDICATE_TYPE, GATES_PREDICATE_TYPE, SCENARIO_PREDICATE_TYPE,
};
use kvw_evidence::VerifiedStatement;

/// Re-run a receipt of another kind and compare: `Ok(true)` when it
/// reproduced, `Ok(false)` for a kind re-checked elsewhere (a model check:
/// `kvw check`).
pub fn reproduce(statement: &VerifiedStatement) -> Result<bool, String> {
    match statement.predicate_type.as_str() {
        SCENARIO_PREDICATE_TYPE => {
            let p: ScenarioPredicate = statement.parse().map_err(|e| e.to_string())?;
            let again = receipts::run_named(&p.scenario.name, &p.fixes)
                .ok_or_else(|| format!("no scenario named {:?} in this engine", p.scenario.name))?;
            same(&p, &receipts::scenario_predicate(&again))?;
        }
        GATES_PREDICATE_TYPE => {
            let p: GatesPredicate = statement.parse().map_err(|e| e.to_string())?;
            same(&p, &receipts::gates(&p.fixes))?;
        }
        FUZZ_PREDICATE_TYPE => {
            let p: FuzzPredicate = statement.parse().map_err(|e| e.to_string())?;
            if let Some(c) = &p.counterexample {
                let case = fuzz::case_from_requests(&c.requests)?;
                let again = fuzz::run_case(&case, &p.fixes);
                let v = again
                    .violation
                    .ok_or("re-run of the shrunk case breaks no invariant")?;
                if v.invariant.name() != c.invariant
                    || events_sha256(&again.events) != c.trace_sha256
                {
                    return Err(format!(
                        "re-run of the shrunk case does not reproduce it ({} vs {})",
                        v.invariant.name(),
                        c.invariant
                    ));
                }
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

fn same<P: serde::Serialize>(receipt: &P, again: &P) -> Result<(), String> {
    let (a, b) = (reproducible_sha256(receipt), reproducible_sha256(again));
    if a != b {
        return Err(format!(
            "re-run does not reproduce the receipt (digest {b}, receipt {a})"
        ));
    }
    Ok(())
}
