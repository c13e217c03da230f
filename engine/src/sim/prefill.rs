//! The prefill worker: bootstrap queue → waiting queue → chunked forward →
//! KV send → inflight queue.
//!
//! Models `python/sglang/srt/disaggregation/prefill.py`
//! (`PrefillBootstrapQueue`, `event_loop_normal_disagg_prefill`,
//! `process_batch_result_disagg_prefill`, `send_kv_chunk`,
//! `process_disagg_prefill_inflight_queue`) at the pinned commit.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use kvw_evidence::{
    DoorDecision, DoorName, EventKind, Fix, PageTail, PollResult, PoolSide, ProbeConfig,
    ResourceAction as RA, ResourceKind as RK, Worker,
};
use kvw_kernels::cpu;

use super::Sim;
use crate::attention::{k_code, v_code};
use crate::policy::{self, Door, KvPoll, ResultAction, SessionEffect};
use crate::req::{FinishReason, Req};
use crate::trace::req_state;
use crate::transfer::ChunkSend;

/// A request on the prefill side.
#[derive(Debug, Clone)]
struct PReq {
    req: Req,
    idx: u32,
    original_len: usize,
    /// Prefill pages, in position order.
    pages: Vec<u32>,
    /// Tokens already run through the forward.
    done: usize,
    /// Pages already posted to decode.
    sent_pages: usize,
    /// Mamba state slot (hybrid models), allocated before any KV.
    mamba: Option<u32>,
    /// HiCache storage entry armed by `_prefetch_kvcache`.
    hicache: bool,
    /// Virtual time the final chunk was posted.
    sent_at: u64,
    /// Virtual time the request entered the bootstrap queue.
    queued_at: u64,
}

/// State of the prefill scheduler.
#[derive(Debug, Clone)]
pub struct PrefillWorker {
    cap: u64,
    chunk_size: usize,
    bootstrap_queue: Vec<PReq>,
    waiting_queue: VecDeque<PReq>,
    inflight_queue: Vec<PReq>,
    /// Retired results waiting for their room's in-flight writes (PR #36988).
    retiring: Vec<PReq>,
    /// Results delivered a second time, processed at the next iteration.
    late_results: Vec<PReq>,
    /// Requests already retired.
    retired: BTreeSet<u32>,
    busy_until: u64,
    /// Prefill pages each request held, for the page picture.
    history: BTreeMap<u32, Vec<u32>>,
}

impl PrefillWorker {
    /// Whether request `idx` is in one of prefill's queues.
    pub(super) fn holds(&self, idx: u32) -> bool {
        self.bootstrap_queue
            .iter()
            .chain(&self.waiting_queue)
            .chain(&self.inflight_queue)
            .chain(&self.retiring)
            .chain(&self.late_results)
            .any(|p| p.idx == idx)
    }

    /// Requests in prefill's queues.
    pub(super) fn queued(&self) -> usize {
        self.bootstrap_queue.len()
            + self.waiting_queue.len()
            + self.inflight_queue.len()
            + self.retiring.len()
            + self.late_results.len()
    }

    /// Requests prefill remembers after they left its queues.
    pub(super) fn remembered(&self) -> usize {
        self.history.len() + self.retired.len()
    }

    /// Forget a request no queue holds any more.
    pub(super) fn forget(&mut self, idx: u32) {
        self.history.remove(&idx);
        self.retired.remove(&idx);
    }

    pub fn new(config: &ProbeConfig) -> Self {
        PrefillWorker {
            cap: config.prefill_input_cap(),
            chunk_size: match config.scale {
                kvw_evidence::Scale::Walkthrough => 32,
                kvw_evidence::Scale::Incident => 16_384,
            },
            bootstrap_queue: Vec::new(),
            waiting_queue: VecDeque::new(),
            inflight_queue: Vec::new(),
            retiring: Vec::new(),
            late_results: Vec::new(),
            retired: BTreeSet::new(),
            busy_until: 0,
            history: BTreeMap::new(),
        }
    }

    /// Prefill pages a request held.
    pub fn pages_of(&self, req: u32) -> Vec<u32> {
        self.history.get(&req).cloned().unwrap_or_default()
    }
}

/// Record a door decision of prefill, with the request's state it read.
fn door(
    sim: &mut Sim,
    i: u32,
    req: &Req,
    original_len: usize,
    door: DoorName,
    decision: DoorDecision,
) {
    let state = req_state(req, original_len, door, decision);
    sim.record(
        i,
        EventKind::Door {
            worker: Worker::Prefill,
            door,
            state,
            decision,
        },
    );
}

/// A request arrives from the router: validate, then the bootstrap-queue door.
pub fn receive(sim: &mut Sim, i: u32) {
    let mut req = sim.entries[i as usize].req_on(true);
    let original_len = req.input_len();
    let extras = sim.entries[i as usize].extras.clone();
    // What a re-entering request still holds when it reaches the door again.
    if extras
        .reentry
        .as_ref()
        .is_some_and(|r| r.prefill && r.metadata_buffer_index)
    {
        req.metadata_buffer_index = alloc_metadata(sim, i);
    }
    if req.retraction_backup.is_some() {
        sim.resource(i, Worker::Prefill, RK::RetractionBackup, RA::Allocate, 0);
    }
    // `_prefetch_kvcache` arms the HiCache entry before the door.
    if extras.hicache {
        sim.resource(i, Worker::Prefill, RK::HicacheEntry, RA::Allocate, 0);
    }
    let cap = sim.prefill.cap;
    sim.check_input(i, &mut req, Worker::Prefill, cap);
    match sim.decide(|fixes| policy::entry_door_with(&req, fixes, &sim.doors)) {
        Door::Retire => {
            door(
                sim,
                i,
                &req,
                original_len,
                DoorName::PrefillBootstrapQueue,
                DoorDecision::Retired,
            );
            // `retire_unadmitted_request`: `_release_aborted_request`, the
            // session's detach, then the original status.
            if extras.hicache {
                sim.resource(i, Worker::Prefill, RK::HicacheEntry, RA::Free, 0);
            }
            retire_session(sim, i, &req);
            sim.prefill.retired.insert(i);
            req.update_finish_state();
            let (status, msg) = answer_of(&req);
            sim.prefill_answer(sim.now, i, status, msg);
        }
        Door::Admit | Door::DropFinished => {
            door(
                sim,
                i,
                &req,
                original_len,
                DoorName::PrefillBootstrapQueue,
                DoorDecision::Admitted,
            );
            sim.channel.open(req.bootstrap_room);
            if req.metadata_buffer_index.is_none() {
                req.metadata_buffer_index = alloc_metadata(sim, i);
            }
            if sim.is_probed(i) {
                sim.counters.senders += 1;
                sim.counters.bootstraps += 1;
                sim.counters.metadata_buffers += 1;
            }
            sim.record(
                i,
                EventKind::Bootstrap {
                    worker: Worker::Prefill,
                    room: req.bootstrap_room,
                    metadata_buffer: req.metadata_buffer_index.unwrap_or(0) as u64,
                },
            );
            sim.prefill.bootstrap_queue.push(PReq {
                req,
                idx: i,
                original_len,
                pages: Vec::new(),
                done: 0,
                sent_pages: 0,
                mamba: None,
                hicache: extras.hicache,
                sent_at: 0,
                queued_at: sim.now,
            });
        }
    }
}

/// Allocate a metadata buffer index on prefill.
fn alloc_metadata(sim: &mut Sim, i: u32) -> Option<usize> {
    let slot = sim.metadata[PoolSide::Prefill as usize].alloc()?;
    sim.resource(
        i,
        Worker::Prefill,
        RK::MetadataBuffer,
        if slot.collided {
            RA::DoubleFree
        } else {
            RA::Allocate
        },
        slot.index as u64,
    );
    Some(slot.index as usize)
}

/// What retiring at the door does to the request's session (PR #38935):
/// a streaming session's active slot is detached, a non-streaming session
/// is left alone (a rule that detaches one anyway is recorded as such).
fn retire_session(sim: &mut Sim, i: u32, req: &Req) {
    if (sim.doors.session_effect)(req.session.as_ref()) != SessionEffect::DetachActiveSlot {
        return;
    }
    if req.session.as_ref().is_some_and(|s| s.streaming) {
        sim.session_release(i, RA::Detach);
    } else {
        sim.resource(i, Worker::Prefill, RK::SessionSlot, RA::Detach, 0);
    }
}

/// Give back everything a prefill request holds, each exactly once: KV
/// pages, Mamba slot, metadata buffer index, HiCache entry, retraction
/// backup, session slot.
fn cleanup(sim: &mut Sim, p: &mut PReq) {
    let pages = std::mem::take(&mut p.pages);
    sim.release(PoolSide::Prefill, p.idx, p.req.bootstrap_room, pages);
    if let Some(slot) = p.mamba.take() {
        let held = sim.mamba.free(slot);
        let action = if held { RA::Free } else { RA::DoubleFree };
        sim.resource(p.idx, Worker::Prefill, RK::MambaSlot, action, slot as u64);
    }
    if let Some(index) = p.req.metadata_buffer_index.take() {
        let held = sim.metadata[PoolSide::Prefill as usize].free(index as u32);
        let action = if held { RA::Free } else { RA::DoubleFree };
        sim.resource(
            p.idx,
            Worker::Prefill,
            RK::MetadataBuffer,
            action,
            index as u64,
        );
    }
    if std::mem::take(&mut p.hicache) {
        sim.resource(p.idx, Worker::Prefill, RK::HicacheEntry, RA::Free, 0);
    }
    if p.req.retraction_backup.take().is_some() {
        sim.resource(p.idx, Worker::Prefill, RK::RetractionBackup, RA::Free, 0);
    }
    sim.session_release(p.idx, RA::Free);
}

/// The client aborted request `i`: record it in the prefill `Req`'s
/// `to_finish` wherever the request waits (upstream `abort_request`).
pub fn client_abort(sim: &mut Sim, i: u32) {
    let w = &mut sim.prefill;
    let queues = w
        .bootstrap_queue
        .iter_mut()
        .chain(w.waiting_queue.iter_mut())
        .chain(w.inflight_queue.iter_mut());
    for p in queues.filter(|p| p.idx == i) {
        if !p.req.finished() && p.req.to_finish.is_none() {
            p.req.to_finish = Some(FinishReason::Abort {
                message: super::ABORT_MESSAGE.into(),
                status_code: 503,
            });
        }
    }
}

/// Status and message a finished request answers with.
pub(super) fn answer_of(req: &Req) -> (u16, String) {
    match req.effective_finish() {
        Some(FinishReason::Abort {
            message,
            status_code,
        }) => (*status_code, message.clone()),
        Some(r) => (r.status_code(), r.to_string()),
        None => (500, "finished without a reason".into()),
    }
}

/// One iteration of the prefill event loop. Returns when to run again.
pub fn tick(sim: &mut Sim) -> Option<u64> {
    if sim.now < sim.prefill.busy_until {
        return Some(sim.prefill.busy_until);
    }
    sim.release_deferred(PoolSide::Prefill);
    late_results(sim);
    finish_retiring(sim);
    // Bootstrap queue: requests whose decode peer registered its pages move on.
    let (ready, pending): (Vec<PReq>, Vec<PReq>) = std::mem::take(&mut sim.prefill.bootstrap_queue)
        .into_iter()
        .partition(|p| sim.channel.handshake_ready(p.req.bootstrap_room));
    // A room whose decode peer never registers fails after the bootstrap
    // timeout.
    let bootstrap_timeout = bootstrap_timeout_us(sim);
    for mut p in pending {
        if sim.now < p.queued_at + bootstrap_timeout {
            sim.prefill.bootstrap_queue.push(p);
            continue;
        }
        sim.record(
            p.idx,
            EventKind::Poll {
                worker: Worker::Prefill,
                result: PollResult::Failed,
            },
        );
        if !matches!(p.req.to_finish, Some(FinishReason::Abort { .. })) {
            p.req.to_finish = Some(FinishReason::Abort {
                message: "bootstrap timed out waiting for the decode peer".into(),
                status_code: 500,
            });
        }
        p.req.update_finish_state();
        cleanup(sim, &mut p);
        let (status, msg) = answer_of(&p.req);
        sim.prefill_answer(sim.now, p.idx, status, msg);
    }
    for p in ready {
        sim.record(
            p.idx,
            EventKind::Handshake {
                room: p.req.bootstrap_room,
            },
        );
        sim.prefill.waiting_queue.push_back(p);
    }

    let batch = admit(sim);
    let mut next = None;
    if !batch.is_empty() {
        // Tokens a prefix cache holds cost no forward time (`crate::live`).
        let tokens: usize = batch
            .iter()
            .map(|(p, n)| {
                let cached = sim.prefill_cached.get(&p.idx).copied().unwrap_or(0);
                (p.done + n).saturating_sub(cached.max(p.done))
            })
            .sum();
        let dur = sim.costs.prefill_fixed_us + tokens as u64 / sim.costs.prefill_tokens_per_us;
        let end = sim.now + dur;
        for (p, n) in batch {
            let p = forward(sim, p, n);
            process_result(sim, p, end);
        }
        sim.prefill.busy_until = end;
        sim.schedule_landings();
        next = Some(end);
    }
    poll_inflight(sim);
    if next.is_none() && !sim.prefill.waiting_queue.is_empty() && sim.prefill_pool.free_pages() > 0
    {
        next = Some(sim.now + sim.costs.prefill_fixed_us);
    }
    if !sim.prefill.late_results.is_empty() {
        let soon = sim.now + sim.costs.prefill_fixed_us;
        next = Some(next.map_or(soon, |n| n.min(soon)));
    }
    if let Some(deadline) = deadline(sim) {
        next = Some(next.map_or(deadline, |n| n.min(deadline)));
    }
    next
}

/// Whether an iteration now starts with nothing but its queues to look at:
/// no forward running and no result delivered a second time.
pub(super) fn quiet(sim: &Sim) -> bool {
    sim.now >= sim.prefill.busy_until && sim.prefill.late_results.is_empty()
}

/// The earliest timeout prefill waits for: a bootstrap room whose decode
/// peer never registers, or a room whose transfer never completes.
pub(super) fn deadline(sim: &Sim) -> Option<u64> {
    let bootstrap_timeout = bootstrap_timeout_us(sim);
    let bootstrap = sim
        .prefill
        .bootstrap_queue
        .iter()
        .map(|p| p.queued_at + bootstrap_timeout);
    // Prefill's own transfer timeout for rooms that never complete.
    let timeout_us = inflight_timeout_us(sim);
    let inflight = sim
        .prefill
        .inflight_queue
        .iter()
        .map(|p| p.sent_at + timeout_us);
    bootstrap.chain(inflight).min()
}

/// Results delivered a second time (overlap scheduling): a result of a
/// request that was already retired is ignored (PR #36988); otherwise it is
/// processed again like any result.
fn late_results(sim: &mut Sim) {
    for p in std::mem::take(&mut sim.prefill.late_results) {
        let ignore = sim.prefill.retired.contains(&p.idx)
            && sim.doors.ignore_retired_result
            && sim.fix(Fix::RetireAbortedPrefillResult);
        if !ignore {
            process_result(sim, p, sim.now);
        }
    }
}

/// Retired results whose room has no write in flight any more: clean up
/// once and answer.
fn finish_retiring(sim: &mut Sim) {
    for mut p in std::mem::take(&mut sim.prefill.retiring) {
        if sim.channel.inflight(p.req.bootstrap_room) > 0 {
            sim.prefill.retiring.push(p);
            continue;
        }
        cleanup(sim, &mut p);
        let (status, msg) = answer_of(&p.req);
        sim.prefill_answer(sim.now, p.idx, status, msg);
    }
}

/// The waiting-queue door (`get_new_batch_prefill`): asks `finished()`.
fn admit(sim: &mut Sim) -> Vec<(PReq, usize)> {
    let ps = sim.config.page_size as usize;
    let mut budget = sim.prefill.chunk_size;
    let mut batch = Vec::new();
    while budget > 0 {
        let Some(mut p) = sim.prefill.waiting_queue.pop_front() else {
            break;
        };
        let first_look = p.done == 0;
        if policy::prefill_admission_door(&p.req) == Door::DropFinished {
            door(
                sim,
                p.idx,
                &p.req,
                p.original_len,
                DoorName::PrefillWaitingQueue,
                DoorDecision::Dropped,
            );
            continue;
        }
        if first_look && p.req.to_finish.is_some() {
            // `StreamingSession.find_active_slot`: the pre-abort detach.
            sim.session_release(p.idx, RA::Detach);
        }
        if first_look && p.mamba.is_none() && sim.entries[p.idx as usize].extras.hybrid {
            if let Some(slot) = sim.mamba.alloc() {
                sim.resource(
                    p.idx,
                    Worker::Prefill,
                    RK::MambaSlot,
                    RA::Allocate,
                    slot.index as u64,
                );
                p.mamba = Some(slot.index);
            }
        }
        let n = (p.req.input_len() - p.done).min(budget);
        let need = (p.done + n).div_ceil(ps) - p.pages.len();
        let Some(pages) = sim.prefill_pool.alloc(need) else {
            // A request aborted while it waits for KV holds only its Mamba
            // slot and metadata, no KV row: its result goes through the
            // result path with nothing forwarded, where #36988 retires it
            // (upstream's `allocated=False` + Mamba test shape). Without the
            // fix the result path would send, so it keeps waiting for KV.
            if p.req.to_finish.is_some()
                && sim.decide(|fixes| policy::prefill_result_action(&p.req, false, fixes))
                    == ResultAction::Retire
            {
                process_result(sim, p, sim.now);
                continue;
            }
            sim.prefill.waiting_queue.push_front(p);
            break;
        };
        for &page in &pages {
            sim.prefill_owner[page as usize] = Some(p.idx);
        }
        p.pages.extend(pages);
        sim.prefill.history.insert(p.idx, p.pages.clone());
        if first_look {
            door(
                sim,
                p.idx,
                &p.req,
                p.original_len,
                DoorName::PrefillWaitingQueue,
                DoorDecision::Admitted,
            );
        }
        budget -= n;
        batch.push((p, n));
    }
    batch
}

/// Run `n` tokens of the request through the forward: write real K/V bytes.
fn forward(sim: &mut Sim, mut p: PReq, n: usize) -> PReq {
    let ps = sim.config.page_size as usize;
    let writer = sim.writer(p.idx, p.req.generation);
    for pos in p.done..p.done + n {
        let token = p.req.origin_input_ids[pos];
        sim.prefill_pool.write_slot(
            p.pages[pos / ps],
            pos % ps,
            &k_code(pos as u64),
            &v_code(token),
            writer,
        );
    }
    let from = p.done as u64;
    p.done += n;
    let len = p.req.input_len();
    if p.done == len && !len.is_multiple_of(ps) && sim.config.page_tail == PageTail::Zeroed {
        let last = *p.pages.last().unwrap_or(&0);
        sim.prefill_pool.zero_tail(last, len % ps);
    }
    if sim.is_probed(p.idx) {
        sim.counters.prefill_batches += 1;
    }
    sim.record_with_picture(
        p.idx,
        EventKind::Forward {
            from,
            to: p.done as u64,
            pages: p.pages.len() as u64,
        },
        PoolSide::Prefill,
    );
    p
}

/// `process_batch_result_disagg_prefill` for one request.
fn process_result(sim: &mut Sim, mut p: PReq, at: u64) {
    let ps = sim.config.page_size as usize;
    let last = p.done == p.req.input_len();
    if last {
        first_token_checks(sim, &mut p);
        let extras = &mut sim.entries[p.idx as usize].extras;
        if std::mem::take(&mut extras.delayed_result) {
            sim.prefill.late_results.push(p.clone());
        }
    }
    let room = p.req.bootstrap_room;
    let writer = sim.writer(p.idx, p.req.generation);
    match sim.decide(|fixes| policy::prefill_result_action(&p.req, last, fixes)) {
        ResultAction::SendChunk => {
            let full = p.done / ps;
            let src = p.pages[p.sent_pages..full].to_vec();
            let sent = sim.send_chunk(ChunkSend {
                room,
                first: p.sent_pages,
                src: &src,
                at,
                last: false,
                checksum: None,
                writer,
            });
            sim.record(
                p.idx,
                EventKind::KvSend {
                    pages: sent as u64,
                    last: false,
                    checksum: None,
                },
            );
            p.sent_pages = full;
            sim.prefill.waiting_queue.push_front(p);
        }
        ResultAction::SendLastChunk => {
            let src = p.pages[p.sent_pages..].to_vec();
            let checksum = sim.fix(Fix::KvChecksum).then(|| {
                sim.prefill_pool.settle(&p.pages);
                cpu::adler32_pages(sim.layout, sim.prefill_pool.kv_of(&p.pages), &p.pages)
            });
            let sent = sim.send_chunk(ChunkSend {
                room,
                first: p.sent_pages,
                src: &src,
                at,
                last: true,
                checksum,
                writer,
            });
            door(
                sim,
                p.idx,
                &p.req,
                p.original_len,
                DoorName::PrefillResult,
                DoorDecision::SentLastChunk,
            );
            sim.record(
                p.idx,
                EventKind::KvSend {
                    pages: sent as u64,
                    last: true,
                    checksum,
                },
            );
            p.sent_pages = p.pages.len();
            p.sent_at = at;
            sim.prefill.inflight_queue.push(p);
        }
        ResultAction::Retire => retire(sim, p, at),
    }
}

/// The first output token's checks on the final chunk: the grammar must
/// accept it, and a sampling mask must be valid. A grammar refusal aborts
/// through `prepare_abort` (500, applied at once), as upstream's PD
/// prefill result path does; a bad sampling mask records its abort in
/// `to_finish` (`set_finish_with_abort`).
fn first_token_checks(sim: &mut Sim, p: &mut PReq) {
    let extras = sim.entries[p.idx as usize].extras.clone();
    // The model answers position 1 with the prompt's token there.
    let token = p.req.origin_input_ids.get(1).copied().unwrap_or(0);
    if let Some(allowed) = &extras.grammar_allows {
        if p.req.to_finish.is_none() && !p.req.finished() && !allowed.contains(&token) {
            p.req
                .prepare_abort(&format!("grammar rejected token {token}"));
        }
    }
    if let Some(mask) = extras.sampling_mask {
        if p.req.to_finish.is_none() && !p.req.finished() {
            p.req
                .set_finish_with_abort_keep_input(mask.message(), mask.status());
        }
    }
}

/// Retire an aborted result (PR #36988): best-effort `sender.abort()`
/// (local cleanup goes on if it raises), never send, release everything
/// once — after the room's in-flight writes landed — and answer once.
fn retire(sim: &mut Sim, mut p: PReq, at: u64) {
    let room = p.req.bootstrap_room;
    door(
        sim,
        p.idx,
        &p.req,
        p.original_len,
        DoorName::PrefillResult,
        DoorDecision::Retired,
    );
    sim.channel.sender_abort(room);
    sim.record(p.idx, EventKind::SenderAbort { room });
    if sim.entries[p.idx as usize].extras.sender_abort_fails {
        sim.resource(p.idx, Worker::Prefill, RK::KvSender, RA::AbortFailed, room);
    }
    sim.prefill.retired.insert(p.idx);
    p.req.update_finish_state();
    if sim.doors.retire_waits_for_inflight && sim.channel.inflight(room) > 0 {
        sim.prefill.retiring.push(p);
        return;
    }
    cleanup(sim, &mut p);
    let (status, msg) = answer_of(&p.req);
    sim.prefill_answer(at, p.idx, status, msg);
}

/// How long the bootstrap queue waits for a room's decode peer to register
/// (model assumption: decode's waiting timeout).
fn bootstrap_timeout_us(sim: &Sim) -> u64 {
    sim.config.waiting_timeout_s * 1_000_000
}

/// How long prefill's inflight queue waits for a room that never completes
/// (a dropped write) before it fails the transfer: twice decode's waiting
/// timeout (model assumption: the record gives only decode's 300 s; the
/// factor keeps prefill from giving up before decode does).
fn inflight_timeout_us(sim: &Sim) -> u64 {
    2 * sim.config.waiting_timeout_s * 1_000_000
}

/// `process_disagg_prefill_inflight_queue`: free what finished transferring
/// and answer. On `KVPoll.Success` upstream finishes the request with
/// `FINISH_LENGTH(length=0)` and never promotes a pending `to_finish`, so a
/// rejected request that was sent answers 200 "length" (SGLang issue #33507).
fn poll_inflight(sim: &mut Sim) {
    let queue = std::mem::take(&mut sim.prefill.inflight_queue);
    let timeout_us = inflight_timeout_us(sim);
    for mut p in queue {
        let result = match sim.channel.poll(p.req.bootstrap_room) {
            KvPoll::Success => PollResult::Success,
            KvPoll::Failed => PollResult::Failed,
            KvPoll::Transferring if sim.now >= p.sent_at + timeout_us => PollResult::Failed,
            KvPoll::Transferring => {
                sim.prefill.inflight_queue.push(p);
                continue;
            }
        };
        sim.record(
            p.idx,
            EventKind::Poll {
                worker: Worker::Prefill,
                result,
            },
        );
        // Model assumption (#33507): with #36988's switch on, an abort
        // recorded mid-transfer is applied rather than overwritten with
        // FINISH_LENGTH; the record does not name the closing change.
        if matches!(p.req.to_finish, Some(FinishReason::Abort { .. }))
            && sim.fix(Fix::RetireAbortedPrefillResult)
        {
            p.req.update_finish_state();
        }
        if !p.req.finished() {
            p.req.finished_reason = Some(match result {
                PollResult::Success => FinishReason::Length { length: 0 },
                _ => FinishReason::Abort {
                    message: "KV transfer failed".into(),
                    status_code: 500,
                },
            });
        }
        cleanup(sim, &mut p);
        let (status, msg) = answer_of(&p.req);
        sim.prefill_answer(sim.now, p.idx, status, msg);
    }
}
