//! Scenario and gate results as receipt predicates.
//!
//! [`scenario_predicate`] turns a judged run into a
//! [`ScenarioPredicate`] (with every typed event); [`gates`] runs every
//! scenario under a set of switches and builds the [`GatesPredicate`],
//! including each worker's pool against the configured context for the
//! walkthrough and incident presets.

use kvw_evidence::scenario::{
    events_sha256, CapacityRow, EventPages, GateRow, GatesPredicate, ScenarioInfo,
    ScenarioPredicate, ScenarioStatus, UpstreamTest,
};
use kvw_evidence::{
    receipt_name, sign_statement, Envelope, EvidenceError, Fix, FixSet, PoisonMode, Scale, Signer,
};

use super::{all, Judged, Record, Scenario, Setup, Status};
use crate::config::incident_config;
use crate::probe::engine_info;

fn status(s: Status) -> ScenarioStatus {
    match s {
        Status::Pass => ScenarioStatus::Pass,
        Status::Fail => ScenarioStatus::Fail,
        Status::NotExercised => ScenarioStatus::NotExercised,
    }
}

/// What a scenario is, as a receipt states it.
pub fn info(s: &Scenario) -> ScenarioInfo {
    ScenarioInfo {
        name: s.name.into(),
        gate: s.gate.name().into(),
        upstream: s.upstream.map(|u| UpstreamTest {
            path: u.path.into(),
            test: u.test.into(),
            subtest: u.subtest.map(String::from),
            url: u.url(),
        }),
        guard_fixes: s.guard.fixes.to_vec(),
        guard_rule: s.guard.rule.map(|r| r.what),
        record: match s.record {
            Record::Fails => "fails".into(),
            Record::HoldsVacuously => "holds-vacuously".into(),
            Record::NotObservedPreFix => "not-observed-pre-fix".into(),
        },
        model_assumption: super::cleanup::model_assumption(s.name).map(String::from),
    }
}

/// The predicate of a judged scenario run.
pub fn scenario_predicate(j: &Judged) -> ScenarioPredicate {
    ScenarioPredicate {
        scenario: info(&j.scenario),
        engine: engine_info(),
        fixes: j.fixes.clone(),
        exercised: j.exercised,
        holds: j.holds,
        status: status(j.status),
        expected: j.expected.clone(),
        observed: j.observed.clone(),
        why: j.why.clone(),
        requests: j.observed_run.requests.clone(),
        events: j.observed_run.events.clone(),
        pages: j
            .observed_run
            .pictures
            .iter()
            .map(|(i, view)| EventPages {
                event: *i as u32,
                view: view.clone(),
            })
            .collect(),
        trace_sha256: events_sha256(&j.observed_run.events),
    }
}

/// Run scenario `name` with `fixes` (upstream's rules).
pub fn run_named(name: &str, fixes: &[Fix]) -> Option<Judged> {
    super::find(name).map(|s| s.judge(&Setup::new(fixes)))
}

/// Each worker's pool against the context, for both presets.
pub fn capacity_rows() -> Vec<CapacityRow> {
    let mut out = Vec::new();
    for (name, scale) in [
        ("walkthrough", Scale::Walkthrough),
        ("incident", Scale::Incident),
    ] {
        let Ok(c) = incident_config(scale, &[], PoisonMode::Off, 1) else {
            continue;
        };
        for cap in super::pool_context::capacity(&c) {
            out.push(CapacityRow {
                config: name.into(),
                worker: cap.worker.into(),
                context_len: cap.context_len,
                pool_tokens: cap.pool_tokens,
                max_req_input_len: cap.max_req_input_len,
                reject_path_reachable: cap.reject_path_reachable,
            });
        }
    }
    out
}

/// Every scenario under `fixes`, judged (in gate order).
pub fn judge_all(fixes: &[Fix]) -> Vec<Judged> {
    let setup = Setup::new(fixes);
    all().iter().map(|s| s.judge(&setup)).collect()
}

/// The gates predicate of judged runs.
pub fn gates_predicate(fixes: &[Fix], judged: &[Judged]) -> GatesPredicate {
    let rows: Vec<GateRow> = judged
        .iter()
        .map(|j| GateRow {
            gate: j.scenario.gate.name().into(),
            scenario: j.scenario.name.into(),
            status: status(j.status),
            expected: j.expected.clone(),
            observed: j.observed.clone(),
            why: j.why.clone(),
            as_recorded: j.as_recorded(),
            trace_sha256: events_sha256(&j.observed_run.events),
        })
        .collect();
    let all_pass = !rows.is_empty() && rows.iter().all(|r| r.status == ScenarioStatus::Pass);
    GatesPredicate {
        engine: engine_info(),
        fixes: kvw_evidence::FixSet::canonical(fixes),
        rows,
        capacity: capacity_rows(),
        all_pass,
    }
}

/// Run every scenario under `fixes` and build the gates predicate.
pub fn gates(fixes: &[Fix]) -> GatesPredicate {
    gates_predicate(fixes, &judge_all(fixes))
}

/// The gates receipt and one receipt per scenario, signed, as (file name,
/// envelope) under the names of [`kvw_evidence::receipt_name`]:
/// `gates-fixes-<label>.json` and `scenario-<name>-fixes-<label>.json`,
/// the names `kvw gates --out` and `kvw bundle` both write.
pub fn signed(
    fixes: &[Fix],
    judged: &[Judged],
    gates: &GatesPredicate,
    signer: &Signer,
) -> Result<Vec<(String, Envelope)>, EvidenceError> {
    let set = FixSet::new(fixes);
    let name = receipt_name::gates(set);
    let mut out = vec![(name.clone(), sign_statement(&name, gates, signer)?)];
    for j in judged {
        let name = receipt_name::scenario(j.scenario.name, set);
        let envelope = sign_statement(&name, &scenario_predicate(j), signer)?;
        out.push((name, envelope));
    }
    Ok(out)
}

/// Run every scenario under `fixes` and sign the gates receipt and the
/// scenario receipts it refers to (see [`signed`]).
pub fn run_signed(
    fixes: &[Fix],
    signer: &Signer,
) -> Result<Vec<(String, Envelope)>, EvidenceError> {
    let judged = judge_all(fixes);
    let gates = gates_predicate(fixes, &judged);
    signed(fixes, &judged, &gates, signer)
}
