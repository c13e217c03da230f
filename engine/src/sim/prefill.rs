//! The prefill worker: bootstrap queue → waiting queue → chunked forward →
//! KV send → inflight queue.
//!
//! Models `python/sglang/srt/disaggregation/prefill.py`
//! (`PrefillBootstrapQueue`, `event_loop_normal_disagg_prefill`,
//! `process_batch_result_disagg_prefill`, `send_kv_chunk`,
//! `process_disagg_prefill_inflight_queue`) at the pinned commit.

use std::collections::{BTreeMap, VecDeque};

use kvw_evidence::{
    DoorDecision, DoorName, EventKind, Fix, PageTail, PollResult, PoolSide, ProbeConfig, Worker,
};
use kvw_kernels::cpu;

use super::Sim;
use crate::model::{k_code, v_code};
use crate::policy::{self, Door, KvPoll, ResultAction};
use crate::req::{validate_input_length, FinishReason, Req};
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
}

/// State of the prefill scheduler.
#[derive(Debug)]
pub struct PrefillWorker {
    cap: u64,
    chunk_size: usize,
    bootstrap_queue: Vec<PReq>,
    waiting_queue: VecDeque<PReq>,
    inflight_queue: Vec<PReq>,
    busy_until: u64,
    next_metadata: usize,
    /// Prefill pages each request held, for the page picture.
    history: BTreeMap<u32, Vec<u32>>,
}

impl PrefillWorker {
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
            busy_until: 0,
            next_metadata: 0,
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
    let state = req_state(
        req,
        original_len,
        kvw_evidence::render::door_name(door),
        &format!("{decision:?}"),
    );
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
    let mut req = sim.entries[i as usize].req();
    let original_len = req.input_len();
    let cap = sim.prefill.cap;
    let rejection = validate_input_length(original_len, cap);
    sim.record(
        i,
        EventKind::InputCheck {
            worker: Worker::Prefill,
            input_len: original_len as u64,
            cap,
            rejected: rejection.is_some(),
        },
    );
    if let Some(msg) = rejection {
        req.set_finish_with_abort(&msg, 400);
    }
    match policy::entry_door(&req, sim.fixes) {
        Door::Retire => {
            door(
                sim,
                i,
                &req,
                original_len,
                DoorName::PrefillBootstrapQueue,
                DoorDecision::Retired,
            );
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
            req.metadata_buffer_index = Some(sim.prefill.next_metadata);
            sim.prefill.next_metadata += 1;
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
    // Bootstrap queue: requests whose decode peer registered its pages move on.
    let (ready, pending): (Vec<PReq>, Vec<PReq>) = std::mem::take(&mut sim.prefill.bootstrap_queue)
        .into_iter()
        .partition(|p| sim.channel.handshake_ready(p.req.bootstrap_room));
    sim.prefill.bootstrap_queue = pending;
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
    next
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
        let n = (p.req.input_len() - p.done).min(budget);
        let need = (p.done + n).div_ceil(ps) - p.pages.len();
        let Some(pages) = sim.prefill_pool.alloc(need) else {
            sim.prefill.waiting_queue.push_front(p);
            break;
        };
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
    let room = p.req.bootstrap_room;
    let writer = sim.writer(p.idx, p.req.generation);
    match policy::prefill_result_action(&p.req, last, sim.fixes) {
        ResultAction::SendChunk => {
            let full = p.done / ps;
            let src = p.pages[p.sent_pages..full].to_vec();
            let sent = sim.channel.send_chunk(ChunkSend {
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
            let checksum = sim
                .fix(Fix::KvChecksum)
                .then(|| cpu::adler32_pages(sim.layout, sim.prefill_pool.kv(), &p.pages));
            let sent = sim.channel.send_chunk(ChunkSend {
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
            sim.prefill.inflight_queue.push(p);
        }
        ResultAction::Retire => {
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
            p.req.update_finish_state();
            let pages = std::mem::take(&mut p.pages);
            sim.release(PoolSide::Prefill, p.idx, room, pages);
            let (status, msg) = answer_of(&p.req);
            sim.prefill_answer(at, p.idx, status, msg);
        }
    }
}

/// `process_disagg_prefill_inflight_queue`: free what finished transferring
/// and answer. On `KVPoll.Success` upstream finishes the request with
/// `FINISH_LENGTH(length=0)` and never promotes a pending `to_finish`, so a
/// rejected request that was sent answers 200 "length" (SGLang issue #33507).
fn poll_inflight(sim: &mut Sim) {
    let queue = std::mem::take(&mut sim.prefill.inflight_queue);
    for mut p in queue {
        let result = match sim.channel.poll(p.req.bootstrap_room) {
            KvPoll::Success => PollResult::Success,
            KvPoll::Failed => PollResult::Failed,
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
        if !p.req.finished() {
            p.req.finished_reason = Some(match result {
                PollResult::Success => FinishReason::Length { length: 0 },
                _ => FinishReason::Abort {
                    message: "KV transfer failed".into(),
                    status_code: 500,
                },
            });
        }
        let pages = std::mem::take(&mut p.pages);
        sim.release(PoolSide::Prefill, p.idx, p.req.bootstrap_room, pages);
        let (status, msg) = answer_of(&p.req);
        sim.prefill_answer(sim.now, p.idx, status, msg);
    }
}
