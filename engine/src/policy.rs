//! The decisions, as small pure functions over plain state.
//!
//! Every door of the PD lifecycle (admission, result handling, handoff
//! acceptance, page release, router relay) is decided here and nowhere else,
//! from a `Req` and the set of fixes that are on. The simulator calls these;
//! so will the model checker and the HTTP server. Keeping them free of I/O
//! and clocks is what lets all three agree.

use kvw_evidence::Fix;

use crate::req::{Req, Session};

/// The boolean fix switches that are on (the vocabulary's one set type).
pub use kvw_evidence::FixSet;

/// The doors' decisions are the vocabulary's types, so what the model
/// checker signs is what the simulator decided.
pub use kvw_evidence::model_check::{
    DoorVerdict as Door, Handoff as HandoffDecision, ResultStep as ResultAction,
};

/// Upstream `is_unadmitted_reject` (PR #38935): a rejected request that
/// holds nothing yet. Re-entering, preempted or retracted requests may hold
/// KV, metadata or a retraction backup and must go through normal cleanup.
pub fn is_unadmitted_reject(req: &Req) -> bool {
    req.to_finish.is_some()
        && !req.finished()
        && req.metadata_buffer_index.is_none()
        && req.retraction_backup.is_none()
        && !req.is_retracted
        && !req.is_rebootstrap
}

/// Door of the prefill bootstrap queue and of the decode prealloc queue,
/// before any bootstrap room, sender/receiver or metadata buffer exists.
/// Pre-fix there is no check here at all.
pub fn entry_door(req: &Req, fixes: FixSet) -> Door {
    entry_door_with(req, fixes, &Doors::SHIPPED)
}

/// [`entry_door`] with the rules of `doors`.
pub fn entry_door_with(req: &Req, fixes: FixSet, doors: &Doors) -> Door {
    if fixes.has(Fix::RetireUnadmittedReject) && (doors.unadmitted_reject)(req) {
        Door::Retire
    } else {
        Door::Admit
    }
}

/// The finer rules inside the fix switches: the exclusions of
/// `is_unadmitted_reject`, what retiring does to a session, how the #36988
/// retire path treats in-flight chunks and late results, and the drain-ack
/// rules of deferred release. [`Doors::SHIPPED`] holds upstream's rules; a
/// scenario's test swaps one rule for a variant without its guard to show
/// that the scenario notices the guard's removal.
#[derive(Debug, Clone, Copy)]
pub struct Doors {
    /// Upstream `is_unadmitted_reject`.
    pub unadmitted_reject: fn(&Req) -> bool,
    /// What retiring a request does to its session.
    pub session_effect: fn(Option<&Session>) -> SessionEffect,
    /// PR #36988: an aborted result is released only after the chunk writes
    /// still in flight for its room have landed. Model assumption: upstream
    /// waits on `inflight_middle_chunks`, which counts overlapped
    /// middle-chunk forward results (PR #36926), not RDMA writes in flight
    /// (see [`crate::scenarios::cleanup::INFLIGHT_CHUNK_ASSUMPTION`]).
    pub retire_waits_for_inflight: bool,
    /// PR #36988: a delayed result of an already retired request is ignored.
    pub ignore_retired_result: bool,
    /// PR #40645: prefill keeps a decode peer's drain-ack target until the
    /// room's writes finish, rather than `CommonKVSender.clear()` dropping
    /// it when prefill polls `Failed` after the abort (then no ack comes
    /// and decode releases at [`DEFERRED_RELEASE_TIMEOUT_US`]).
    pub ack_waits_for_writes: bool,
    /// PR #41402: every decode peer of a room is acknowledged, not one per room.
    pub ack_every_peer: bool,
    /// A room cleared with a chunk still outstanding is acknowledged once
    /// that chunk lands (SGLang #38961, third gap).
    pub ack_cleared_room: bool,
    /// NULL (non-PD) mode keeps enqueuing a rejected request (PR #38935
    /// leaves it alone on purpose).
    pub null_mode_untouched: bool,
}

impl Doors {
    /// Upstream's rules.
    pub const SHIPPED: Doors = Doors {
        unadmitted_reject: is_unadmitted_reject,
        session_effect: retire_session_effect,
        retire_waits_for_inflight: true,
        ignore_retired_result: true,
        ack_waits_for_writes: true,
        ack_every_peer: true,
        ack_cleared_room: true,
        null_mode_untouched: true,
    };
}

impl Default for Doors {
    fn default() -> Self {
        Doors::SHIPPED
    }
}

/// The NULL-mode door (`Scheduler._add_request_to_queue` without
/// disaggregation): PR #38935 deliberately leaves it alone, because there the
/// one-token stub costs one cheap forward and the batch boundary returns the
/// 400.
pub fn null_mode_door(req: &Req, fixes: FixSet, doors: &Doors) -> Door {
    if doors.null_mode_untouched {
        Door::Admit
    } else {
        entry_door_with(req, fixes, doors)
    }
}

/// HTTP error type upstream reports with an abort status
/// (`BadRequestError` for 400, `InternalServerError` for 5xx).
pub fn err_type(status: u16) -> &'static str {
    match status {
        400 => "BadRequestError",
        s if s >= 500 => "InternalServerError",
        _ => "Error",
    }
}

/// Prefill waiting-queue admission (`get_new_batch_prefill`): it asks
/// `finished()`, which misses a rejection still sitting in `to_finish`.
pub fn prefill_admission_door(req: &Req) -> Door {
    if req.finished() {
        Door::DropFinished
    } else {
        Door::Admit
    }
}

/// `process_batch_result_disagg_prefill` for one request.
pub fn prefill_result_action(req: &Req, last_chunk: bool, fixes: FixSet) -> ResultAction {
    let aborted = req.to_finish.is_some() || req.finished();
    if fixes.has(Fix::RetireAbortedPrefillResult) && aborted {
        ResultAction::Retire
    } else if last_chunk {
        ResultAction::SendLastChunk
    } else {
        ResultAction::SendChunk
    }
}

/// What the receiver's poll said about the handoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvPoll {
    /// Waiting for the peer or for writes.
    Transferring,
    /// Final chunk sent and every write landed.
    Success,
    /// The transfer failed.
    Failed,
}

/// Decode's transfer-queue door. Pre-fix it trusts transfer-complete and
/// `finished()`; with `kv-checksum` the checksum must match first
/// (PR #39500: decode verifies before batching, a mismatch aborts and counts
/// a transfer failure). `checksum_ok` is `None` when no checksum was checked.
pub fn handoff_door(
    req: &Req,
    poll: KvPoll,
    waited_us: u64,
    timeout_us: u64,
    checksum_ok: Option<bool>,
) -> HandoffDecision {
    let pending_status = req.effective_finish().map(|r| r.status_code());
    match poll {
        KvPoll::Failed => HandoffDecision::Abort {
            status: 500,
            message: "KV transfer failed".into(),
            transfer_failure: true,
        },
        // Upstream's waiting timeout marks the room `KVPoll.Failed` and
        // decode aborts it with `HTTPStatus.INTERNAL_SERVER_ERROR`
        // (`DecodeTransferQueue.pop_transferred`, read in SGLang v0.5.23).
        KvPoll::Transferring if waited_us >= timeout_us => HandoffDecision::Abort {
            status: 500,
            message: format!(
                "KV transfer timed out after {} s waiting for the prefill handoff",
                timeout_us / 1_000_000
            ),
            transfer_failure: true,
        },
        KvPoll::Transferring => HandoffDecision::Wait,
        KvPoll::Success if checksum_ok == Some(false) => HandoffDecision::Abort {
            status: 500,
            message: "KV checksum mismatch between prefill and decode".into(),
            transfer_failure: true,
        },
        KvPoll::Success if req.finished() => HandoffDecision::Abort {
            status: pending_status.unwrap_or(500),
            message: "request finished before decode".into(),
            transfer_failure: false,
        },
        KvPoll::Success => HandoffDecision::Admit,
    }
}

/// Whether freed pages of a request may go back to the free list now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    Now,
    /// Keep them allocated until in-flight writes drain and the peer acks.
    Defer,
    /// Give them back although the drain ack never came: the deferral ran
    /// out its [`DEFERRED_RELEASE_TIMEOUT_US`]. A write still on the wire
    /// then lands in whatever the pages hold next (the use-after-free
    /// window SGLang PR #38961 describes).
    TimedOut,
}

/// How long decode keeps the pages of a deferred release waiting for the
/// drain ack before it gives them back anyway: 30 s in the deferred
/// decode-side release of SGLang PR #35049
/// (<https://github.com/sgl-project/sglang/pull/35049>, "released only
/// after the drain (here via the 30 s timeout)"). PR #38961
/// (<https://github.com/sgl-project/sglang/pull/38961>) calls the release
/// after it a use-after-free window. The constant only orders the release
/// among the other events; whether anything goes wrong follows from a
/// write landing after it.
pub const DEFERRED_RELEASE_TIMEOUT_US: u64 = 30_000_000;

/// Release rule for the pages of an aborted or failed request. Without
/// deferred release (PRs #35049, #40645, #41404) pages return at once even
/// with writes in flight, so a late write lands in the next tenant's page.
pub fn release_rule(inflight_writes: usize, peer_acked: bool, fixes: FixSet) -> Release {
    if fixes.has(Fix::DeferredRelease) && (inflight_writes > 0 || !peer_acked) {
        Release::Defer
    } else {
        Release::Now
    }
}

/// [`release_rule`] for a deferral of decode's pages that has waited
/// `waited_us`: once the release timeout passed, the pages go back
/// ([`Release::TimedOut`]) whatever the writes and the ack say.
pub fn deferred_release_rule(
    inflight_writes: usize,
    peer_acked: bool,
    waited_us: u64,
    fixes: FixSet,
) -> Release {
    match release_rule(inflight_writes, peer_acked, fixes) {
        Release::Defer if waited_us >= DEFERRED_RELEASE_TIMEOUT_US => Release::TimedOut,
        rule => rule,
    }
}

/// What the PD router returns to the client once both workers answered:
/// decode's answer. SGLang's `mini_lb` gathers both responses and returns
/// decode's status (prefill's body only feeds logprobs); the Rust gateway
/// also checks decode's error first. Prefill's own status therefore never
/// decides the client's answer here. Returns `None` until both answered.
pub fn router_answer(prefill_status: Option<u16>, decode_status: Option<u16>) -> Option<u16> {
    prefill_status.and(decode_status)
}

/// What retiring a request does to its session (PR #38935).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEffect {
    None,
    /// A streaming session's active slot is detached.
    DetachActiveSlot,
    /// A non-streaming session is left alone.
    Untouched,
}

pub fn retire_session_effect(session: Option<&Session>) -> SessionEffect {
    match session {
        None => SessionEffect::None,
        Some(s) if s.streaming && s.holds_active_slot => SessionEffect::DetachActiveSlot,
        Some(_) => SessionEffect::Untouched,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::req::RetractionBackup;

    fn rejected() -> Req {
        let mut r = Req::new("t-1", "t", vec![1; 10], 4, 1);
        r.set_finish_with_abort("too long", 400);
        r
    }

    #[test]
    fn pre_fix_doors_admit_a_rejected_request() {
        let r = rejected();
        assert_eq!(entry_door(&r, FixSet::default()), Door::Admit);
        assert_eq!(prefill_admission_door(&r), Door::Admit);
        assert_eq!(
            prefill_result_action(&r, true, FixSet::default()),
            ResultAction::SendLastChunk
        );
    }

    #[test]
    fn retire_unadmitted_reject_only_retires_requests_holding_nothing() {
        let on = FixSet::new(&[Fix::RetireUnadmittedReject]);
        assert_eq!(entry_door(&rejected(), on), Door::Retire);
        let mut holding = rejected();
        holding.metadata_buffer_index = Some(3);
        assert_eq!(entry_door(&holding, on), Door::Admit);
        let mut retracted = rejected();
        retracted.is_retracted = true;
        retracted.retraction_backup = Some(RetractionBackup { tokens: 8 });
        assert_eq!(entry_door(&retracted, on), Door::Admit);
        let mut reentering = rejected();
        reentering.is_rebootstrap = true;
        assert_eq!(entry_door(&reentering, on), Door::Admit);
        let valid = Req::new("v-1", "v", vec![1; 10], 4, 2);
        assert_eq!(entry_door(&valid, on), Door::Admit);
    }

    #[test]
    fn retire_aborted_prefill_result_stops_the_send() {
        let on = FixSet::new(&[Fix::RetireAbortedPrefillResult]);
        assert_eq!(
            prefill_result_action(&rejected(), true, on),
            ResultAction::Retire
        );
        let valid = Req::new("v-1", "v", vec![1; 10], 4, 2);
        assert_eq!(
            prefill_result_action(&valid, true, on),
            ResultAction::SendLastChunk
        );
        assert_eq!(
            prefill_result_action(&valid, false, on),
            ResultAction::SendChunk
        );
    }

    #[test]
    fn handoff_door_checks_checksum_and_timeout() {
        let r = Req::new("v-1", "v", vec![1; 10], 4, 2);
        assert_eq!(
            handoff_door(&r, KvPoll::Success, 0, 10, None),
            HandoffDecision::Admit
        );
        assert!(matches!(
            handoff_door(&r, KvPoll::Success, 0, 10, Some(false)),
            HandoffDecision::Abort {
                status: 500,
                transfer_failure: true,
                ..
            }
        ));
        assert_eq!(
            handoff_door(&r, KvPoll::Transferring, 9, 10, None),
            HandoffDecision::Wait
        );
        let mut relayed = r.clone();
        relayed.set_finish_with_abort("too long", 400);
        assert!(
            matches!(
                handoff_door(&relayed, KvPoll::Transferring, 10, 10, None),
                HandoffDecision::Abort { status: 500, .. }
            ),
            "the timeout path answers 500 whatever is pending"
        );
    }

    #[test]
    fn the_router_returns_decodes_answer_once_both_answered() {
        assert_eq!(router_answer(Some(400), None), None);
        assert_eq!(router_answer(None, Some(200)), None);
        assert_eq!(router_answer(Some(400), Some(500)), Some(500));
        assert_eq!(router_answer(Some(200), Some(200)), Some(200));
    }

    #[test]
    fn deferred_release_holds_pages_with_writes_in_flight() {
        let on = FixSet::new(&[Fix::DeferredRelease]);
        assert_eq!(release_rule(2, true, FixSet::default()), Release::Now);
        assert_eq!(release_rule(2, true, on), Release::Defer);
        assert_eq!(release_rule(0, false, on), Release::Defer);
        assert_eq!(release_rule(0, true, on), Release::Now);
    }

    #[test]
    fn a_deferral_without_its_drain_ack_ends_at_the_release_timeout() {
        let on = FixSet::new(&[Fix::DeferredRelease]);
        let t = DEFERRED_RELEASE_TIMEOUT_US;
        assert_eq!(deferred_release_rule(1, false, t - 1, on), Release::Defer);
        assert_eq!(deferred_release_rule(1, false, t, on), Release::TimedOut);
        assert_eq!(deferred_release_rule(0, true, t, on), Release::Now);
        assert_eq!(
            deferred_release_rule(1, false, t, FixSet::default()),
            Release::Now
        );
    }

    #[test]
    fn retiring_detaches_only_a_streaming_sessions_slot() {
        let s = |streaming| Session {
            id: "s".into(),
            streaming,
            holds_active_slot: true,
        };
        assert_eq!(
            retire_session_effect(Some(&s(true))),
            SessionEffect::DetachActiveSlot
        );
        assert_eq!(
            retire_session_effect(Some(&s(false))),
            SessionEffect::Untouched
        );
        assert_eq!(retire_session_effect(None), SessionEffect::None);
    }
}
