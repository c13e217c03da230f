//! From typed events to the seven steps.
//!
//! The simulator records what happened; this module decides which of the
//! probed request's events belong to which step of the incident, which
//! structured claims they establish, and where each claim comes from
//! (disclosed, an upstream test, thread or source file, or one of our
//! assumptions). The path a run took is read off the events that happened —
//! there is no second copy of the guard order here. Sentences are rendered
//! later from the claims (by the words crate, `kvw_words::probe`).

use kvw_evidence::preset::DISCLOSED_RESERVED_PAGES;
use kvw_evidence::{
    AbortCause, Claim, DoorDecision, DoorName, Event, EventKind, Fact, Outcome, PageRange,
    PageTail, PageView, PollResult, ProbeConfig, Provenance, SourceOrigin, SourceRef, Step,
    StopCause, Worker,
};

const SCHEDULE_BATCH: &str = "python/sglang/srt/managers/schedule_batch.py";
const DECODE_PY: &str = "python/sglang/srt/disaggregation/decode.py";
const PREFILL_PY: &str = "python/sglang/srt/disaggregation/prefill.py";
const MINI_LB: &str = "python/sglang/srt/disaggregation/mini_lb.py";
const ADMISSION_TEST: &str =
    "test/registered/unit/disaggregation/test_admission_abort_not_enqueued.py";
const CLEANUP_TEST: &str =
    "test/registered/unit/disaggregation/test_prefill_abort_result_cleanup.py";

/// The step an event of the probed request belongs to, given the latest
/// step reached so far.
pub fn step_of(kind: &EventKind, current: u8) -> u8 {
    use EventKind as K;
    match kind {
        K::Dispatch { .. } | K::Bootstrap { .. } | K::Reserve { .. } | K::Handshake { .. } => 1,
        K::InputCheck { worker, .. } => match worker {
            Worker::Decode => 1,
            _ => 2,
        },
        K::Door { door, .. } => match door {
            DoorName::DecodePreallocQueue => 1,
            DoorName::PrefillBootstrapQueue | DoorName::PrefillWaitingQueue => 2,
            DoorName::PrefillResult => 4,
            DoorName::DecodeTransferQueue => 5,
        },
        K::Forward { .. } => 3,
        K::KvSend { .. } | K::KvLanded { .. } | K::SenderAbort { .. } => 4,
        K::Poll { worker, .. } => match worker {
            Worker::Decode => 5,
            _ => 4,
        },
        K::ChecksumCheck { .. } => 5,
        K::PoisonCheck { .. } | K::Attend { .. } | K::TagRefused { .. } => 6,
        K::Abort { .. } => current.max(5),
        K::Release { worker, .. } => match worker {
            Worker::Prefill => 4,
            _ => 7,
        },
        K::WorkerAnswer { .. } | K::Response { .. } => 7,
        K::Resource { .. } => current,
        K::DrainAck { .. } => 4,
    }
}

fn upstream(path: &str, lines: Option<(u32, u32)>, label: &str) -> SourceRef {
    SourceRef {
        origin: SourceOrigin::Upstream,
        path: path.into(),
        line_start: lines.map(|l| l.0),
        line_end: lines.map(|l| l.1),
        label: label.into(),
    }
}

fn engine(path: &str, label: &str) -> SourceRef {
    SourceRef {
        origin: SourceOrigin::Engine,
        path: path.into(),
        line_start: None,
        line_end: None,
        label: label.into(),
    }
}

/// The source lines a claim rests on: the upstream logic and the engine's
/// own logic that models it.
fn sources(claim: &Claim) -> Vec<SourceRef> {
    match claim {
        Claim::InputRejected { .. } => vec![
            upstream(
                SCHEDULE_BATCH,
                Some((2053, 2072)),
                "Req.set_finish_with_abort(): to_finish and a one-token placeholder",
            ),
            engine("engine/src/req.rs", "Req::set_finish_with_abort"),
        ],
        Claim::Door {
            door: DoorName::PrefillWaitingQueue,
            ..
        } => vec![
            upstream(
                SCHEDULE_BATCH,
                Some((1479, 1481)),
                "Req.finished() reads only finished_reason",
            ),
            engine("engine/src/policy.rs", "policy::prefill_admission_door"),
        ],
        Claim::Door {
            decision: DoorDecision::Retired,
            ..
        } => vec![
            upstream(
                ADMISSION_TEST,
                None,
                "test_rejected_request_is_retired_at_each_pd_door",
            ),
            engine(
                "engine/src/policy.rs",
                "policy::entry_door and is_unadmitted_reject",
            ),
        ],
        Claim::Door { .. } => vec![engine("engine/src/policy.rs", "policy::entry_door")],
        Claim::Reserved { .. } | Claim::NothingReserved => vec![
            upstream(DECODE_PY, None, "DecodePreallocQueue._pre_alloc"),
            engine(
                "engine/src/sim/decode.rs",
                "prealloc: _pre_alloc from decode's origin_input_ids",
            ),
        ],
        Claim::Forwarded { .. } => vec![
            upstream(
                SCHEDULE_BATCH,
                Some((2053, 2072)),
                "the placeholder that replaced the prompt",
            ),
            engine("engine/src/sim/prefill.rs", "forward over origin_input_ids"),
        ],
        Claim::HandoffSent { .. } => vec![
            upstream(
                PREFILL_PY,
                None,
                "process_batch_result_disagg_prefill / send_kv_chunk",
            ),
            upstream(
                SCHEDULE_BATCH,
                Some((1842, 1848)),
                "update_finish_state() applies to_finish only later",
            ),
            engine(
                "engine/src/transfer.rs",
                "TransferChannel::poll: complete once posted writes land",
            ),
        ],
        Claim::ResultRetired => vec![
            upstream(
                CLEANUP_TEST,
                None,
                "test_aborted_final_result_releases_hybrid_cache",
            ),
            engine(
                "engine/src/policy.rs",
                "policy::prefill_result_action → ResultAction::Retire",
            ),
        ],
        Claim::HandoffAccepted { .. } | Claim::HandoffAborted { .. } => vec![
            upstream(DECODE_PY, None, "DecodeTransferQueue.pop_transferred"),
            engine("engine/src/policy.rs", "policy::handoff_door"),
        ],
        Claim::Attended { .. } | Claim::LaterForeignReads { .. } | Claim::TagRefused { .. } => {
            vec![engine(
                "kernels/src/cpu.rs",
                "paged_decode_attention over the whole page table",
            )]
        }
        Claim::PoisonFound { .. } => {
            vec![engine("engine/src/sim/decode.rs", "poison-on-free check")]
        }
        Claim::Answered { .. } => vec![
            upstream(
                MINI_LB,
                None,
                "MiniLoadBalancer.generate returns decode's status",
            ),
            engine("engine/src/policy.rs", "policy::router_answer"),
        ],
        Claim::Dispatched { .. } | Claim::InputAccepted { .. } | Claim::NotReached { .. } => vec![],
    }
}

/// What a run's narration needs besides its events.
pub struct Context<'a> {
    pub config: &'a ProbeConfig,
    /// Index of the probed request.
    pub probed: u32,
    pub prompt_len: u64,
    /// Page pictures keyed by event index.
    pub pictures: &'a [(usize, PageView)],
    pub outcome: Outcome,
    pub status: u16,
    pub latency_us: u64,
}

fn fact(claim: Claim, provenance: Provenance, basis: &str) -> Fact {
    Fact {
        claim,
        provenance,
        basis: basis.into(),
    }
}

/// Provenance and basis of a page count: when `disclosed` (the run follows
/// the mechanism the record describes), the record's own count is
/// disclosed and any other count a model assumption (the mechanism is the
/// record's, the number comes from assumed sizes); otherwise the upstream
/// code. `bases` are the three bases in that order.
fn recorded_count(
    disclosed: bool,
    pages: u64,
    bases: [&'static str; 3],
) -> (Provenance, &'static str) {
    match (disclosed, pages) {
        (true, DISCLOSED_RESERVED_PAGES) => (Provenance::Disclosed, bases[0]),
        (true, _) => (Provenance::ModelAssumption, bases[1]),
        (false, _) => (Provenance::UpstreamCode, bases[2]),
    }
}

/// Reserved pages that still held another request's bytes in `view`.
fn previously_written(view: Option<&PageView>, reserved: &[PageRange]) -> u64 {
    let Some(view) = view else { return 0 };
    let written = |p: u64| {
        view.runs
            .iter()
            .any(|r| r.first <= p && p < r.first + r.count && r.writer.is_some())
    };
    reserved
        .iter()
        .flat_map(PageRange::pages)
        .filter(|&p| written(p))
        .count() as u64
}

/// The seven steps of the probed request.
pub fn steps(events: &[Event], requests: &[u32], cx: &Context) -> Vec<Step> {
    let mut steps: Vec<Step> = (1..=7)
        .map(|n| Step {
            step: n,
            reached: false,
            events: vec![],
            facts: vec![],
            state: None,
            pages: None,
            sources: vec![],
        })
        .collect();
    let picture = |i: usize| cx.pictures.iter().find(|(e, _)| *e == i).map(|(_, v)| v);
    let ps = u64::from(cx.config.page_size);
    let rejected_at_prefill = cx.prompt_len >= cx.config.prefill_input_cap();
    let mut current = 1u8;
    let mut forwarded = 0u64;
    let mut forward_pages = 0u64;
    let mut sent = 0u64;
    let mut landed = 0u64;
    let mut reserved = 0u64;
    // Every place the request stopped, with the step it stopped at.
    let mut stops: Vec<(u8, StopCause, Provenance, String)> = Vec::new();
    let mut decisive: Option<(Provenance, String)> = None;
    let mut last_poll: Option<PollResult> = None;
    let mut checksum_mismatch = false;

    for (i, e) in events.iter().enumerate() {
        if requests[i] != cx.probed {
            continue;
        }
        let n = step_of(&e.kind, current);
        current = current.max(n);
        let step = &mut steps[usize::from(n) - 1];
        step.reached = true;
        step.events.push(i as u32);
        if let Some(v) = picture(i) {
            step.pages = Some(v.clone());
        }
        let mut facts: Vec<Fact> = Vec::new();
        match &e.kind {
            EventKind::Dispatch { prompt_len, room } => facts.push(fact(
                Claim::Dispatched {
                    prompt_len: *prompt_len,
                    room: *room,
                },
                Provenance::Disclosed,
                "disclosure, step 1: the router tells decode the original prompt length",
            )),
            EventKind::InputCheck {
                worker,
                input_len,
                cap,
                rejected,
            } => {
                let (provenance, basis) = match (worker, rejected) {
                    (Worker::Decode, _) => (Provenance::ModelAssumption, "assumption:decode-pool"),
                    (_, true) => (
                        Provenance::Disclosed,
                        "disclosure: every affected prompt exceeded the prefill pool",
                    ),
                    (_, false) => (
                        Provenance::UpstreamCode,
                        "validate_input_length against max_req_input_len",
                    ),
                };
                let claim = if *rejected {
                    Claim::InputRejected {
                        worker: *worker,
                        input_len: *input_len,
                        cap: *cap,
                    }
                } else {
                    Claim::InputAccepted {
                        worker: *worker,
                        input_len: *input_len,
                        cap: *cap,
                    }
                };
                facts.push(fact(claim, provenance, basis));
            }
            EventKind::Door {
                door,
                state,
                decision,
                ..
            } => {
                step.state = Some(state.clone());
                let to_finish_set = state.to_finish.is_some();
                let claim = Claim::Door {
                    door: *door,
                    decision: *decision,
                    finished: state.finished,
                    to_finish_set,
                };
                match (door, decision) {
                    (DoorName::PrefillBootstrapQueue | DoorName::DecodePreallocQueue, DoorDecision::Retired) => {
                        let basis = "PR #38935; upstream test test_rejected_request_is_retired_at_each_pd_door";
                        facts.push(fact(claim, Provenance::UpstreamTest, basis));
                        let (cause, nothing) = if *door == DoorName::DecodePreallocQueue {
                            (StopCause::RetiredAtDecodeDoor, true)
                        } else {
                            (StopCause::RetiredAtPrefillDoor, false)
                        };
                        if nothing {
                            facts.push(fact(Claim::NothingReserved, Provenance::UpstreamTest, basis));
                        }
                        stops.push((n, cause, Provenance::UpstreamTest, basis.into()));
                        decisive.get_or_insert((Provenance::UpstreamThread, "PR #38935: on 1P1D the rejected request answered 400 at once".into()));
                    }
                    (DoorName::PrefillBootstrapQueue | DoorName::DecodePreallocQueue, _) if to_finish_set => facts.push(fact(
                        claim,
                        Provenance::UpstreamThread,
                        "PR #38935: before it, rejected requests entered the queues and got a sender and receiver",
                    )),
                    (DoorName::PrefillWaitingQueue, DoorDecision::Admitted) if to_finish_set => facts.push(fact(
                        claim,
                        Provenance::Disclosed,
                        "disclosure, step 2: admission checked finished() while the rejection sat in to_finish",
                    )),
                    (DoorName::PrefillWaitingQueue, _) => facts.push(fact(claim, Provenance::UpstreamCode, "get_new_batch_prefill asks Req.finished()")),
                    (DoorName::PrefillResult, DoorDecision::Retired) => {
                        let basis = "PR #36988; upstream test test_aborted_final_result_releases_hybrid_cache";
                        facts.push(fact(Claim::ResultRetired, Provenance::UpstreamTest, basis));
                        stops.push((n, StopCause::ResultRetired, Provenance::UpstreamTest, basis.into()));
                    }
                    (DoorName::DecodeTransferQueue, DoorDecision::Admitted) => {
                        let short = landed < reserved;
                        facts.push(fact(
                            Claim::HandoffAccepted { pages_written: landed, pages_reserved: reserved },
                            if short { Provenance::Disclosed } else { Provenance::UpstreamCode },
                            if short { "disclosure, step 5: decode's finished check accepted the handoff" } else { "DecodeTransferQueue.pop_transferred on KVPoll.Success" },
                        ));
                    }
                    (DoorName::DecodeTransferQueue, DoorDecision::Aborted) => {
                        let (cause, provenance, basis) = if checksum_mismatch {
                            (AbortCause::ChecksumMismatch, Provenance::UpstreamCode, "PR #39500: a checksum mismatch aborts with 500 before batching (decode.py, read at v0.5.23); which pages it covers: assumption:checksum-scope")
                        } else if last_poll == Some(PollResult::Transferring) {
                            (AbortCause::Timeout, Provenance::UpstreamCode, "waiting timeout → KVPoll.Failed → prepare_abort with 500 (decode.py pop_transferred, read at v0.5.23); the 300 s timeout is PR #38935's measurement")
                        } else if last_poll == Some(PollResult::Failed) {
                            (AbortCause::TransferFailed, Provenance::UpstreamCode, "KVPoll.Failed → prepare_abort with 500 (decode.py, read at v0.5.23)")
                        } else {
                            (AbortCause::AlreadyFinished, Provenance::ModelAssumption, "engine: a handoff of a finished request is aborted")
                        };
                        let status = events[i + 1..]
                            .iter()
                            .zip(&requests[i + 1..])
                            .find_map(|(e, &r)| match &e.kind {
                                EventKind::Abort { status, .. } if r == cx.probed => Some(*status),
                                _ => None,
                            })
                            .unwrap_or(500);
                        facts.push(fact(Claim::HandoffAborted { cause, status }, provenance, basis));
                        stops.push((n, StopCause::AbortedBeforeBatch, provenance, basis.into()));
                        decisive = Some((provenance, basis.into()));
                    }
                    _ => {}
                }
            }
            EventKind::Reserve { pages, tokens } => {
                let count: u64 = pages.iter().map(|r| r.count).sum();
                reserved = count;
                let full = *tokens == cx.prompt_len;
                let (provenance, basis) = recorded_count(
                    full && rejected_at_prefill,
                    count,
                    [
                        "disclosure, step 1: decode reserved pages for the original length (8 in the record)",
                        "disclosure, step 1: decode reserved pages for the original length; the record gives 8 pages, this count follows from the assumed context, pool and page size",
                        "DecodePreallocQueue._pre_alloc reserves len(origin_input_ids)",
                    ],
                );
                facts.push(fact(
                    Claim::Reserved {
                        pages: count,
                        tokens: *tokens,
                        page_size: cx.config.page_size,
                        previously_written: previously_written(picture(i), pages),
                    },
                    provenance,
                    basis,
                ));
            }
            EventKind::Forward { to, pages, .. } => {
                forwarded = *to;
                forward_pages = *pages;
            }
            EventKind::KvSend {
                pages,
                last,
                checksum,
            } => {
                sent += pages;
                if *last {
                    let stale = if cx.config.page_tail == PageTail::Carried
                        && !forwarded.is_multiple_of(ps)
                    {
                        ps - forwarded % ps
                    } else {
                        0
                    };
                    let short = forwarded < cx.prompt_len;
                    facts.push(fact(
                        Claim::HandoffSent {
                            pages_sent: sent,
                            pages_reserved: reserved,
                            tokens_covered: forwarded,
                            prompt_len: cx.prompt_len,
                            with_checksum: checksum.is_some(),
                            stale_tail_slots: stale,
                        },
                        if short { Provenance::Disclosed } else { Provenance::UpstreamCode },
                        if short { "disclosure, step 4: prefill sent one page and signalled transfer-complete" } else { "send_kv_chunk with last_chunk" },
                    ));
                }
            }
            EventKind::KvLanded { pages, .. } => {
                landed += pages.iter().map(|r| r.count).sum::<u64>()
            }
            EventKind::Poll {
                worker: Worker::Decode,
                result,
            } => last_poll = Some(*result),
            EventKind::ChecksumCheck {
                expected, computed, ..
            } => checksum_mismatch = expected != computed,
            EventKind::PoisonCheck { pages, mode } => {
                facts.push(fact(
                    Claim::PoisonFound {
                        pages: *pages,
                        mode: *mode,
                    },
                    Provenance::ModelAssumption,
                    "assumption:poison-on-free",
                ));
                if *mode == kvw_evidence::PoisonMode::Refuse {
                    stops.push((
                        n,
                        StopCause::RefusedBeforeRead,
                        Provenance::ModelAssumption,
                        "assumption:poison-on-free".into(),
                    ));
                    decisive = Some((
                        Provenance::ModelAssumption,
                        "assumption:poison-on-free".into(),
                    ));
                }
            }
            EventKind::Attend {
                decode_step: 1,
                pages,
                foreign_pages,
                ..
            } => {
                let (provenance, basis) = recorded_count(
                    *foreign_pages > 0,
                    *pages,
                    [
                        "disclosure, step 6: decode read every reserved page (8 in the record)",
                        "disclosure, step 6: decode read every reserved page; the record gives 8 pages, this count follows from the assumed context, pool and page size",
                        "decode attends over req_to_token of the request",
                    ],
                );
                facts.push(fact(
                    Claim::Attended {
                        pages_read: *pages,
                        positions: cx.prompt_len,
                        foreign_pages: *foreign_pages,
                    },
                    provenance,
                    basis,
                ))
            }
            EventKind::TagRefused { index, page } => {
                facts.push(fact(
                    Claim::TagRefused {
                        index: *index,
                        page: *page,
                    },
                    Provenance::Disclosed,
                    "disclosure: Cloudflare's read-time page tagging prototype",
                ));
                decisive = Some((
                    Provenance::ModelAssumption,
                    "assumption:tag-refusal-status".into(),
                ));
            }
            EventKind::Response { .. } => {
                let (provenance, basis) = match cx.outcome {
                    Outcome::Leak => (
                        Provenance::Disclosed,
                        "disclosure, step 7: HTTP 200 with another customer's data".to_string(),
                    ),
                    Outcome::WrongAnswer => (
                        Provenance::ModelAssumption,
                        "assumption:scrub-on-free".to_string(),
                    ),
                    Outcome::Correct => (
                        Provenance::UpstreamCode,
                        "a valid request through the normal PD path".to_string(),
                    ),
                    Outcome::Refused => decisive.clone().unwrap_or((
                        Provenance::UpstreamCode,
                        "update_finish_state applies decode's pending abort after the step".into(),
                    )),
                };
                let answer = |w: Worker| {
                    events
                        .iter()
                        .zip(requests)
                        .rev()
                        .find_map(|(e, &r)| match &e.kind {
                            EventKind::WorkerAnswer { worker, status, .. }
                                if *worker == w && r == cx.probed =>
                            {
                                Some(*status)
                            }
                            _ => None,
                        })
                };
                facts.push(fact(
                    Claim::Answered {
                        prefill_status: answer(Worker::Prefill),
                        decode_status: answer(Worker::Decode),
                        status: cx.status,
                        latency_us: cx.latency_us,
                        outcome: cx.outcome,
                    },
                    provenance,
                    &basis,
                ));
            }
            _ => {}
        }
        let step = &mut steps[usize::from(n) - 1];
        step.facts.extend(facts);
    }
    if forwarded > 0 {
        let short = forwarded < cx.prompt_len;
        steps[2].facts.push(fact(
            Claim::Forwarded {
                tokens: forwarded,
                prompt_len: cx.prompt_len,
                pages: forward_pages,
            },
            if short {
                Provenance::Disclosed
            } else {
                Provenance::UpstreamCode
            },
            if short {
                "disclosure, step 3: only the placeholder's KV was computed"
            } else {
                "prefill forward over the prompt"
            },
        ));
    }
    for step in &mut steps {
        if step.facts.is_empty() {
            // The latest stop before this step explains why it was not reached.
            let (cause, provenance, basis) = stops
                .iter()
                .rev()
                .find(|(at, ..)| *at < step.step)
                .map(|(_, c, p, b)| (*c, *p, b.as_str()))
                .unwrap_or((StopCause::Other, Provenance::ModelAssumption, "engine"));
            step.facts.push(fact(
                Claim::NotReached { because: cause },
                provenance,
                basis,
            ));
        }
        let mut srcs: Vec<SourceRef> = Vec::new();
        for f in &step.facts {
            for s in sources(&f.claim) {
                if !srcs.contains(&s) {
                    srcs.push(s);
                }
            }
        }
        step.sources = srcs;
    }
    steps
}

#[cfg(test)]
mod tests {
    use kvw_evidence::{AbortCause, PoisonMode, StopCause, Worker};
    use kvw_words::source::{source_label, SourceLabel};
    use kvw_words::Lang;

    use super::*;

    /// Every label a step can cite reads as code or in Italian words: none
    /// is left as English on an Italian page.
    #[test]
    fn every_source_label_has_its_italian() {
        let mut claims = vec![
            Claim::Dispatched {
                prompt_len: 1,
                room: 1,
            },
            Claim::InputRejected {
                worker: Worker::Prefill,
                input_len: 2,
                cap: 1,
            },
            Claim::InputAccepted {
                worker: Worker::Prefill,
                input_len: 1,
                cap: 2,
            },
            Claim::Reserved {
                pages: 1,
                tokens: 1,
                page_size: 1,
                previously_written: 0,
            },
            Claim::NothingReserved,
            Claim::Forwarded {
                tokens: 1,
                prompt_len: 1,
                pages: 1,
            },
            Claim::HandoffSent {
                pages_sent: 1,
                pages_reserved: 1,
                tokens_covered: 1,
                prompt_len: 1,
                with_checksum: false,
                stale_tail_slots: 0,
            },
            Claim::ResultRetired,
            Claim::HandoffAccepted {
                pages_written: 1,
                pages_reserved: 1,
            },
            Claim::HandoffAborted {
                cause: AbortCause::Timeout,
                status: 500,
            },
            Claim::Attended {
                pages_read: 1,
                positions: 1,
                foreign_pages: 0,
            },
            Claim::LaterForeignReads {
                decode_step: 1,
                pages: 1,
            },
            Claim::PoisonFound {
                pages: 1,
                mode: PoisonMode::Refuse,
            },
            Claim::TagRefused { index: 0, page: 1 },
            Claim::Answered {
                prefill_status: None,
                decode_status: Some(200),
                status: 200,
                latency_us: 1,
                outcome: Outcome::Correct,
            },
            Claim::NotReached {
                because: StopCause::Other,
            },
        ];
        for &door in DoorName::VALUES {
            for &decision in DoorDecision::VALUES {
                claims.push(Claim::Door {
                    door,
                    decision,
                    finished: false,
                    to_finish_set: true,
                });
            }
        }
        let mut labels = 0;
        for claim in &claims {
            for source in sources(claim) {
                labels += 1;
                let shown = source_label(&source.label, Lang::It);
                assert!(
                    !matches!(shown, SourceLabel::English(_)),
                    "{:?}: label {:?} has no Italian",
                    claim,
                    source.label
                );
            }
        }
        assert!(labels >= 22, "{labels} labels");
    }
}
