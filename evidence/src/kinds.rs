//! What each kind of receipt besides a probe run is, in a few words.
//!
//! Model checks, scenarios, gate runs, randomized runs and endpoint audits
//! each travel under
//! their own `predicateType`. [`describe`] parses any of them (running the
//! kind's own check) and gives a label and an outcome line: `kvw verify`
//! prints them, a bundle's index lists them, and the wasm export reports
//! them, so every reader summarises a receipt the same way.

use crate::audit::{AuditPredicate, GateResult, AUDIT_PREDICATE_TYPE};
use crate::model_check::{ModelCheckPredicate, MODEL_CHECK_PREDICATE_TYPE};
use crate::receipt::VerifiedStatement;
use crate::scenario::{
    fixes_text, FuzzPredicate, GatesPredicate, ScenarioPredicate, ScenarioStatus,
    FUZZ_PREDICATE_TYPE, GATES_PREDICATE_TYPE, SCENARIO_PREDICATE_TYPE,
};
use crate::upstream_run::{UpstreamRunPredicate, UPSTREAM_RUN_PREDICATE_TYPE};

/// Every `predicateType` besides the probe's that a bundle may carry.
pub const OTHER_PREDICATE_TYPES: [&str; 6] = [
    MODEL_CHECK_PREDICATE_TYPE,
    SCENARIO_PREDICATE_TYPE,
    GATES_PREDICATE_TYPE,
    FUZZ_PREDICATE_TYPE,
    AUDIT_PREDICATE_TYPE,
    UPSTREAM_RUN_PREDICATE_TYPE,
];

/// The status as the receipts spell it.
pub fn status_name(s: ScenarioStatus) -> &'static str {
    match s {
        ScenarioStatus::Pass => "pass",
        ScenarioStatus::Fail => "fail",
        ScenarioStatus::NotExercised => "not exercised",
    }
}

/// Parse a statement of another kind (running the kind's own check) and
/// say what it is and what it came to; an error for a probe receipt or a
/// kind this crate does not know.
pub fn describe(statement: &VerifiedStatement) -> Result<(String, String), String> {
    let e = |e: crate::EvidenceError| e.to_string();
    match statement.predicate_type.as_str() {
        MODEL_CHECK_PREDICATE_TYPE => {
            let p: ModelCheckPredicate = statement.parse().map_err(e)?;
            Ok((
                format!(
                    "model check, {} request(s), {} tenant(s), {} decode pages, fixes={}",
                    p.model.requests,
                    p.model.tenants,
                    p.model.decode_pages,
                    p.model.fix_list()
                ),
                p.summary(),
            ))
        }
        SCENARIO_PREDICATE_TYPE => {
            let p: ScenarioPredicate = statement.parse().map_err(e)?;
            Ok((
                format!(
                    "scenario {} fixes={}",
                    p.scenario.name,
                    fixes_text(&p.fixes)
                ),
                format!(
                    "{}: {}",
                    status_name(p.status),
                    crate::scenario_render::why(&p.why, crate::render::Lang::En)
                ),
            ))
        }
        GATES_PREDICATE_TYPE => {
            let p: GatesPredicate = statement.parse().map_err(e)?;
            let count = |s| p.rows.iter().filter(|r| r.status == s).count();
            Ok((
                format!("gates fixes={}", fixes_text(&p.fixes)),
                format!(
                    "{} of {} rows pass, {} fail, {} not exercised",
                    count(ScenarioStatus::Pass),
                    p.rows.len(),
                    count(ScenarioStatus::Fail),
                    count(ScenarioStatus::NotExercised)
                ),
            ))
        }
        FUZZ_PREDICATE_TYPE => {
            let p: FuzzPredicate = statement.parse().map_err(e)?;
            Ok((
                format!(
                    "fuzz fixes={} seed={} runs={}",
                    fixes_text(&p.fixes),
                    p.seed,
                    p.runs
                ),
                match &p.counterexample {
                    Some(c) => format!(
                        "{} violating run(s); shrunk to {} request(s): {}",
                        p.violating_runs,
                        c.requests.len(),
                        c.invariant
                    ),
                    None => "no invariant broken".into(),
                },
            ))
        }
        AUDIT_PREDICATE_TYPE => {
            let p: AuditPredicate = statement.parse().map_err(e)?;
            let result = match p.result {
                GateResult::Pass => "pass",
                GateResult::Fail => "fail",
                GateResult::Inconclusive => "inconclusive",
            };
            Ok((
                format!(
                    "audit {} of {} ({} exchanges)",
                    p.gate,
                    p.endpoint,
                    p.exchanges.len()
                ),
                format!("{result}: {}", p.reason),
            ))
        }
        UPSTREAM_RUN_PREDICATE_TYPE => {
            let p: UpstreamRunPredicate = statement.parse().map_err(e)?;
            Ok((
                format!("upstream run {} on SGLang {}", p.case, p.release),
                p.summary(),
            ))
        }
        other => Err(format!(
            "unknown predicate type {other:?}: not one a bundle carries beside probe runs (known: {})",
            OTHER_PREDICATE_TYPES.join(", ")
        )),
    }
}
