//! The decode worker: prealloc queue → transfer queue → running batch.
//!
//! Models `python/sglang/srt/disaggregation/decode.py`
//! (`DecodePreallocQueue` and its `_pre_alloc`, `DecodeTransferQueue`,
//! `event_loop_normal_disagg_decode`) at the pinned commit. `_pre_alloc`
//! reserves pages from decode's own view of the prompt length — the length
//! the client sent — and nothing later compares that with what arrived.

use std::collections::BTreeMap;

use kvw_evidence::{Fix, KvCanaryMode, PoolSide};
use kvw_kernels::cpu::{self, PagedAttention};
use kvw_kernels::TagCheck;

use super::{cost, Sim};
use crate::engine_ref;
use crate::model::{self, k_code, v_code, SM_SCALE};
use crate::policy::{self, Door, HandoffDecision, KvPoll};
use crate::req::{max_req_input_len, validate_input_length, FinishReason, Req};
use crate::trace::upstream_ref;

const DECODE_PY: &str = "python/sglang/srt/disaggregation/decode.py";
const SCHEDULE_BATCH: &str = "python/sglang/srt/managers/schedule_batch.py";

/// A request on the decode side.
#[derive(Debug, Clone)]
struct DReq {
    req: Req,
    idx: u32,
    original_len: usize,
    /// Decode page table, in position order.
    table: Vec<u32>,
    waited_since: u64,
    has_receiver: bool,
}

/// State of the decode scheduler.
#[derive(Debug, Default)]
pub struct DecodeWorker {
    prealloc_queue: Vec<DReq>,
    transfer_queue: Vec<DReq>,
    running_batch: Vec<DReq>,
    /// Aborts that arrived before their request did.
    early_aborts: BTreeMap<u32, (String, u16)>,
    busy_until: u64,
    next_metadata: usize,
}

/// A request arrives from the router with the prompt the client sent.
pub fn receive(sim: &mut Sim, i: u32) {
    let mut req = sim.entries[i as usize].req();
    let original_len = req.input_len();
    let cap = max_req_input_len(sim.config.context_len, sim.config.decode_pool_tokens);
    if let Some(msg) = validate_input_length(original_len, cap) {
        req.set_finish_with_abort(&msg, 400);
        sim.event(
            i,
            1,
            "decode",
            "validate",
            format!("decode's own cap {cap} rejects the input: {msg}"),
        );
    }
    if let Some((msg, status)) = sim.decode.early_aborts.remove(&i) {
        req.set_finish_with_abort(&msg, status);
        sim.event(
            i,
            5,
            "decode",
            "abort",
            "router abort arrived first: set_finish_with_abort records it in to_finish".into(),
        );
    }
    sim.decode.prealloc_queue.push(DReq {
        req,
        idx: i,
        original_len,
        table: Vec::new(),
        waited_since: 0,
        has_receiver: false,
    });
}

/// The router forwards prefill's error: `abort_request` on decode records it
/// with `set_finish_with_abort`, i.e. in `to_finish` again.
pub fn abort(sim: &mut Sim, i: u32, message: &str, status: u16) {
    let w = &mut sim.decode;
    let found = w
        .prealloc_queue
        .iter_mut()
        .chain(w.transfer_queue.iter_mut())
        .chain(w.running_batch.iter_mut())
        .find(|d| d.idx == i);
    match found {
        Some(d) => {
            d.req.set_finish_with_abort(message, status);
            sim.event(i, 5, "decode", "abort", "abort_request: set_finish_with_abort records the rejection in to_finish; finished() stays false".into());
        }
        None => {
            w.early_aborts.insert(i, (message.to_string(), status));
        }
    }
}

/// One iteration of the decode event loop. Returns when to run again.
pub fn tick(sim: &mut Sim) -> Option<u64> {
    if sim.now < sim.decode.busy_until {
        return Some(sim.decode.busy_until);
    }
    sim.release_deferred(PoolSide::Decode);
    prealloc(sim);
    let mut next = transfer(sim);
    if !sim.decode.running_batch.is_empty() {
        let end = sim.now + cost::DECODE_STEP_US;
        let running = std::mem::take(&mut sim.decode.running_batch);
        for d in running {
            decode_step(sim, d, end);
        }
        sim.decode.busy_until = end;
        next = Some(next.map_or(end, |n: u64| n.min(end)));
    }
    if !sim.decode.prealloc_queue.is_empty()
        && next.is_none()
        && !sim.decode.transfer_queue.is_empty()
    {
        next = Some(sim.now + cost::DECODE_STEP_US);
    }
    next
}

/// The prealloc queue: entry door, receiver + bootstrap, `_pre_alloc`.
fn prealloc(sim: &mut Sim) {
    let ps = sim.config.page_size as usize;
    let queue = std::mem::take(&mut sim.decode.prealloc_queue);
    let mut blocked = false;
    for mut d in queue {
        if blocked {
            sim.decode.prealloc_queue.push(d);
            continue;
        }
        let probed = sim.is_probed(d.idx);
        if policy::entry_door(&d.req, sim.fixes) == Door::Retire {
            let (status, message) = answer_of(&d.req);
            sim.event(d.idx, 5, "decode", "retire", format!("is_unadmitted_reject: retired at the prealloc door with the original {status}; no receiver, no bootstrap, no metadata buffer"));
            if probed {
                sim.trace.at_door(
                    5,
                    &d.req,
                    d.original_len,
                    "decode.prealloc_queue (entry door)",
                    "retired",
                );
                sim.trace.say(5, format!("Decode's entry door (PR #38935) retired the request before creating a receiver or reserving pages, and answered {status} with the original message."));
                sim.trace
                    .source(5, engine_ref!("policy::entry_door on decode"));
                sim.trace.say(1, "No bootstrap room, KV receiver or page reservation was made for this request: both entry doors retired it first.");
            }
            d.req.update_finish_state();
            sim.decode_answer(sim.now, d.idx, status, message, Vec::new());
            continue;
        }
        if !d.has_receiver {
            d.has_receiver = true;
            if probed {
                sim.counters.receivers += 1;
            }
            sim.event(
                d.idx,
                1,
                "decode",
                "receiver",
                format!("KV receiver created for room {}", d.req.bootstrap_room),
            );
        }
        // `_pre_alloc`: reserve pages for decode's own view of the prompt.
        let need = d.req.input_len().div_ceil(ps);
        let Some(table) = sim.decode_pool.alloc(need) else {
            blocked = true;
            sim.decode.prealloc_queue.push(d);
            continue;
        };
        d.table = table;
        d.req.metadata_buffer_index = Some(sim.decode.next_metadata);
        sim.decode.next_metadata += 1;
        d.waited_since = sim.now;
        sim.channel
            .receiver_init(d.req.bootstrap_room, d.table.clone());
        sim.wake_prefill(sim.now + cost::HOP_BACK_US);
        sim.event(d.idx, 1, "decode", "prealloc", format!(
            "_pre_alloc reserved {} page(s) for {} tokens; receiver.init sent the page table to prefill",
            d.table.len(),
            d.req.input_len()
        ));
        if probed {
            sim.counters.metadata_buffers += 1;
            sim.marks.reserved = d.table.clone();
            sim.trace.at_door(
                1,
                &d.req,
                d.original_len,
                "decode.prealloc_queue (_pre_alloc)",
                "pages reserved",
            );
            sim.trace.pages(1, sim.page_view(PoolSide::Decode));
            sim.trace.source(
                1,
                engine_ref!("_pre_alloc from decode's view of the prompt length"),
            );
            sim.trace.source(
                1,
                upstream_ref(DECODE_PY, None, "DecodePreallocQueue._pre_alloc"),
            );
            let foreign = d
                .table
                .iter()
                .filter(|&&p| sim.decode_pool.meta(p).writer.is_some())
                .count();
            sim.trace.say(1, format!(
                "The router told decode the prompt is {} tokens; decode reserved {} pages of {} tokens for it. {} of those pages still hold bytes of earlier requests (freed pages are not cleared).",
                d.original_len,
                d.table.len(),
                ps,
                foreign
            ));
        }
        sim.decode.transfer_queue.push(d);
    }
}

/// The transfer queue: poll the receiver, then the handoff door.
fn transfer(sim: &mut Sim) -> Option<u64> {
    let timeout_us = sim.config.waiting_timeout_s * 1_000_000;
    let queue = std::mem::take(&mut sim.decode.transfer_queue);
    let mut next: Option<u64> = None;
    for d in queue {
        let room = d.req.bootstrap_room;
        let poll = sim.channel.poll(room);
        let checksum_ok = (sim.fix(Fix::KvChecksum) && poll == KvPoll::Success).then(|| {
            let here = cpu::adler32_pages(sim.layout, sim.decode_pool.kv(), &d.table);
            sim.channel.room(room).and_then(|r| r.checksum) == Some(here)
        });
        let waited = sim.now - d.waited_since;
        let probed = sim.is_probed(d.idx);
        match policy::handoff_door(&d.req, poll, waited, timeout_us, checksum_ok) {
            HandoffDecision::Wait => {
                let deadline = d.waited_since + timeout_us;
                next = Some(next.map_or(deadline, |n| n.min(deadline)));
                sim.decode.transfer_queue.push(d);
            }
            HandoffDecision::Admit => {
                sim.channel.ack(room);
                sim.wake_prefill(sim.now + cost::HOP_BACK_US);
                let written = sim.channel.room(room).map_or(0, |r| r.landed);
                sim.event(d.idx, 5, "decode", "door", format!(
                    "poll → Success ({written} of {} reserved pages written); finished() → {}: admitted to the running batch",
                    d.table.len(),
                    d.req.finished()
                ));
                if probed {
                    sim.trace.at_door(
                        5,
                        &d.req,
                        d.original_len,
                        "decode.transfer_queue",
                        "admitted",
                    );
                    sim.trace.pages(5, sim.page_view(PoolSide::Decode));
                    sim.trace.source(5, engine_ref!("policy::handoff_door"));
                    sim.trace.source(
                        5,
                        upstream_ref(SCHEDULE_BATCH, Some((1479, 1481)), "Req.finished()"),
                    );
                    sim.trace.source(
                        5,
                        upstream_ref(DECODE_PY, None, "DecodeTransferQueue.pop_transferred"),
                    );
                    if checksum_ok == Some(true) {
                        sim.trace
                            .say(5, "The kv-checksum matched over the reserved pages.");
                    }
                    sim.trace.say(5, format!(
                        "The receiver polled Success with {written} of {} reserved pages written, and finished() was false: decode accepted the handoff.",
                        d.table.len()
                    ));
                }
                sim.decode.running_batch.push(d);
            }
            HandoffDecision::Abort {
                status,
                message,
                transfer_failure,
            } => {
                if probed {
                    if transfer_failure {
                        sim.counters.transfer_failures += 1;
                    }
                    sim.trace.at_door(
                        5,
                        &d.req,
                        d.original_len,
                        "decode.transfer_queue",
                        "aborted",
                    );
                    sim.trace.pages(5, sim.page_view(PoolSide::Decode));
                    sim.trace
                        .source(5, engine_ref!("policy::handoff_door → Abort"));
                    sim.trace.say(
                        5,
                        format!("Decode aborted the request before batching it: {message}."),
                    );
                }
                sim.event(
                    d.idx,
                    5,
                    "decode",
                    "abort",
                    format!("{message}; answering {status}"),
                );
                sim.channel.ack(room);
                let answer = match d.req.effective_finish() {
                    Some(FinishReason::Abort {
                        message: m,
                        status_code,
                    }) if *status_code == status => m.clone(),
                    _ => message,
                };
                finish(sim, d, status, answer, sim.now);
            }
        }
    }
    next
}

/// One decode step for one request: real paged attention, read-out, append KV.
fn decode_step(sim: &mut Sim, mut d: DReq, end: u64) {
    let ps = sim.config.page_size as usize;
    let probed = sim.is_probed(d.idx);
    let seq_len = d.req.seq_len();
    let used = seq_len.div_ceil(ps).min(d.table.len());
    let first = d.req.output_ids.is_empty();
    let read = &d.table[..used];
    let me = sim.writer(d.idx, d.req.generation);
    let canaried = read
        .iter()
        .filter(|&&p| sim.decode_pool.meta(p).canary)
        .count();
    if probed && first {
        sim.trace.at_door(
            6,
            &d.req,
            d.original_len,
            "decode.running_batch",
            "decoding",
        );
        sim.trace
            .source(6, engine_ref!("decode attention over the whole page table"));
        sim.trace.source(
            6,
            upstream_ref(
                DECODE_PY,
                None,
                "decode batch over req_to_token of the reserved length",
            ),
        );
    }
    if canaried > 0 && sim.canary_mode() != KvCanaryMode::Off {
        if probed {
            sim.counters.canary_reads += canaried as u32;
        }
        sim.event(
            d.idx,
            6,
            "decode",
            "kv_canary",
            format!("{canaried} page(s) in the read set hold canary data"),
        );
        if sim.canary_mode() == KvCanaryMode::Raise {
            if probed && first {
                record_read(sim, &[], me);
                sim.trace.say(6, format!("--kv-canary=raise: {canaried} page(s) in the read set hold canary data; the request is aborted before attention reads them."));
            }
            finish(
                sim,
                d,
                500,
                "kv canary: read of a page holding canary data".into(),
                end,
            );
            return;
        }
        if probed && first {
            sim.trace.say(6, format!("--kv-canary=log logged {canaried} canary page(s) in the read set and let the read go on."));
        }
    }
    let q = model::query(1 + d.req.output_ids.len() as u64);
    let tags = sim.fix(Fix::PageTags).then(|| TagCheck {
        page_tags: sim.decode_pool.tags(),
        expected: me.tag(),
    });
    let result = sim.backend.attend(&PagedAttention {
        layout: sim.layout,
        kv: sim.decode_pool.kv(),
        page_table: &d.table,
        seq_len,
        q: &q,
        num_q_heads: 1,
        sm_scale: SM_SCALE,
        tags,
    });
    let out = match result {
        Ok(out) => out,
        Err(refused) => {
            if probed {
                if first {
                    let before = d.table[..refused.index].to_vec();
                    record_read(sim, &before, me);
                }
                sim.counters.tag_refusals += 1;
                sim.trace.say(
                    6,
                    format!(
                        "Page tags: {refused}. The read fails closed and the request is aborted."
                    ),
                );
            }
            sim.event(d.idx, 6, "decode", "tag_refused", refused.to_string());
            finish(
                sim,
                d,
                500,
                "KV page owner tag mismatch: refusing to read another request's page".into(),
                end,
            );
            return;
        }
    };
    if probed && first {
        let read = d.table[..used].to_vec();
        let foreign = record_read(sim, &read, me);
        sim.trace.say(6, format!(
            "Decode attention read {used} pages for {seq_len} positions; {foreign} of them were written by other requests{}.",
            if foreign > 0 { " — their KV is in this request's softmax" } else { "" }
        ));
    }
    let foreign = foreign_pages(sim, &d.table[..used], me);
    if probed && !first {
        let read = d.table[..used].to_vec();
        let new = note_foreign(sim, &read, me);
        if new > 0 {
            let step = d.req.output_ids.len() + 1;
            sim.trace.say(6, format!(
                "At decode step {step}, {new} page(s) of the read set held bytes another request wrote after the pages changed hands."
            ));
        }
    }
    let token = model::read_out(&out);
    // Append the new token's KV at position seq_len.
    let pos = seq_len;
    if pos / ps >= d.table.len() {
        match sim.decode_pool.alloc(1) {
            Some(p) => d.table.extend(p),
            None => {
                finish(sim, d, 500, "out of KV memory on decode".into(), end);
                return;
            }
        }
    }
    sim.decode_pool.write_slot(
        d.table[pos / ps],
        pos % ps,
        &k_code(pos as u64),
        &v_code(token),
        me,
    );
    d.req.output_ids.push(token);
    sim.event(
        d.idx,
        6,
        "decode",
        "step",
        format!(
            "step {}: attended {used} pages ({foreign} foreign), read out {:?}",
            d.req.output_ids.len(),
            model::decode(&[token])
        ),
    );
    if d.req.output_ids.len() as u32 >= d.req.max_new_tokens {
        d.req.to_finish = Some(FinishReason::Length {
            length: d.req.max_new_tokens,
        });
        d.req.update_finish_state();
        let text = model::decode(&d.req.output_ids);
        finish(sim, d, 200, text, end);
    } else {
        sim.decode.running_batch.push(d);
    }
}

/// Pages of `pages` whose bytes another request wrote.
fn foreign_pages(sim: &Sim, pages: &[u32], me: crate::pool::WriterId) -> usize {
    pages
        .iter()
        .filter(|&&p| sim.decode_pool.meta(p).writer.is_some_and(|w| w != me))
        .count()
}

/// Record what the probed request's first decode step actually read.
fn record_read(sim: &mut Sim, read: &[u32], me: crate::pool::WriterId) -> usize {
    let foreign = note_foreign(sim, read, me);
    sim.marks.read = read.to_vec();
    sim.trace.pages(6, sim.page_view(PoolSide::Decode));
    foreign
}

/// Add the foreign pages of one read to the probed request's tally; returns
/// how many pages of this read were newly found foreign.
fn note_foreign(sim: &mut Sim, read: &[u32], me: crate::pool::WriterId) -> usize {
    let before = sim.marks.foreign_seen.len();
    for &p in read {
        if sim.decode_pool.meta(p).writer.is_some_and(|w| w != me) {
            sim.marks.foreign_seen.insert(p);
        }
    }
    sim.marks.foreign_seen.len() - before
}

fn answer_of(req: &Req) -> (u16, String) {
    match req.effective_finish() {
        Some(FinishReason::Abort {
            message,
            status_code,
        }) => (*status_code, message.clone()),
        Some(r) => (r.status_code(), r.to_string()),
        None => (500, "finished without a reason".into()),
    }
}

/// Answer the client and give the pages back (or defer them).
fn finish(sim: &mut Sim, d: DReq, status: u16, text: String, at: u64) {
    let output = d.req.output_ids.clone();
    sim.release(PoolSide::Decode, d.req.bootstrap_room, d.table);
    sim.decode_answer(at, d.idx, status, text, output);
}
