//! The prefill worker: bootstrap queue → waiting queue → chunked forward →
//! KV send → inflight queue.
//!
//! Models `python/sglang/srt/disaggregation/prefill.py`
//! (`PrefillBootstrapQueue`, `event_loop_normal_disagg_prefill`,
//! `process_batch_result_disagg_prefill`, `send_kv_chunk`,
//! `process_disagg_prefill_inflight_queue`) at the pinned commit.

use std::collections::{BTreeMap, VecDeque};

use kvw_evidence::{Fix, PoolSide, ProbeConfig};
use kvw_kernels::cpu;

use super::{cost, Sim};
use crate::engine_ref;
use crate::model::{k_code, v_code};
use crate::policy::{self, Door, KvPoll, ResultAction};
use crate::req::{validate_input_length, Req};
use crate::trace::upstream_ref;
use crate::transfer::ChunkSend;

const SCHEDULE_BATCH: &str = "python/sglang/srt/managers/schedule_batch.py";
const PREFILL_PY: &str = "python/sglang/srt/disaggregation/prefill.py";

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
            cap: config.max_req_input_len,
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

/// A request arrives from the router: validate, then the bootstrap-queue door.
pub fn receive(sim: &mut Sim, i: u32) {
    let mut req = sim.entries[i as usize].req();
    let original_len = req.input_len();
    let probed = sim.is_probed(i);
    if let Some(msg) = validate_input_length(original_len, sim.prefill.cap) {
        req.set_finish_with_abort(&msg, 400);
        sim.event(i, 2, "prefill", "validate", format!(
            "input of {original_len} tokens exceeds the cap of {}: set_finish_with_abort records it in to_finish and swaps the input for 1 placeholder token",
            sim.prefill.cap
        ));
        if probed {
            sim.trace.source(
                2,
                upstream_ref(
                    SCHEDULE_BATCH,
                    Some((2053, 2072)),
                    "Req.set_finish_with_abort(): to_finish + one-token placeholder",
                ),
            );
            sim.trace.source(
                2,
                engine_ref!("validate_input_length → set_finish_with_abort"),
            );
        }
    }
    match policy::entry_door(&req, sim.fixes) {
        Door::Retire => {
            sim.event(i, 2, "prefill", "retire", "is_unadmitted_reject: retired at the bootstrap-queue door before any bootstrap, metadata buffer or sender".into());
            if probed {
                sim.trace.at_door(
                    2,
                    &req,
                    original_len,
                    "prefill.bootstrap_queue (entry door)",
                    "retired",
                );
                sim.trace.say(2, "The entry door (PR #38935) saw a rejection in to_finish on a request holding nothing and retired it at once: no bootstrap room, no metadata buffer, no sender.");
                sim.trace
                    .source(2, engine_ref!("policy::entry_door → Door::Retire"));
                sim.trace.source(
                    2,
                    upstream_ref(
                        "test/registered/unit/disaggregation/test_admission_abort_not_enqueued.py",
                        None,
                        "upstream test: rejected requests are not enqueued",
                    ),
                );
            }
            req.update_finish_state();
            let msg = reason_message(&req);
            sim.prefill_answer(sim.now, i, 400, msg, false);
        }
        Door::Admit | Door::DropFinished => {
            sim.channel.open(req.bootstrap_room);
            req.metadata_buffer_index = Some(sim.prefill.next_metadata);
            sim.prefill.next_metadata += 1;
            if probed {
                sim.counters.senders += 1;
                sim.counters.bootstraps += 1;
                sim.counters.metadata_buffers += 1;
                sim.trace.source(
                    1,
                    engine_ref!("prefill bootstrap queue: sender, room, metadata buffer"),
                );
            }
            sim.event(
                i,
                1,
                "prefill",
                "bootstrap",
                format!(
                "sender created for room {}, metadata buffer {}; waiting for decode's handshake",
                req.bootstrap_room,
                req.metadata_buffer_index.unwrap_or(0)
            ),
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

fn reason_message(req: &Req) -> String {
    match req.effective_finish() {
        Some(crate::req::FinishReason::Abort { message, .. }) => message.clone(),
        Some(r) => r.to_string(),
        None => String::new(),
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
        sim.event(
            p.idx,
            1,
            "prefill",
            "handshake",
            "decode registered its pages; request moves to the waiting queue".into(),
        );
        sim.prefill.waiting_queue.push_back(p);
    }

    let batch = admit(sim);
    let mut next = None;
    if !batch.is_empty() {
        let tokens: usize = batch.iter().map(|(_, n)| n).sum();
        let dur = cost::PREFILL_FIXED_US + tokens as u64 / cost::PREFILL_TOKENS_PER_US;
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
        next = Some(sim.now + cost::PREFILL_FIXED_US);
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
        let probed = sim.is_probed(p.idx);
        let first_look = p.done == 0;
        match policy::prefill_admission_door(&p.req) {
            Door::DropFinished | Door::Retire => {
                sim.event(p.idx, 2, "prefill", "door", "finished(): dropped".into());
                continue;
            }
            Door::Admit => {}
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
            let rejected = p.req.to_finish.is_some();
            sim.event(
                p.idx,
                2,
                "prefill",
                "door",
                format!(
                    "get_new_batch_prefill asks finished() → {}; to_finish is {}: admitted",
                    p.req.finished(),
                    if rejected { "set" } else { "empty" }
                ),
            );
            if probed {
                sim.trace.at_door(
                    2,
                    &p.req,
                    p.original_len,
                    "prefill.waiting_queue (get_new_batch_prefill)",
                    "admitted",
                );
                sim.trace.source(
                    2,
                    upstream_ref(
                        SCHEDULE_BATCH,
                        Some((1479, 1481)),
                        "Req.finished() reads only finished_reason",
                    ),
                );
                sim.trace.source(
                    2,
                    engine_ref!("policy::prefill_admission_door asks finished()"),
                );
                if rejected {
                    sim.trace.say(2, "The rejection sits in to_finish, but the door asks finished(), which reads finished_reason: the rejected request is admitted to a prefill batch.");
                } else {
                    sim.trace.say(
                        2,
                        "The prompt fits the prefill pool; the request is admitted normally.",
                    );
                }
            }
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
    p.done += n;
    let len = p.req.input_len();
    if p.done == len && !len.is_multiple_of(ps) {
        // Model assumption: the forward pads the tail of the last page with zeros.
        let last = *p.pages.last().unwrap_or(&0);
        sim.prefill_pool.zero_tail(last, len % ps);
    }
    if sim.is_probed(p.idx) {
        sim.counters.prefill_batches += 1;
        sim.trace.reach(3);
        if p.done == len {
            sim.trace
                .state(3, &p.req, p.original_len, "prefill.forward", "forward ran");
            sim.trace.pages(3, sim.page_view(PoolSide::Prefill));
            sim.trace.source(
                3,
                engine_ref!("prefill forward writes K/V of origin_input_ids"),
            );
            sim.trace.source(
                3,
                upstream_ref(
                    SCHEDULE_BATCH,
                    Some((2053, 2072)),
                    "the placeholder that replaced the prompt",
                ),
            );
            if p.req.to_finish.is_some() {
                sim.trace.say(3, format!(
                    "The forward ran over origin_input_ids, which is now the 1-token placeholder: KV for 1 of {} prompt tokens was computed ({} prefill page).",
                    p.original_len,
                    p.pages.len()
                ));
            } else {
                sim.trace.say(
                    3,
                    format!(
                        "The forward computed KV for all {len} prompt tokens in {} prefill pages.",
                        p.pages.len()
                    ),
                );
            }
        }
    }
    sim.event(
        p.idx,
        3,
        "prefill",
        "forward",
        format!(
            "computed KV for tokens {}..{} into prefill pages",
            p.done - n,
            p.done
        ),
    );
    p
}

/// `process_batch_result_disagg_prefill` for one request.
fn process_result(sim: &mut Sim, mut p: PReq, at: u64) {
    let ps = sim.config.page_size as usize;
    let last = p.done == p.req.input_len();
    let probed = sim.is_probed(p.idx);
    let room = p.req.bootstrap_room;
    let writer = sim.writer(p.idx, p.req.generation);
    match policy::prefill_result_action(&p.req, last, sim.fixes) {
        ResultAction::SendChunk => {
            let full = p.done / ps;
            let src = p.pages[p.sent_pages..full].to_vec();
            sim.channel.send_chunk(ChunkSend {
                room,
                first: p.sent_pages,
                src: &src,
                at,
                last: false,
                checksum: None,
                writer,
            });
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
            let total_sent = p.sent_pages + sent;
            p.sent_pages = p.pages.len();
            let reserved = sim
                .channel
                .room(room)
                .and_then(|r| r.dst_pages.as_ref())
                .map_or(0, Vec::len);
            sim.event(p.idx, 4, "prefill", "kv_send", format!(
                "send_kv_chunk(last_chunk=True): {total_sent} page(s) posted for {reserved} reserved on decode{}; transfer-complete will follow",
                checksum.map(|c| format!(", Adler-32 {c:#010x}")).unwrap_or_default()
            ));
            p.req.update_finish_state();
            if probed {
                sim.trace.at_door(
                    4,
                    &p.req,
                    p.original_len,
                    "prefill.process_batch_result",
                    "sent last chunk",
                );
                sim.trace
                    .source(4, engine_ref!("ResultAction::SendLastChunk"));
                sim.trace.source(
                    4,
                    upstream_ref(
                        PREFILL_PY,
                        None,
                        "process_batch_result_disagg_prefill / send_kv_chunk",
                    ),
                );
                sim.trace.source(
                    4,
                    upstream_ref(
                        SCHEDULE_BATCH,
                        Some((1842, 1848)),
                        "update_finish_state() applies to_finish only now",
                    ),
                );
                sim.trace.say(4, format!(
                    "Prefill sent {total_sent} page(s) with the final flag while decode had reserved {reserved}: the transfer will report complete although it covers {} of {} prompt tokens.",
                    p.req.input_len().min(p.original_len),
                    p.original_len
                ));
                if checksum.is_some() {
                    sim.trace.say(4, "With kv-checksum, an Adler-32 over the sent pages travels with the final chunk.");
                }
            }
            if let Some(r) = p.req.finished_reason.clone() {
                let msg = reason_message(&p.req);
                sim.prefill_answer(at, p.idx, r.status_code(), msg, true);
            }
            sim.prefill.inflight_queue.push(p);
        }
        ResultAction::Retire => {
            sim.channel.sender_abort(room);
            p.req.update_finish_state();
            sim.event(p.idx, 4, "prefill", "retire", "aborted prefill result retired: chunk state cleared, KV and metadata freed once, sender.abort() (best effort), nothing sent".into());
            if probed {
                sim.trace.at_door(
                    4,
                    &p.req,
                    p.original_len,
                    "prefill.process_batch_result",
                    "retired",
                );
                sim.trace.say(4, "PR #36988 retired the aborted result: its pages and metadata buffer were freed once, sender.abort() was called, and the short handoff was never sent to decode.");
                sim.trace.source(4, engine_ref!("ResultAction::Retire"));
                sim.trace.source(
                    4,
                    upstream_ref(
                        "test/registered/unit/disaggregation/test_prefill_abort_result_cleanup.py",
                        None,
                        "upstream test: aborted prefill results are retired",
                    ),
                );
            }
            let pages = std::mem::take(&mut p.pages);
            sim.release(PoolSide::Prefill, room, pages);
            let msg = reason_message(&p.req);
            sim.prefill_answer(at, p.idx, 400, msg, false);
        }
    }
}

/// `process_disagg_prefill_inflight_queue`: free what finished transferring.
fn poll_inflight(sim: &mut Sim) {
    let queue = std::mem::take(&mut sim.prefill.inflight_queue);
    for mut p in queue {
        match sim.channel.poll(p.req.bootstrap_room) {
            KvPoll::Success | KvPoll::Failed => {
                sim.event(
                    p.idx,
                    4,
                    "prefill",
                    "inflight_done",
                    "transfer polled complete; prefill pages freed".into(),
                );
                let pages = std::mem::take(&mut p.pages);
                sim.release(PoolSide::Prefill, p.req.bootstrap_room, pages);
            }
            KvPoll::Transferring => sim.prefill.inflight_queue.push(p),
        }
    }
}
