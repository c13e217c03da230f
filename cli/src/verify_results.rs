//! `kvw verify` for scenario, gates, fuzz and audit receipts.
//!
//! The envelope, signature and subject digest are checked by
//! `kvw_evidence`; this adds the kind's own check and, with `--reproduce`,
//! re-runs the result — the scenario under its recorded fixes, every gate,
//! or the fuzz receipt's shrunk case — and compares what must not change
//! (everything but the engine version and commit).

use kvw_engine::fuzz;
use kvw_engine::scenarios::receipts;
use kvw_evidence::audit::{AuditPredicate, GateResult, AUDIT_PREDICATE_TYPE};
use kvw_evidence::bundle::ReceiptOk;
use kvw_evidence::scenario::{
    events_sha256, reproducible_sha256, FuzzPredicate, GatesPredicate, ScenarioPredicate,
    FUZZ_PREDICATE_TYPE, GATES_PREDICATE_TYPE, SCENARIO_PREDICATE_TYPE,
};
use kvw_evidence::VerifiedStatement;

use crate::gates::fixes_text as fix_list;

/// The line of a scenario, gates, fuzz or audit receipt; `None` for other kinds.
pub fn check(statement: &VerifiedStatement, reproduce: bool) -> Result<Option<ReceiptOk>, String> {
    let name = statement.name.clone();
    let ok = |label: String, outcome: String| {
        Ok(Some(ReceiptOk {
            name: name.clone(),
            label,
            outcome,
            reproduced: reproduce,
        }))
    };
    match statement.predicate_type.as_str() {
        SCENARIO_PREDICATE_TYPE => {
            let p: ScenarioPredicate = statement.parse().map_err(|e| e.to_string())?;
            if reproduce {
                let again = receipts::run_named(&p.scenario.name, &p.fixes).ok_or_else(|| {
                    format!("no scenario named {:?} in this engine", p.scenario.name)
                })?;
                same(&p, &receipts::scenario_predicate(&again))?;
            }
            ok(
                format!("scenario {} fixes={}", p.scenario.name, fix_list(&p.fixes)),
                format!("{:?}: {}", p.status, p.why),
            )
        }
        GATES_PREDICATE_TYPE => {
            let p: GatesPredicate = statement.parse().map_err(|e| e.to_string())?;
            if reproduce {
                same(&p, &receipts::gates(&p.fixes))?;
            }
            let pass = p
                .rows
                .iter()
                .filter(|r| r.status == kvw_evidence::scenario::ScenarioStatus::Pass)
                .count();
            ok(
                format!("gates fixes={}", fix_list(&p.fixes)),
                format!("{pass} of {} rows pass", p.rows.len()),
            )
        }
        FUZZ_PREDICATE_TYPE => {
            let p: FuzzPredicate = statement.parse().map_err(|e| e.to_string())?;
            if let (true, Some(c)) = (reproduce, &p.counterexample) {
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
            ok(
                format!(
                    "fuzz fixes={} seed={} runs={}",
                    fix_list(&p.fixes),
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
            )
        }
        AUDIT_PREDICATE_TYPE => {
            let p: AuditPredicate = statement.parse().map_err(|e| e.to_string())?;
            if reproduce {
                return Err(
                    "--reproduce cannot re-run an audit receipt: it records traffic to an \
                     endpoint; run kvw audit against it again"
                        .into(),
                );
            }
            let result = match p.result {
                GateResult::Pass => "pass",
                GateResult::Fail => "fail",
                GateResult::Inconclusive => "inconclusive",
            };
            ok(
                format!(
                    "audit {} of {} ({} exchanges)",
                    p.gate,
                    p.endpoint,
                    p.exchanges.len()
                ),
                format!("{result}: {}", p.reason),
            )
        }
        _ => Ok(None),
    }
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
