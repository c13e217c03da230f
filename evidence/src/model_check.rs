//! The model-check predicate: what an exhaustive check of the PD handoff found.
//!
//! A probe receipt ([`crate::predicate`]) records one run. A model-check
//! receipt records a whole state space: the bounds and fix switches of the
//! model, how much of it the checker enumerated, each property's result and,
//! when a property fails, the shortest counterexample as a list of typed
//! steps (action, actor, request, the state after it) that a replay can walk
//! one step at a time. It travels in the same DSSE/in-toto envelope as every
//! other receipt, under its own `predicateType` ([`MODEL_CHECK_PREDICATE_TYPE`]).
//!
//! Like the probe predicate, every type refuses unknown fields.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::predicate::{EngineInfo, FinishReason, Fix};

/// `predicateType` of a model-check receipt.
pub const MODEL_CHECK_PREDICATE_TYPE: &str = "https://kvwitness.dev/attestation/model-check/v2";

/// Everything one model-check run established.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelCheckPredicate {
    /// The checker and its version, e.g. `stateright` `0.31`.
    pub checker: CheckerInfo,
    pub engine: EngineInfo,
    pub model: ModelBounds,
    pub exploration: Exploration,
    /// One entry per property, in the model's order.
    pub properties: Vec<PropertyResult>,
    /// The shortest path to the first failing property, when one fails.
    pub counterexample: Option<Counterexample>,
    /// True when every `always` and `eventually` property held and every
    /// `sometimes` property was witnessed.
    pub all_hold: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckerInfo {
    pub name: String,
    pub version: String,
    /// Search order: `bfs` (shortest counterexamples) or `dfs` (with symmetry reduction).
    pub strategy: String,
}

/// The bounds and switches the model was built with: re-checking with them
/// reproduces the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelBounds {
    pub requests: u32,
    pub tenants: u32,
    pub decode_pages: u32,
    pub prefill_pages: u32,
    pub page_size: u32,
    pub fixes: Vec<Fix>,
    pub faults: FaultBudget,
    /// Whether request symmetry was used to merge equivalent states.
    pub symmetry: bool,
}

impl ModelBounds {
    /// The fix switches that were on.
    pub fn fix_set(&self) -> crate::FixSet {
        crate::FixSet::new(&self.fixes)
    }
}

/// How many times each injected fault may happen in one execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultBudget {
    /// Client aborts (each may hit any stage of a request's life).
    pub aborts: u32,
    /// Page writes that land after decode closed their bootstrap room.
    pub late_writes: u32,
    /// Drain acks that never reach the sender.
    pub lost_acks: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Exploration {
    /// States generated, repeats included.
    pub states: u64,
    pub unique_states: u64,
    pub max_depth: u64,
    /// Whether the whole reachable state space was enumerated (false when a
    /// search stopped at its first counterexample or at a state target).
    pub complete: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Expectation {
    Always,
    Sometimes,
    Eventually,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PropertyStatus {
    /// An `always`/`eventually` property held in every explored state.
    Holds,
    /// A counterexample exists.
    Violated,
    /// A `sometimes` property was witnessed.
    Witnessed,
    /// A `sometimes` property was never witnessed: the model may be vacuous.
    NotWitnessed,
    /// The search stopped before it could decide.
    Undecided,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PropertyResult {
    /// Stable property id, e.g. `isolation`.
    pub name: String,
    pub expectation: Expectation,
    pub status: PropertyStatus,
}

/// A path from the initial state to a state that violates `property`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Counterexample {
    pub property: String,
    /// Steps 1..=n, in order.
    pub steps: Vec<PathStep>,
    /// What the last state violates, as facts.
    pub violations: Vec<ViolationFact>,
}

/// One transition of the counterexample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathStep {
    /// 1-based position in the path.
    pub index: u32,
    /// Action id, e.g. `prefill_forward`.
    pub action: String,
    /// `router`, `prefill`, `decode`, `channel`, `client`.
    pub actor: String,
    /// Request id the action concerns.
    pub rid: String,
    pub tenant: String,
    /// The engine decision the action took, where there was one.
    pub decision: Option<ModelDecision>,
    /// The acting request after the step.
    pub request: ReqSnapshot,
    /// Decode pages after the step.
    pub decode_pages: Vec<PageSnapshot>,
}

/// The engine decision a step of the model took, as the policy returned it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ModelDecision {
    /// `entry_door` of prefill's bootstrap queue or decode's prealloc
    /// queue; `finished` is what `Req.finished()` said when it admitted.
    EntryDoor {
        door: DoorVerdict,
        finished: Option<bool>,
    },
    /// `prefill_admission_door`, then (when it admitted)
    /// `prefill_result_action`; `finished` is `Req.finished()` at the door.
    PrefillForward {
        door: DoorVerdict,
        finished: bool,
        result: Option<ResultStep>,
    },
    /// Decode's transfer-queue door.
    HandoffDoor { handoff: Handoff },
    /// A page write landed after decode closed its bootstrap room.
    LateWrite,
}

/// What a door does with a request (the engine's `policy::Door`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DoorVerdict {
    /// Let it through.
    Admit,
    /// Retire it now with its recorded rejection (PR #38935).
    Retire,
    /// Drop it: `finished()` says it is done.
    DropFinished,
}

/// What prefill did with a batch result (the engine's `policy::ResultAction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResultStep {
    /// Send the chunk's pages and run the next chunk.
    SendChunk,
    /// Send the remaining pages with the final flag (transfer-complete).
    SendLastChunk,
    /// Retire the aborted result: free KV and metadata once, best-effort
    /// `sender.abort()`, never send (PR #36988).
    Retire,
}

/// Decode's transfer-queue door (the engine's `policy::HandoffDecision`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Handoff {
    /// Keep waiting.
    Wait,
    /// Accept the handoff into the running batch.
    Admit,
    /// Abort the request with this status and upstream's message.
    Abort {
        status: u16,
        message: String,
        transfer_failure: bool,
    },
}

/// A request as both workers hold it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReqSnapshot {
    /// Prompt tokens the client sent (decode reserves pages for these).
    pub original_len: u32,
    pub prefill_stage: String,
    pub decode_stage: String,
    /// `len(origin_input_ids)` on prefill after validation.
    pub prefill_input_len: u32,
    /// Prefill's `to_finish` / `finished_reason`.
    pub prefill_to_finish: Option<FinishReason>,
    pub prefill_finished_reason: Option<FinishReason>,
    pub decode_to_finish: Option<FinishReason>,
    pub decode_finished_reason: Option<FinishReason>,
    /// Decode page table (reserved pages, in position order).
    pub decode_table: Vec<u32>,
    pub writes_posted: u32,
    pub writes_landed: u32,
    pub final_sent: bool,
    /// HTTP statuses the client received, in order.
    pub answers: Vec<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PageSnapshot {
    pub page: u32,
    /// Request the page is allocated to, if any.
    pub owner: Option<String>,
    /// Who wrote the page's bytes last: a request id (`generation` after a
    /// colon) or `earlier:<tenant>` for KV left before the checked window.
    pub writer: Option<String>,
}

/// A broken invariant, as a fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ViolationFact {
    pub property: String,
    pub rid: String,
    pub page: Option<u32>,
    /// Writer of the page, rendered like [`PageSnapshot::writer`].
    pub writer: Option<String>,
    pub status: Option<u16>,
}

impl crate::receipt::PredicateKind for ModelCheckPredicate {
    const PREDICATE_TYPE: &'static str = MODEL_CHECK_PREDICATE_TYPE;
    const WHAT: &'static str = "model-check predicate";
    fn check(&self) -> Result<(), crate::EvidenceError> {
        check_model_check_predicate(self).map_err(|e| crate::EvidenceError::Steps(e.to_string()))
    }
}

/// Why a model-check predicate is inconsistent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelCheckError {
    #[error("model-check predicate: {0}")]
    Inconsistent(String),
}

/// Check a predicate's own consistency: a counterexample exactly when a
/// property is violated, naming a violated property, with steps numbered
/// 1..=n; `all_hold` agreeing with the property results.
pub fn check_model_check_predicate(p: &ModelCheckPredicate) -> Result<(), ModelCheckError> {
    let bad = |m: String| Err(ModelCheckError::Inconsistent(m));
    if p.exploration.unique_states > p.exploration.states {
        return bad(format!(
            "{} unique states out of {} states generated",
            p.exploration.unique_states, p.exploration.states
        ));
    }
    let violated: Vec<&str> = p
        .properties
        .iter()
        .filter(|r| r.status == PropertyStatus::Violated)
        .map(|r| r.name.as_str())
        .collect();
    let all_hold = p
        .properties
        .iter()
        .all(|r| matches!(r.status, PropertyStatus::Holds | PropertyStatus::Witnessed));
    if p.all_hold != all_hold {
        return bad(format!(
            "all_hold is {} but the property results say {all_hold}",
            p.all_hold
        ));
    }
    match (&p.counterexample, violated.is_empty()) {
        (Some(c), _) if !violated.contains(&c.property.as_str()) => {
            return bad(format!(
                "the counterexample is for '{}', which is not a violated property",
                c.property
            ))
        }
        (None, false) => return bad("a property is violated but no counterexample is given".into()),
        _ => {}
    }
    if let Some(c) = &p.counterexample {
        if c.steps.is_empty() {
            return bad("the counterexample has no steps".into());
        }
        for (i, s) in c.steps.iter().enumerate() {
            if s.index as usize != i + 1 {
                return bad(format!(
                    "counterexample step {} is numbered {}",
                    i + 1,
                    s.index
                ));
            }
        }
    }
    Ok(())
}
