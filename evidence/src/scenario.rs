//! Scenario, gate and randomized-run predicates.
//!
//! Three more kinds of result, each under its own `predicateType` in the
//! same DSSE/in-toto envelope as every receipt:
//!
//! * [`ScenarioPredicate`] — one scripted scenario under a set of fixes: what
//!   it mirrors upstream, its guard, what was expected and observed (typed
//!   facts, [`crate::judged`]), and
//!   every typed event of the run (so a replay can walk them on the page
//!   grid, as it walks a probe's);
//! * [`GatesPredicate`] — the four acceptance gates: one row per scenario,
//!   and each worker's pool against the configured context;
//! * [`FuzzPredicate`] — randomized runs: how many, the seed, and when an
//!   invariant broke, the shrunk failing case with its events.
//!
//! Every type refuses unknown fields. Each carries the canonical digest of
//! its events (`trace_sha256`), which the kind's check recomputes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::canonical::canonical_sha256;
use crate::judged::{Expected, GuardRule, Observed, Why};
use crate::predicate::{EngineInfo, Event, Fix, PageView, RequestInfo};
use crate::receipt::PredicateKind;
use crate::EvidenceError;

/// `predicateType` of a scenario receipt.
pub const SCENARIO_PREDICATE_TYPE: &str = "https://kvwitness.dev/attestation/scenario/v3";
/// `predicateType` of a gates receipt.
pub const GATES_PREDICATE_TYPE: &str = "https://kvwitness.dev/attestation/gates/v3";
/// `predicateType` of a randomized-run receipt.
pub const FUZZ_PREDICATE_TYPE: &str = "https://kvwitness.dev/attestation/fuzz/v2";

/// A scenario's result under one set of switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ScenarioStatus {
    /// The assertion held and its guard was on.
    Pass,
    /// The assertion failed.
    Fail,
    /// The assertion held but its guard was off: nothing was tested.
    NotExercised,
}

/// The upstream test a scenario mirrors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTest {
    /// Path in the SGLang repository.
    pub path: String,
    /// Test function.
    pub test: String,
    /// subTest keywords or pytest parameters, as text.
    pub subtest: Option<String>,
    /// The test file at the pinned commit.
    pub url: String,
}

/// What a scenario is. Its description and what closes it are words about
/// the scenario, rendered from its name in the reader's language
/// (by the words crate, `kvw-words`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioInfo {
    pub name: String,
    /// `pool-context`, `reject-admission`, `transfer-read` or `lifetime-ownership`.
    pub gate: String,
    pub upstream: Option<UpstreamTest>,
    /// Switches that must be on for the scenario to be exercised.
    pub guard_fixes: Vec<Fix>,
    /// A rule inside those switches the scenario depends on.
    pub guard_rule: Option<GuardRule>,
    /// What the record says a run without the guard does: `fails`,
    /// `holds-vacuously` or `not-observed-pre-fix` (the record shows no run
    /// of the case before the fix).
    pub record: String,
    /// Set when the scenario and its guard rule rest on a model assumption
    /// rather than on upstream's code: the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_assumption: Option<String>,
}

/// One scenario run, judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioPredicate {
    pub scenario: ScenarioInfo,
    pub engine: EngineInfo,
    /// Switches that were on, in canonical order.
    pub fixes: Vec<Fix>,
    pub exercised: bool,
    pub holds: bool,
    pub status: ScenarioStatus,
    pub expected: Expected,
    pub observed: Observed,
    pub why: Why,
    /// Every request of the run.
    pub requests: Vec<RequestInfo>,
    /// Every typed event of the run, in order.
    pub events: Vec<Event>,
    /// Page pictures of the run's first request (its `probed` one), each
    /// after the event it follows, for a replay on the page grid.
    pub pages: Vec<EventPages>,
    /// Lowercase hex SHA-256 of the JCS form of `events`.
    pub trace_sha256: String,
}

/// The pools as they stood after one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventPages {
    /// Index into `events`.
    pub event: u32,
    pub view: PageView,
}

/// One row of the gates table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateRow {
    pub gate: String,
    pub scenario: String,
    pub status: ScenarioStatus,
    pub expected: Expected,
    pub observed: Observed,
    pub why: Why,
    /// Whether the status is the one the record predicts for these switches.
    pub as_recorded: bool,
    /// `trace_sha256` of the scenario run the row reports.
    pub trace_sha256: String,
}

/// A worker's KV pool against the configured context, as a server states
/// both at start-up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapacityRow {
    /// Configuration name, e.g. `incident`.
    pub config: String,
    pub worker: String,
    pub context_len: u64,
    pub pool_tokens: u64,
    pub max_req_input_len: u64,
    /// Prompts inside the context but over the cap exist.
    pub reject_path_reachable: bool,
}

/// The four gates under one set of switches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GatesPredicate {
    pub engine: EngineInfo,
    pub fixes: Vec<Fix>,
    pub rows: Vec<GateRow>,
    pub capacity: Vec<CapacityRow>,
    /// Every row passed.
    pub all_pass: bool,
}

/// A request of a randomized case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FuzzRequest {
    pub tenant: String,
    pub at_us: u64,
    pub prompt_len: u32,
    pub abort_after_us: Option<u64>,
    pub faults: Vec<FuzzFault>,
    /// Re-enters prefill with a pending abort and its metadata buffer index.
    pub reenters: bool,
}

/// A transfer fault of a randomized case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum FuzzFault {
    /// Every write of the room lands this much later.
    Delay { us: u64 },
    /// The n-th write of the room never lands.
    DropWrite { nth: u32 },
    /// The n-th write lands this much later than planned, even after an abort.
    LateWrite { nth: u32, us: u64 },
    /// The decode peer's drain ack never arrives.
    LostAck,
    /// The room's destination pages are spread over this many decode peers
    /// (page-table index modulo `peers`), each of which acks on its own.
    FanOut { peers: u32 },
}

/// The shrunk failing case and what it broke.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FuzzCounterexample {
    /// Index of the run that first failed.
    pub run: u64,
    /// The failing run's requests before shrinking.
    pub original_requests: u32,
    pub requests: Vec<FuzzRequest>,
    /// Invariant name, e.g. `isolation`.
    pub invariant: String,
    /// The request that broke it.
    pub rid: String,
    /// Index into `events` of the event after which it broke.
    pub at_event: u64,
    pub detail: String,
    /// Every request of the shrunk run.
    pub run_requests: Vec<RequestInfo>,
    /// Every typed event of the shrunk run.
    pub events: Vec<Event>,
    /// Page pictures of the request that broke the invariant, each after
    /// the event it follows, for a replay on the page grid.
    pub pages: Vec<EventPages>,
    /// Lowercase hex SHA-256 of the JCS form of `events`.
    pub trace_sha256: String,
}

/// Randomized runs under one set of switches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FuzzPredicate {
    pub engine: EngineInfo,
    pub fixes: Vec<Fix>,
    pub seed: u64,
    pub runs: u64,
    /// Runs that broke an invariant.
    pub violating_runs: u64,
    /// Runs that ended waiting on pages a lost drain ack holds.
    pub stalled_runs: u64,
    /// Violating runs per invariant name.
    pub by_invariant: Vec<InvariantCount>,
    pub counterexample: Option<FuzzCounterexample>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InvariantCount {
    pub invariant: String,
    pub runs: u64,
}

/// Lowercase hex SHA-256 of the JCS form of `events`.
pub fn events_sha256(events: &[Event]) -> String {
    canonical_sha256(&events).unwrap_or_default()
}

fn inconsistent(what: &str, m: String) -> EvidenceError {
    EvidenceError::Steps(format!("{what}: {m}"))
}

fn check_trace(what: &str, events: &[Event], digest: &str) -> Result<(), EvidenceError> {
    let expected = events_sha256(events);
    if digest != expected {
        return Err(inconsistent(
            what,
            format!("trace_sha256 {digest} is not the events' digest {expected}"),
        ));
    }
    Ok(())
}

impl PredicateKind for ScenarioPredicate {
    const PREDICATE_TYPE: &'static str = SCENARIO_PREDICATE_TYPE;
    const WHAT: &'static str = "scenario predicate";
    fn check(&self) -> Result<(), EvidenceError> {
        check_trace(Self::WHAT, &self.events, &self.trace_sha256)?;
        if let Some(p) = self
            .pages
            .iter()
            .find(|p| p.event as usize >= self.events.len())
        {
            return Err(inconsistent(
                Self::WHAT,
                format!(
                    "a page picture refers to event {}, past the events",
                    p.event
                ),
            ));
        }
        let status = match (self.holds, self.exercised) {
            (false, _) => ScenarioStatus::Fail,
            (true, true) => ScenarioStatus::Pass,
            (true, false) => ScenarioStatus::NotExercised,
        };
        if status != self.status {
            return Err(inconsistent(
                Self::WHAT,
                format!("status {:?} contradicts holds/exercised", self.status),
            ));
        }
        Ok(())
    }
}

impl PredicateKind for GatesPredicate {
    const PREDICATE_TYPE: &'static str = GATES_PREDICATE_TYPE;
    const WHAT: &'static str = "gates predicate";
    fn check(&self) -> Result<(), EvidenceError> {
        let all =
            !self.rows.is_empty() && self.rows.iter().all(|r| r.status == ScenarioStatus::Pass);
        if all != self.all_pass {
            return Err(inconsistent(
                Self::WHAT,
                format!("all_pass is {} but the rows say {all}", self.all_pass),
            ));
        }
        Ok(())
    }
}

impl PredicateKind for FuzzPredicate {
    const PREDICATE_TYPE: &'static str = FUZZ_PREDICATE_TYPE;
    const WHAT: &'static str = "fuzz predicate";
    fn check(&self) -> Result<(), EvidenceError> {
        self.check_counts()?;
        match &self.counterexample {
            Some(c) => {
                check_trace(Self::WHAT, &c.events, &c.trace_sha256)?;
                if c.at_event as usize >= c.events.len().max(1) {
                    return Err(inconsistent(
                        Self::WHAT,
                        "at_event is past the events".into(),
                    ));
                }
                if c.pages.iter().any(|p| p.event as usize >= c.events.len()) {
                    return Err(inconsistent(
                        Self::WHAT,
                        "a page picture refers to an event past the events".into(),
                    ));
                }
            }
            None if self.violating_runs > 0 => {
                return Err(inconsistent(
                    Self::WHAT,
                    "violating runs but no counterexample".into(),
                ))
            }
            None => {}
        }
        Ok(())
    }
}

impl FuzzPredicate {
    /// The counts add up: at least one run, violating and stalled runs
    /// among them, one positive count per invariant summing to the
    /// violating runs, and a counterexample exactly when a run violated,
    /// from one of the runs, for an invariant counted.
    fn check_counts(&self) -> Result<(), EvidenceError> {
        let bad = |m: &str| Err(inconsistent(Self::WHAT, m.to_string()));
        if self.runs == 0 {
            return bad("no runs");
        }
        if self.violating_runs > self.runs {
            return bad("more violating runs than runs");
        }
        if self.stalled_runs > self.runs {
            return bad("more stalled runs than runs");
        }
        let mut sum = 0u64;
        for (i, c) in self.by_invariant.iter().enumerate() {
            if c.runs == 0 {
                return bad("an invariant counted with zero runs");
            }
            if self.by_invariant[..i]
                .iter()
                .any(|o| o.invariant == c.invariant)
            {
                return bad("an invariant counted twice");
            }
            sum = match sum.checked_add(c.runs) {
                Some(s) => s,
                None => return bad("the counts per invariant overflow"),
            };
        }
        if sum != self.violating_runs {
            return Err(inconsistent(
                Self::WHAT,
                format!(
                    "the counts per invariant sum to {sum}, not to the {} violating runs",
                    self.violating_runs
                ),
            ));
        }
        if let Some(c) = &self.counterexample {
            if self.violating_runs == 0 {
                return bad("a counterexample but no violating run");
            }
            if c.run >= self.runs {
                return bad("the counterexample's run is not one of the runs");
            }
            if !self.by_invariant.iter().any(|i| i.invariant == c.invariant) {
                return bad("the counterexample's invariant is not among those counted");
            }
            if (c.original_requests as usize) < c.requests.len() {
                return bad("the counterexample has more requests than the run it shrank");
            }
        }
        Ok(())
    }
}

/// Canonical SHA-256 of a predicate without its `engine` field: what a
/// re-run at another commit must reproduce.
pub fn reproducible_sha256<P: Serialize>(p: &P) -> String {
    let Ok(mut value) = serde_json::to_value(p) else {
        return String::new();
    };
    if let Some(map) = value.as_object_mut() {
        map.remove("engine");
    }
    canonical_sha256(&value).unwrap_or_default()
}
