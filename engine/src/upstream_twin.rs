//! The engine's side of the upstream differential: each probe case of
//! `upstream/probes` run on the engine's own `Req` and door decisions, with
//! the probe's inputs and the fixes the release contains.
//!
//! A probe records what a real SGLang release did; its twin here records
//! what the engine decides for the same request, in the same field names, so
//! the two can be compared field by field
//! ([`kvw_evidence::upstream_run::compare`]). The decisions come from
//! [`crate::policy`] and [`crate::req`], the functions the simulator calls;
//! what a decision creates or releases is the simulator's rule for it
//! (an admitted request gets its sender, bootstrap room and metadata buffer
//! at bootstrap; a retired one gets none and is answered at once; a retired
//! prefill result calls `sender.abort()` and frees its KV and metadata once).

use std::collections::BTreeMap;

use kvw_evidence::upstream_run::DOOR_CASES;
use kvw_evidence::Fix;
use serde_json::{json, Value};

use crate::policy::{
    entry_door, handoff_door, null_mode_door, prefill_result_action, release_rule, Door, Doors,
    FixSet, HandoffDecision, KvPoll, Release, ResultAction, SessionEffect,
};
use crate::req::{
    max_req_input_len, validate_input_length, FinishReason, Req, RetractionBackup, Session,
};
use crate::sim::SamplingMask;

/// The inputs a probe ran with (it prints them beside its observations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inputs {
    pub context_len: u64,
    /// The pool of the worker whose door is probed.
    pub pool: u64,
    /// A prompt over that worker's cap.
    pub overlong: usize,
    /// A prompt well under it.
    pub valid: usize,
}

impl Inputs {
    /// Read the `inputs` object a probe prints; `None` when a field is
    /// missing or not a positive integer.
    pub fn from_json(v: &Value) -> Option<Inputs> {
        let n = |k: &str| v.get(k)?.as_u64().filter(|n| *n > 0);
        Some(Inputs {
            context_len: n("context_len")?,
            pool: n("pool")?,
            overlong: usize::try_from(n("overlong")?).ok()?,
            valid: usize::try_from(n("valid")?).ok()?,
        })
    }
}

/// One observation: field name to value.
pub type Fields = BTreeMap<String, Value>;

/// Which worker's door a case probes, and what the request carries.
#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    decode: bool,
    overlong: bool,
    metadata_index: bool,
    retraction_backup: bool,
    retracted: bool,
    rebootstrap: bool,
    /// The request carries `is_retracted` but comes back through a plain
    /// `add` (preempted and re-queued), not decode's retract path.
    preempted: bool,
    /// The request belongs to a session (`Some(streaming)`) whose active
    /// slot it holds when the session streams.
    session: Option<bool>,
}

/// The cases, by the names the probes use.
pub const CASES: [&str; 28] = [
    "input-cap",
    DOOR_CASES[0].1,
    DOOR_CASES[1].1,
    "test_valid_request_still_admitted.prefill",
    "test_valid_request_still_admitted.decode",
    "test_reentering_prefill_request_is_not_retired.metadata_buffer_index",
    "test_reentering_prefill_request_is_not_retired.retraction_backup",
    "test_preempted_reentry_is_not_retired.prefill",
    "test_preempted_reentry_is_not_retired.decode",
    "test_retracted_decode_request_is_not_retired.is_retracted.backup",
    "test_retracted_decode_request_is_not_retired.is_retracted.no_backup",
    "test_retracted_decode_request_is_not_retired.is_rebootstrap.backup",
    "test_retracted_decode_request_is_not_retired.is_rebootstrap.no_backup",
    "test_null_mode_is_deliberately_untouched",
    "test_retire_detaches_a_streaming_session",
    "test_retire_leaves_a_non_streaming_session_alone",
    "aborted-final-result",
    "aborted-middle-result",
    "test_delayed_result_ignores_already_retired_request",
    "decode-timeout",
    "test_sender_abort_failure_does_not_skip_local_cleanup",
    "test_grammar_rejection_retires_prefill_before_transfer",
    "test_aborted_middle_result_waits_for_inflight_chunk",
    "test_aborted_result_releases_mamba_allocated_before_kv",
    "test_sampling_mask_abort_preserves_error_and_releases_once.overflow",
    "test_sampling_mask_abort_preserves_error_and_releases_once.overflow.transport_error",
    "test_sampling_mask_abort_preserves_error_and_releases_once.invalid",
    "test_sampling_mask_abort_preserves_error_and_releases_once.invalid.transport_error",
];

/// Run `case` on the engine with `fixes`; `None` for a case it does not know.
pub fn observe(case: &str, inputs: &Inputs, fixes: &[Fix]) -> Option<Fields> {
    let fixes = FixSet::new(fixes);
    let prefill = Entry {
        overlong: true,
        ..Entry::default()
    };
    let decode = Entry {
        decode: true,
        ..prefill
    };
    let fields = match case {
        "input-cap" => input_cap(inputs),
        "test_rejected_request_is_retired_at_each_pd_door.prefill" => door(inputs, prefill, fixes),
        "test_rejected_request_is_retired_at_each_pd_door.decode" => door(inputs, decode, fixes),
        "test_valid_request_still_admitted.prefill" => door(
            inputs,
            Entry {
                overlong: false,
                ..prefill
            },
            fixes,
        ),
        "test_valid_request_still_admitted.decode" => door(
            inputs,
            Entry {
                overlong: false,
                ..decode
            },
            fixes,
        ),
        "test_reentering_prefill_request_is_not_retired.metadata_buffer_index" => door(
            inputs,
            Entry {
                metadata_index: true,
                ..prefill
            },
            fixes,
        ),
        "test_reentering_prefill_request_is_not_retired.retraction_backup" => door(
            inputs,
            Entry {
                retraction_backup: true,
                ..prefill
            },
            fixes,
        ),
        "test_preempted_reentry_is_not_retired.prefill" => door(
            inputs,
            Entry {
                retracted: true,
                ..prefill
            },
            fixes,
        ),
        "test_preempted_reentry_is_not_retired.decode" => door(
            inputs,
            Entry {
                preempted: true,
                ..decode
            },
            fixes,
        ),
        "test_retracted_decode_request_is_not_retired.is_retracted.backup" => door(
            inputs,
            Entry {
                retracted: true,
                retraction_backup: true,
                ..decode
            },
            fixes,
        ),
        "test_retracted_decode_request_is_not_retired.is_retracted.no_backup" => door(
            inputs,
            Entry {
                retracted: true,
                ..decode
            },
            fixes,
        ),
        "test_retracted_decode_request_is_not_retired.is_rebootstrap.backup" => door(
            inputs,
            Entry {
                rebootstrap: true,
                retraction_backup: true,
                ..decode
            },
            fixes,
        ),
        "test_retracted_decode_request_is_not_retired.is_rebootstrap.no_backup" => door(
            inputs,
            Entry {
                rebootstrap: true,
                ..decode
            },
            fixes,
        ),
        "test_null_mode_is_deliberately_untouched" => null_mode(inputs, fixes),
        "test_retire_detaches_a_streaming_session" => door(
            inputs,
            Entry {
                session: Some(true),
                ..prefill
            },
            fixes,
        ),
        "test_retire_leaves_a_non_streaming_session_alone" => door(
            inputs,
            Entry {
                session: Some(false),
                ..prefill
            },
            fixes,
        ),
        "aborted-final-result" => aborted_final_result(fixes),
        "aborted-middle-result" => aborted_middle_result(fixes),
        "test_delayed_result_ignores_already_retired_request" => delayed_result(fixes),
        "decode-timeout" => decode_timeout(fixes),
        "test_sender_abort_failure_does_not_skip_local_cleanup" => sender_abort_fails(fixes),
        "test_grammar_rejection_retires_prefill_before_transfer" => grammar_rejection(fixes),
        "test_aborted_middle_result_waits_for_inflight_chunk" => inflight_middle_chunk(fixes),
        "test_aborted_result_releases_mamba_allocated_before_kv" => mamba_before_kv(fixes),
        "test_sampling_mask_abort_preserves_error_and_releases_once.overflow"
        | "test_sampling_mask_abort_preserves_error_and_releases_once.overflow.transport_error" => {
            sampling_mask(SamplingMask::Overflow, fixes)
        }
        "test_sampling_mask_abort_preserves_error_and_releases_once.invalid"
        | "test_sampling_mask_abort_preserves_error_and_releases_once.invalid.transport_error" => {
            sampling_mask(SamplingMask::Invalid, fixes)
        }
        _ => return None,
    };
    Some(fields)
}

fn fields(pairs: impl IntoIterator<Item = (&'static str, Value)>) -> Fields {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn input_cap(i: &Inputs) -> Fields {
    let cap = max_req_input_len(i.context_len, i.pool);
    fields([
        ("input_cap", json!(cap)),
        (
            "rejects_at_cap",
            json!(validate_input_length(cap as usize, cap).is_some()),
        ),
        (
            "rejects_below_cap",
            json!(validate_input_length(cap as usize - 1, cap).is_some()),
        ),
    ])
}

/// The status and message a finish reason answers with.
fn status_message(reason: Option<&FinishReason>) -> (Value, Value) {
    match reason {
        Some(FinishReason::Abort {
            message,
            status_code,
        }) => (json!(status_code), json!(message)),
        Some(FinishReason::Length { .. }) => (json!(200), Value::Null),
        None => (Value::Null, Value::Null),
    }
}

/// Status, message and finish state the client-facing side shows.
fn finish(req: &Req, streamed: u32) -> Fields {
    let (status, message) = status_message(req.effective_finish());
    fields([
        ("status", status),
        ("message", message),
        ("finished", json!(req.finished())),
        ("to_finish_pending", json!(req.to_finish.is_some())),
        ("streamed", json!(streamed)),
    ])
}

/// A `len`-token request after the scheduler's intake check, and the
/// check's rejection message if it was over the cap.
fn after_intake(i: &Inputs, len: usize) -> (Req, Option<String>) {
    let mut req = Req::new("r", "t", vec![1; len], 8, 7);
    let rejection = validate_input_length(len, max_req_input_len(i.context_len, i.pool));
    if let Some(msg) = &rejection {
        req.set_finish_with_abort(msg, 400);
    }
    (req, rejection)
}

fn door(i: &Inputs, e: Entry, fixes: FixSet) -> Fields {
    let len = if e.overlong { i.overlong } else { i.valid };
    let (mut req, rejection) = after_intake(i, len);
    req.session = e.session.map(|streaming| Session {
        id: "s".into(),
        streaming,
        holds_active_slot: streaming,
    });
    if e.metadata_index {
        req.metadata_buffer_index = Some(0);
    }
    if e.retraction_backup {
        req.retraction_backup = Some(RetractionBackup { tokens: len });
    }
    req.is_retracted = e.retracted || e.preempted;
    req.is_rebootstrap = e.rebootstrap;
    let decision = entry_door(&req, fixes);
    let admitted = decision == Door::Admit;
    if decision == Door::Retire {
        req.update_finish_state();
    }
    // Decode puts a retracted request in its retracted queue, with no new
    // receiver; everything else admitted goes through bootstrap.
    let handshake = admitted && !(e.decode && e.retracted);
    let queue = match (admitted, e.decode, e.retracted) {
        (false, _, _) => "none",
        (true, true, true) => "retracted",
        (true, true, false) => "prealloc",
        (true, false, _) => "waiting",
    };
    let mut out = fields([
        ("rejected_at_intake", json!(rejection.is_some())),
        (
            "door",
            json!(match decision {
                Door::Admit => "admit",
                Door::Retire => "retire",
                Door::DropFinished => "refuse",
            }),
        ),
        ("queue", json!(queue)),
        ("bootstrap_room", json!(handshake)),
        ("prompt_tokens_after_door", json!(req.input_len())),
    ]);
    if e.decode {
        out.insert("receiver_created".into(), json!(u32::from(handshake)));
    } else {
        out.insert("sender_created".into(), json!(u32::from(handshake)));
        out.insert(
            "metadata_buffer".into(),
            json!(handshake && req.metadata_buffer_index.is_none()),
        );
    }
    if let Some(session) = &req.session {
        // Retiring at the door applies the rule's effect on the session
        // (`Scheduler.retire_unadmitted_request`); an admitted request keeps
        // its slot until scheduling detaches it.
        let detached = decision == Door::Retire
            && (Doors::SHIPPED.session_effect)(Some(session)) == SessionEffect::DetachActiveSlot;
        out.insert("session_attached".into(), json!(!detached));
        out.insert(
            "session_in_flight".into(),
            json!(session.holds_active_slot && !detached),
        );
    }
    out.extend(finish(&req, u32::from(decision == Door::Retire)));
    out
}

/// A rejected prompt on a scheduler that is not disaggregated.
fn null_mode(i: &Inputs, fixes: FixSet) -> Fields {
    let (mut req, rejection) = after_intake(i, i.overlong);
    let decision = null_mode_door(&req, fixes, &Doors::SHIPPED);
    if decision == Door::Retire {
        req.update_finish_state();
    }
    let mut out = fields([
        ("rejected_at_intake", json!(rejection.is_some())),
        (
            "queue",
            json!(if decision == Door::Admit {
                "waiting"
            } else {
                "none"
            }),
        ),
        ("prompt_tokens_after_door", json!(req.input_len())),
    ]);
    out.extend(finish(&req, u32::from(decision == Door::Retire)));
    out
}

/// A bootstrapped request holding KV and a metadata buffer.
fn bootstrapped() -> Req {
    let mut req = Req::new("r", "t", vec![1; 100], 8, 7);
    req.metadata_buffer_index = Some(0);
    req
}

fn result_fields(req: &Req, action: ResultAction, released: u32, streamed: u32) -> Fields {
    let sent = matches!(
        action,
        ResultAction::SendLastChunk | ResultAction::SendChunk
    );
    let mut out = fields([
        ("queue", json!(if sent { "inflight" } else { "none" })),
        ("chunk_sent", json!(u32::from(sent))),
        (
            "sender_abort",
            json!(u32::from(action == ResultAction::Retire && released > 0)),
        ),
        ("metadata_released", json!(released)),
        ("kv_released", json!(released)),
    ]);
    out.extend(finish(req, streamed));
    out
}

/// A bootstrapped request aborted by the client while it ran reaches a
/// chunk's result (`last_chunk`: its final one): the request after the
/// result path, whether that path retired it, and the fields it recorded.
fn aborted_result(fixes: FixSet, last_chunk: bool) -> (Req, bool, Fields) {
    let mut req = bootstrapped();
    req.to_finish = Some(aborted_by_client());
    let (retired, out) = through_result_door(&mut req, last_chunk, fixes);
    (req, retired, out)
}

/// The abort a client's cancel records while the request runs.
fn aborted_by_client() -> FinishReason {
    FinishReason::Abort {
        message: "aborted by the client".into(),
        status_code: 400,
    }
}

/// `req`'s chunk result through the result door: whether it retired the
/// request (which then frees what it holds once and streams its answer),
/// and the fields that recorded.
fn through_result_door(req: &mut Req, last_chunk: bool, fixes: FixSet) -> (bool, Fields) {
    let action = prefill_result_action(req, last_chunk, fixes);
    let retired = action == ResultAction::Retire;
    if retired {
        req.update_finish_state();
    }
    let out = result_fields(req, action, u32::from(retired), u32::from(retired));
    (retired, out)
}

/// An abort recorded while the request ran reaches its final result; then
/// the inflight queue polls the transfer as done.
fn aborted_final_result(fixes: FixSet) -> Fields {
    let (mut req, retired, mut out) = aborted_result(fixes, true);
    // The inflight queue's success path (`sim::prefill`): a request not yet
    // finished is finished with FINISH_LENGTH, then its metadata is freed.
    let inflight = !retired;
    if inflight && !req.finished() {
        req.finished_reason = Some(FinishReason::Length { length: 0 });
    }
    let (status, message) = status_message(req.finished_reason.as_ref());
    out.extend(fields([
        ("inflight_done", json!(inflight)),
        ("final_status", status),
        ("final_message", message),
        ("metadata_released_total", json!(1)),
    ]));
    out
}

/// An abort recorded while a chunked prefill runs reaches a middle chunk's
/// result (the next chunk already launched, no write of the room in flight).
fn aborted_middle_result(fixes: FixSet) -> Fields {
    let (_, _, mut out) = aborted_result(fixes, false);
    // A middle chunk's pages go out with `send_kv_chunk`; the request joins
    // the inflight queue only with its last chunk.
    out.insert("queue".into(), json!("none"));
    out
}

/// An aborted final result whose `sender.abort()` raises: the abort is
/// best-effort (`sim::prefill` counts the failure and goes on), so KV and
/// metadata are freed once and the abort's own status is streamed; the
/// exception never reaches the scheduler. Before #36988 the result is sent
/// and `abort()` is never called.
fn sender_abort_fails(fixes: FixSet) -> Fields {
    let (_, _, mut out) = aborted_result(fixes, true);
    out.insert("abort_error_escaped".into(), json!(false));
    out
}

/// The final chunk's first token is refused by the request's grammar: the
/// engine's first-token check (`sim::prefill`) aborts it with
/// `prepare_abort` (500, `finished_reason` set at once) before the result
/// door decides.
fn grammar_rejection(fixes: FixSet) -> Fields {
    let mut req = bootstrapped();
    req.prepare_abort("grammar rejected token 1");
    through_result_door(&mut req, true, fixes).1
}

/// An aborted request's middle-chunk result, then its final chunk's result.
/// The engine decides at the middle result as its result door does (sends
/// the chunk before #36988, retires after); a result for a request already
/// retired is ignored. Fields count over both results; `after_middle_*`
/// are the counts after the first.
fn inflight_middle_chunk(fixes: FixSet) -> Fields {
    let (mut req, retired, middle) = aborted_result(fixes, false);
    let mut out = if retired {
        middle.clone()
    } else {
        let (_, mut last) = through_result_door(&mut req, true, fixes);
        let sent = |f: &Fields| f["chunk_sent"].as_u64().unwrap_or(0);
        last.insert("chunk_sent".into(), json!(sent(&middle) + sent(&last)));
        last
    };
    for k in ["chunk_sent", "kv_released", "metadata_released", "streamed"] {
        out.insert(format!("after_middle_{k}"), middle[k].clone());
    }
    out
}

/// An aborted request holding a Mamba slot and no KV row or metadata
/// buffer (it was aborted while it waited for KV) reaches its result. The
/// release of its Mamba slot is `release_kv_cache`'s (upstream frees
/// Mamba there), so a retire counts one KV release and no metadata one.
fn mamba_before_kv(fixes: FixSet) -> Fields {
    let mut req = Req::new("r", "t", vec![1; 100], 8, 7);
    req.to_finish = Some(aborted_by_client());
    let (retired, mut out) = through_result_door(&mut req, true, fixes);
    out.insert("metadata_released".into(), json!(0));
    out.insert("mamba_released".into(), json!(u32::from(retired)));
    out
}

/// The final result's sampling mask is refused (`sim::prefill`'s
/// first-token check records the abort in `to_finish` with the mask's
/// status). A sender whose `abort()` raises changes nothing: the abort is
/// best-effort.
fn sampling_mask(mask: SamplingMask, fixes: FixSet) -> Fields {
    let mut req = bootstrapped();
    req.set_finish_with_abort_keep_input(mask.message(), mask.status());
    through_result_door(&mut req, true, fixes).1
}

/// A final result arriving for a request already retired: released and
/// finished with a 500 by a bootstrap failure.
fn delayed_result(fixes: FixSet) -> Fields {
    let mut req = Req::new("r", "t", vec![1; 100], 8, 7);
    req.finished_reason = Some(FinishReason::Abort {
        message: "bootstrap failed".into(),
        status_code: 500,
    });
    let action = prefill_result_action(&req, true, fixes);
    // With #36988 the result of a request the result path already retired
    // is ignored: nothing is aborted or freed a second time.
    let again = action == ResultAction::Retire && !Doors::SHIPPED.ignore_retired_result;
    result_fields(&req, action, u32::from(again), u32::from(again))
}

/// Decode's transfer queue when the handoff waited past the timeout.
fn decode_timeout(fixes: FixSet) -> Fields {
    let mut req = Req::new("r", "t", vec![1; 100], 8, 7);
    // The engine's default `waiting_timeout_s` (300 s, as upstream's
    // bootstrap/waiting timeout defaults).
    let timeout = 300 * 1_000_000;
    let decision = handoff_door(&req, KvPoll::Transferring, timeout, timeout, None);
    let aborted = matches!(decision, HandoffDecision::Abort { .. });
    if let HandoffDecision::Abort {
        status, message, ..
    } = decision
    {
        req.finished_reason = Some(FinishReason::Abort {
            message,
            status_code: status,
        });
    }
    // No write in flight and the peer acknowledged: the pages go back now.
    let now = aborted && release_rule(0, true, fixes) == Release::Now;
    let mut out = fields([
        ("queue", json!(if aborted { "none" } else { "transfer" })),
        ("transferred", json!(false)),
        ("kv_released", json!(u32::from(now))),
        ("metadata_released", json!(u32::from(now))),
        ("receiver_cleared", json!(u32::from(now))),
    ]);
    out.extend(finish(&req, u32::from(aborted)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const INPUTS: Inputs = Inputs {
        context_len: 1024,
        pool: 512,
        overlong: 600,
        valid: 100,
    };

    #[test]
    fn every_case_has_a_twin() {
        for case in CASES {
            assert!(observe(case, &INPUTS, &[]).is_some(), "{case}");
        }
        assert!(observe("no-such-case", &INPUTS, &[]).is_none());
    }

    #[test]
    fn a_prompt_of_exactly_the_cap_is_rejected_as_upstream_does() {
        // SGLang 0.5.19-0.5.23 all answer true here (`kvw upstream run`).
        let cap = observe("input-cap", &INPUTS, &[]).unwrap();
        assert_eq!(cap["input_cap"], 506);
        assert_eq!(cap["rejects_at_cap"], true);
        assert_eq!(cap["rejects_below_cap"], false);
    }

    #[test]
    fn the_prefill_door_admits_before_38935_and_retires_after() {
        let case = "test_rejected_request_is_retired_at_each_pd_door.prefill";
        let pre = observe(case, &INPUTS, &[]).unwrap();
        assert_eq!(pre["door"], "admit");
        assert_eq!(pre["sender_created"], 1);
        let post = observe(case, &INPUTS, &[Fix::RetireUnadmittedReject]).unwrap();
        assert_eq!(post["door"], "retire");
        assert_eq!(post["sender_created"], 0);
        assert_eq!(post["status"], 400);
    }

    #[test]
    fn an_aborted_final_result_is_sent_and_answered_200_before_36988() {
        let pre = observe("aborted-final-result", &INPUTS, &[]).unwrap();
        assert_eq!(pre["queue"], "inflight");
        assert_eq!(pre["chunk_sent"], 1);
        assert_eq!(pre["final_status"], 200);
        let post = observe(
            "aborted-final-result",
            &INPUTS,
            &[Fix::RetireAbortedPrefillResult],
        )
        .unwrap();
        assert_eq!(post["chunk_sent"], 0);
        assert_eq!(post["sender_abort"], 1);
        assert_eq!(post["final_status"], 400);
    }

    #[test]
    fn a_failing_sender_abort_still_frees_once_after_36988() {
        let case = "test_sender_abort_failure_does_not_skip_local_cleanup";
        let pre = observe(case, &INPUTS, &[]).unwrap();
        assert_eq!(pre["sender_abort"], 0);
        assert_eq!(pre["chunk_sent"], 1);
        let post = observe(case, &INPUTS, &[Fix::RetireAbortedPrefillResult]).unwrap();
        assert_eq!(post["sender_abort"], 1);
        assert_eq!(post["kv_released"], 1);
        assert_eq!(post["metadata_released"], 1);
        assert_eq!(post["abort_error_escaped"], false);
        assert_eq!(post["status"], 400);
    }

    #[test]
    fn a_preempted_decode_request_gets_a_new_receiver() {
        let all = [Fix::RetireAbortedPrefillResult, Fix::RetireUnadmittedReject];
        let post = observe(
            "test_preempted_reentry_is_not_retired.decode",
            &INPUTS,
            &all,
        )
        .unwrap();
        assert_eq!(post["door"], "admit");
        assert_eq!(post["queue"], "prealloc");
        assert_eq!(post["receiver_created"], 1);
    }

    /// Upstream's PD prefill result path aborts a refused first token with
    /// `prepare_abort`: 500, finished at once, so before #36988 the chunk
    /// goes out for a request that already counts as finished.
    #[test]
    fn a_grammar_refusal_answers_500_and_is_finished_at_once() {
        let case = "test_grammar_rejection_retires_prefill_before_transfer";
        let pre = observe(case, &INPUTS, &[]).unwrap();
        assert_eq!(pre["status"], 500);
        assert_eq!(pre["finished"], true);
        assert_eq!(pre["to_finish_pending"], false);
        assert_eq!(pre["chunk_sent"], 1);
        let post = observe(case, &INPUTS, &[Fix::RetireAbortedPrefillResult]).unwrap();
        assert_eq!(post["status"], 500);
    }

    #[test]
    fn a_grammar_refusal_is_retired_after_36988() {
        let case = "test_grammar_rejection_retires_prefill_before_transfer";
        let post = observe(case, &INPUTS, &[Fix::RetireAbortedPrefillResult]).unwrap();
        assert_eq!(post["chunk_sent"], 0);
        assert_eq!(post["sender_abort"], 1);
        assert_eq!(post["finished"], true);
    }

    /// PR #38935 detaches a streaming session's active slot when it retires
    /// a request at the door, and leaves a non-streaming session alone;
    /// before it the door admits and the session stays in flight.
    #[test]
    fn retiring_at_the_door_detaches_only_a_streaming_session() {
        let case = "test_retire_detaches_a_streaming_session";
        let pre = observe(case, &INPUTS, &[]).unwrap();
        assert_eq!(pre["door"], "admit");
        assert_eq!(pre["session_in_flight"], true);
        let post = observe(case, &INPUTS, &[Fix::RetireUnadmittedReject]).unwrap();
        assert_eq!(post["door"], "retire");
        assert_eq!(post["session_attached"], false);
        assert_eq!(post["session_in_flight"], false);
        let plain = observe(
            "test_retire_leaves_a_non_streaming_session_alone",
            &INPUTS,
            &[Fix::RetireUnadmittedReject],
        )
        .unwrap();
        assert_eq!(plain["door"], "retire");
        assert_eq!(plain["session_attached"], true);
    }

    #[test]
    fn the_null_mode_door_keeps_the_rejected_request_queued_under_every_fix() {
        let all = [Fix::RetireAbortedPrefillResult, Fix::RetireUnadmittedReject];
        for fixes in [&[][..], &all[..]] {
            let out = observe("test_null_mode_is_deliberately_untouched", &INPUTS, fixes).unwrap();
            assert_eq!(out["queue"], "waiting");
            assert_eq!(out["to_finish_pending"], true);
            assert_eq!(out["status"], 400);
        }
    }

    #[test]
    fn a_request_holding_only_a_mamba_slot_is_sent_before_36988_and_retired_after() {
        let case = "test_aborted_result_releases_mamba_allocated_before_kv";
        let pre = observe(case, &INPUTS, &[]).unwrap();
        assert_eq!(pre["chunk_sent"], 1);
        assert_eq!(pre["mamba_released"], 0);
        let post = observe(case, &INPUTS, &[Fix::RetireAbortedPrefillResult]).unwrap();
        assert_eq!(post["chunk_sent"], 0);
        assert_eq!(post["mamba_released"], 1);
        assert_eq!(post["metadata_released"], 0);
        assert_eq!(post["streamed"], 1);
    }

    #[test]
    fn a_refused_sampling_mask_keeps_its_status_through_the_retire() {
        for (case, status) in [
            ("test_sampling_mask_abort_preserves_error_and_releases_once.overflow", 400),
            ("test_sampling_mask_abort_preserves_error_and_releases_once.invalid.transport_error", 500),
        ] {
            let post = observe(case, &INPUTS, &[Fix::RetireAbortedPrefillResult]).unwrap();
            assert_eq!(post["status"], status, "{case}");
            assert_eq!(post["kv_released"], 1, "{case}");
            assert_eq!(post["chunk_sent"], 0, "{case}");
            let pre = observe(case, &INPUTS, &[]).unwrap();
            assert_eq!(pre["chunk_sent"], 1, "{case}");
        }
    }

    /// After both results the in-flight-chunk case ends as upstream's does:
    /// retired once, 400 streamed once, nothing sent.
    #[test]
    fn an_aborted_chunked_request_is_retired_once_over_both_results() {
        let case = "test_aborted_middle_result_waits_for_inflight_chunk";
        let post = observe(case, &INPUTS, &[Fix::RetireAbortedPrefillResult]).unwrap();
        assert_eq!(post["kv_released"], 1);
        assert_eq!(post["streamed"], 1);
        assert_eq!(post["chunk_sent"], 0);
        let pre = observe(case, &INPUTS, &[]).unwrap();
        assert_eq!(pre["queue"], "inflight");
        assert_eq!(pre["kv_released"], 0);
    }
}
