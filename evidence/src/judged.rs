//! What a scenario run was expected to do, what it did and why, as typed
//! facts.
//!
//! A scenario receipt and a gates row say three things about a run: what
//! the record and the guard predict ([`Expected`]), what the assertion saw
//! ([`Observed`]) and why the row reads as it does ([`Why`]). The engine's
//! checks fill them from the run's own events, with the run's numbers and
//! names as fields; no sentence is signed. The words crate (`kvw-words`) turns
//! them into sentences in the reader's language, for `kvw` and the
//! explorer alike.
//!
//! The vocabulary is closed and small: an [`Outcome`] is what a scenario's
//! assertion asserts when it holds (scenarios that check the same thing
//! share one), a [`Breach`] the first check that failed. Every type refuses
//! unknown fields and variants.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::predicate::{DoorDecision, DoorName, FinishReason, Fix, ResourceKind, Worker};

/// A rule inside a fix switch that a scenario depends on: with the switch
/// on and the rule removed, the scenario's assertion fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum GuardRule {
    /// `is_unadmitted_reject`'s exclusions for re-entering requests
    /// (metadata buffer, retraction backup, retract and re-bootstrap flags).
    UnadmittedRejectExclusions,
    /// Retiring only requests that carry a pending rejection.
    RetireOnlyPendingRejections,
    /// NULL (non-disaggregated) mode left alone by the PD doors.
    NullModeUntouched,
    /// Detaching a streaming session's active slot when retiring.
    SessionDetach,
    /// Detaching streaming sessions only.
    DetachStreamingOnly,
    /// Waiting for in-flight chunk writes before the release (a model
    /// assumption: upstream's `inflight_middle_chunks` counts overlapped
    /// middle-chunk forward results, PR #36926, not RDMA writes in flight).
    WaitForInflightWrites,
    /// Ignoring a result delivered again for a retired request.
    IgnoreLateResults,
    /// Prefill keeping the drain-ack target until the writes finish (PR
    /// #40645; without it `CommonKVSender.clear()` drops it).
    AckAfterWrites,
    /// One drain ack per decode peer.
    AckEveryPeer,
    /// Acking a cleared room once its outstanding chunk lands.
    AckClearedRoom,
}

impl GuardRule {
    pub const ALL: [GuardRule; 10] = [
        GuardRule::UnadmittedRejectExclusions,
        GuardRule::RetireOnlyPendingRejections,
        GuardRule::NullModeUntouched,
        GuardRule::SessionDetach,
        GuardRule::DetachStreamingOnly,
        GuardRule::WaitForInflightWrites,
        GuardRule::IgnoreLateResults,
        GuardRule::AckAfterWrites,
        GuardRule::AckEveryPeer,
        GuardRule::AckClearedRoom,
    ];
}

/// What the record and the guard say a run under these switches does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Expected {
    /// The guard is on: the assertion holds with this outcome.
    Holds { outcome: Outcome },
    /// The guard is off and the record says the failure reproduces.
    FailsWithout { guard: Vec<Fix> },
    /// The guard is off and nothing tests the defense.
    NotExercisedWithout { guard: Vec<Fix> },
    /// The guard is off and the record has no run of the case before the
    /// fix, for `reason`: whatever the engine shows is its own prediction.
    NotObservedWithout { guard: Vec<Fix>, reason: String },
}

/// What the assertion saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Observed {
    /// It held, with this outcome (the run's own numbers).
    Held { outcome: Outcome },
    /// It failed (the breach is in [`Why::Broke`]).
    AssertionFails,
}

/// Why the row reads as it does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Why {
    /// It held with the guard on.
    GuardedBy { guard: Vec<Fix> },
    /// It held with the guard off: the defense was not tested.
    Untested { guard: Vec<Fix> },
    /// It failed at this check; `guard_off` lists the guard's switches that
    /// were off (empty when the guard was on).
    Broke { breach: Breach, guard_off: Vec<Fix> },
}

/// What a re-entering request's queue did after its door admitted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum AfterReentry {
    /// The queue that owns the resource freed it once.
    FreedByItsQueue { resource: ResourceKind },
    /// Decode resumed it from the retracted queue and answered its pending status.
    ResumedRetracted { status: u16 },
    /// The worker's queue took it and bootstrapped it (a sender on prefill,
    /// a new receiver on decode).
    Bootstrapped { worker: Worker },
}

/// What a scenario's assertion asserts, as it held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Outcome {
    /// A rejected prompt retired at `door`, with nothing created behind it.
    RetiredAtDoor { door: DoorName },
    /// A re-entering request admitted at `door` with its pending abort kept.
    AdmittedWithPendingAbort { door: DoorName, then: AfterReentry },
    /// Admitted at `door` (or, with no door named, never rejected) and
    /// answered `status` with its own text.
    ServedOwnText { door: Option<DoorName>, status: u16 },
    /// NULL mode: enqueued with the rejection pending in `to_finish`; the
    /// batch boundary answered `status`.
    EnqueuedWithPendingReject { status: u16 },
    /// The rejected request kept its original `status`, its streaming
    /// session's slot was released, the next request got `next_status`.
    SessionSlotReleased { status: u16, next_status: u16 },
    /// The session was not detached; the next request was answered
    /// (`next_status`, where the run says which).
    SessionLeftAlone { next_status: Option<u16> },
    /// An aborted prefill result retired at
    /// `process_batch_result_disagg_prefill`: its KV pages and `freed` freed
    /// once each, `chunks_sent` chunks sent before it, one prefill answer
    /// `status` (with `err_type` where the check read it).
    ResultRetired {
        status: u16,
        err_type: Option<String>,
        freed: Vec<ResourceKind>,
        chunks_sent: u32,
        /// `sender.abort()` raised and the cleanup ran anyway.
        sender_abort_failed: bool,
        /// The release came after the request's last chunk write landed.
        released_after_landing: bool,
    },
    /// A hybrid request's Mamba slot, allocated before any KV, freed once;
    /// no forward; prefill answered `status`.
    MambaSlotFreedBeforeKv { status: u16 },
    /// `writer`'s pages held until its late write drained; `reader` read only
    /// its own pages and got `status` with its own text.
    LateWriteDrained {
        writer: String,
        reader: String,
        status: u16,
    },
    /// No worker answered 200 for a request its client aborted, nor did the
    /// client get 200 (`status`: what it got, where the run says).
    AbortNotAnswered200 { status: Option<u16> },
    /// Every metadata buffer index freed once and never held by two
    /// requests; no KV page freed twice.
    MetadataIndexOneHolder,
    /// No write landed outside its owner's pages; decode freed them once,
    /// after the drain (`drain_acks`: how many acks the run counted).
    FreedOnceAfterDrain { drain_acks: Option<u32> },
    /// A prompt past the pool answered with an error (`status`, where the
    /// run says which), not 200; no foreign page read.
    RefusedBeyondPool { status: Option<u16> },
}

/// A worker's answer: status and finish reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerAnswer {
    pub status: u16,
    pub finish_reason: String,
}

/// A write that landed in a page its writer no longer held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StaleWrite {
    /// The writer.
    pub rid: String,
    pub page: u32,
}

/// The first check of a scenario's assertion that failed, with what the
/// run did instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Breach {
    /// A door decided otherwise (`decided` is `None` when the request never
    /// reached it), reading this `to_finish`.
    DoorDecided {
        door: DoorName,
        decided: Option<DoorDecision>,
        to_finish: Option<FinishReason>,
    },
    /// A worker's endpoint (prefill: sender and bootstrap; decode: receiver
    /// and metadata buffer) was created though it must not be, or not
    /// created though it must be.
    Endpoint { worker: Worker, created: bool },
    /// The request ran forwards it must not run.
    Forwards { count: u32 },
    /// Decode reserved pages for a request it must retire.
    Reserved { reservations: u32 },
    /// A per-request resource was not freed exactly once.
    ResourceFreed {
        rid: String,
        resource: ResourceKind,
        frees: u32,
        double_frees: u32,
    },
    /// A resource the scenario needs was never allocated.
    ResourceNotAllocated { resource: ResourceKind },
    /// `sender.abort()` did not raise as the script asked.
    SenderAbortDidNotFail,
    /// `sender.abort()` was not called exactly once.
    SenderAborts { calls: u32 },
    /// `send_kv_chunk` was called another number of times.
    ChunksSent { sent: u32, expected: u32 },
    /// A worker did not release a request's KV pages exactly once.
    PagesReleased {
        rid: String,
        worker: Worker,
        releases: u32,
    },
    /// A worker gave a request's KV pages back without the drain ack: the
    /// deferred release ran out its timeout.
    ReleasedWithoutDrainAck { rid: String, worker: Worker },
    /// KV pages were freed twice.
    PageDoubleFrees { count: u32 },
    /// Decode attended for a request it must not serve.
    Attended { rid: String },
    /// A worker's answers were not `expected` exactly once.
    WorkerAnswered {
        worker: Worker,
        answers: Vec<WorkerAnswer>,
        expected: u16,
    },
    /// A worker answered 200 for a request its client aborted.
    WorkerAnswered200 {
        worker: Worker,
        answers: Vec<WorkerAnswer>,
    },
    /// The client got `status` (`None`: no answer) instead of `expected`
    /// (`None`: any answer).
    ClientGot {
        rid: String,
        status: Option<u16>,
        expected: Option<u16>,
    },
    /// The client got 200 where it must not.
    ClientGot200 { rid: String },
    /// The client did not get 200 with its own text.
    NotOwnText { rid: String, status: Option<u16> },
    /// The answer's error type.
    ErrType { got: String, expected: String },
    /// Prefill released (event index, `None`: never) before its last chunk
    /// write landed (event index).
    ReleasedBeforeLanding {
        release: Option<u32>,
        last_landing: Option<u32>,
    },
    /// Writes landed in pages their writer no longer held.
    StaleWrites { writes: Vec<StaleWrite> },
    /// Decode attention read pages another request wrote.
    ForeignReads { rid: String, pages: u64 },
    /// A non-streaming session was detached.
    SessionDetached { times: u32 },
    /// The input check rejected a prompt it must admit.
    InputRejected { rid: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_refuse_unknown_fields_and_variants() {
        let ok = r#"{"kind":"broke","breach":{"kind":"forwards","count":1},"guard_off":[]}"#;
        assert!(serde_json::from_str::<Why>(ok).is_ok());
        let extra =
            r#"{"kind":"broke","breach":{"kind":"forwards","count":1,"x":2},"guard_off":[]}"#;
        assert!(serde_json::from_str::<Why>(extra).is_err());
        let unknown = r#"{"kind":"held","outcome":{"kind":"made_up"}}"#;
        assert!(serde_json::from_str::<Observed>(unknown).is_err());
        assert!(serde_json::from_str::<GuardRule>(r#""made-up""#).is_err());
    }
}
