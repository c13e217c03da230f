//! What each kind of receipt besides a probe run comes to, as facts.
//!
//! Model checks, scenarios, gate runs, randomized runs and endpoint audits
//! each travel under their own `predicateType`. [`describe`] parses any of
//! them (running the kind's own check) and keeps the few typed facts that
//! summarise it ([`OtherFacts`]): a bundle's index lists them, `kvw verify`
//! and the wasm export report them, and the words crate turns them into
//! sentences. No sentence is stored or compared here.

use serde::{Deserialize, Serialize};

use crate::audit::{AuditPredicate, GateResult, AUDIT_PREDICATE_TYPE};
use crate::judged::Why;
use crate::model_check::{ModelCheckPredicate, PropertyStatus, MODEL_CHECK_PREDICATE_TYPE};
use crate::predicate::Fix;
use crate::receipt::VerifiedStatement;
use crate::scenario::{
    FuzzPredicate, GatesPredicate, ScenarioPredicate, ScenarioStatus, FUZZ_PREDICATE_TYPE,
    GATES_PREDICATE_TYPE, SCENARIO_PREDICATE_TYPE,
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

/// What a receipt of another kind comes to, in typed facts taken from its
/// predicate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum OtherFacts {
    ModelCheck {
        requests: u32,
        tenants: u32,
        decode_pages: u32,
        fixes: Vec<Fix>,
        /// Every property held (and every `sometimes` one was witnessed).
        all_hold: bool,
        /// Properties with a counterexample, in the model's order.
        violated: Vec<String>,
        unique_states: u64,
        max_depth: u64,
        /// The whole reachable state space was enumerated.
        complete: bool,
    },
    Scenario {
        scenario: String,
        fixes: Vec<Fix>,
        status: ScenarioStatus,
        why: Why,
    },
    Gates {
        fixes: Vec<Fix>,
        rows: u64,
        pass: u64,
        fail: u64,
        not_exercised: u64,
    },
    Fuzz {
        fixes: Vec<Fix>,
        seed: u64,
        runs: u64,
        violating_runs: u64,
        /// The shrunk counterexample, when a run broke an invariant.
        shrunk: Option<Shrunk>,
    },
    Audit {
        gate: String,
        endpoint: String,
        exchanges: u64,
        result: GateResult,
        reason: String,
    },
    /// One case of the upstream differential on one SGLang release: how
    /// many compared fields agree, differ with a stated reason, differ
    /// unexplained, or do not apply.
    UpstreamRun {
        case: String,
        release: String,
        agree: u64,
        explained: u64,
        differ: u64,
        not_applicable: u64,
    },
}

/// A randomized run's shrunk counterexample, in brief.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shrunk {
    /// Requests left after shrinking.
    pub requests: u64,
    /// The invariant it breaks.
    pub invariant: String,
}

impl OtherFacts {
    /// The kind, as its `snake_case` name in the index.
    pub fn kind(&self) -> &'static str {
        match self {
            OtherFacts::ModelCheck { .. } => "model_check",
            OtherFacts::Scenario { .. } => "scenario",
            OtherFacts::Gates { .. } => "gates",
            OtherFacts::Fuzz { .. } => "fuzz",
            OtherFacts::Audit { .. } => "audit",
            OtherFacts::UpstreamRun { .. } => "upstream_run",
        }
    }

    /// What it came to as one token of facts, e.g. `holds`, `pass`,
    /// `12/14 pass`, `0/200 violating`: the README's result column.
    pub fn result(&self) -> String {
        match self {
            OtherFacts::ModelCheck { all_hold: true, .. } => "holds".into(),
            OtherFacts::ModelCheck { violated, .. } if violated.is_empty() => "undecided".into(),
            OtherFacts::ModelCheck { .. } => "violated".into(),
            OtherFacts::Scenario { status, .. } => status_name(*status).into(),
            OtherFacts::Gates { rows, pass, .. } => format!("{pass}/{rows} pass"),
            OtherFacts::Fuzz {
                runs,
                violating_runs,
                ..
            } => format!("{violating_runs}/{runs} violating"),
            OtherFacts::Audit { result, .. } => match result {
                GateResult::Pass => "pass".into(),
                GateResult::Fail => "fail".into(),
                GateResult::Inconclusive => "inconclusive".into(),
            },
            OtherFacts::UpstreamRun { differ, .. } if *differ > 0 => "differ".into(),
            OtherFacts::UpstreamRun { .. } => "agree".into(),
        }
    }
}

/// Parse a statement of another kind (running the kind's own check) and
/// keep its facts; an error for a probe receipt or a kind this crate does
/// not know.
pub fn describe(statement: &VerifiedStatement) -> Result<OtherFacts, String> {
    let e = |e: crate::EvidenceError| e.to_string();
    let count = |n: usize| n as u64;
    match statement.predicate_type.as_str() {
        MODEL_CHECK_PREDICATE_TYPE => {
            let p: ModelCheckPredicate = statement.parse().map_err(e)?;
            Ok(OtherFacts::ModelCheck {
                requests: p.model.requests,
                tenants: p.model.tenants,
                decode_pages: p.model.decode_pages,
                fixes: p.model.fixes.clone(),
                all_hold: p.all_hold,
                violated: p
                    .properties
                    .iter()
                    .filter(|p| p.status == PropertyStatus::Violated)
                    .map(|p| p.name.clone())
                    .collect(),
                unique_states: p.exploration.unique_states,
                max_depth: p.exploration.max_depth,
                complete: p.exploration.complete,
            })
        }
        SCENARIO_PREDICATE_TYPE => {
            let p: ScenarioPredicate = statement.parse().map_err(e)?;
            Ok(OtherFacts::Scenario {
                scenario: p.scenario.name,
                fixes: p.fixes,
                status: p.status,
                why: p.why,
            })
        }
        GATES_PREDICATE_TYPE => {
            let p: GatesPredicate = statement.parse().map_err(e)?;
            let with = |s| count(p.rows.iter().filter(|r| r.status == s).count());
            Ok(OtherFacts::Gates {
                rows: count(p.rows.len()),
                pass: with(ScenarioStatus::Pass),
                fail: with(ScenarioStatus::Fail),
                not_exercised: with(ScenarioStatus::NotExercised),
                fixes: p.fixes,
            })
        }
        FUZZ_PREDICATE_TYPE => {
            let p: FuzzPredicate = statement.parse().map_err(e)?;
            Ok(OtherFacts::Fuzz {
                fixes: p.fixes,
                seed: p.seed,
                runs: p.runs,
                violating_runs: p.violating_runs,
                shrunk: p.counterexample.map(|c| Shrunk {
                    requests: count(c.requests.len()),
                    invariant: c.invariant,
                }),
            })
        }
        AUDIT_PREDICATE_TYPE => {
            let p: AuditPredicate = statement.parse().map_err(e)?;
            Ok(OtherFacts::Audit {
                exchanges: count(p.exchanges.len()),
                gate: p.gate,
                endpoint: p.endpoint,
                result: p.result,
                reason: p.reason,
            })
        }
        UPSTREAM_RUN_PREDICATE_TYPE => {
            let p: UpstreamRunPredicate = statement.parse().map_err(e)?;
            let t = p.totals();
            Ok(OtherFacts::UpstreamRun {
                agree: count(t.agree),
                explained: count(t.explained),
                differ: count(t.differ),
                not_applicable: count(t.not_applicable),
                case: p.case,
                release: p.release,
            })
        }
        other => Err(format!(
            "unknown predicate type {other:?}: not one a bundle carries beside probe runs (known: {})",
            OTHER_PREDICATE_TYPES.join(", ")
        )),
    }
}
