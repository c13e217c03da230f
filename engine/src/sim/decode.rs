//! The decode worker: prealloc queue → transfer queue → running batch.
//!
//! Models `python/sglang/srt/disaggregation/decode.py`
//! (`DecodePreallocQueue` and its `_pre_alloc`, `DecodeTransferQueue`,
//! `event_loop_normal_disagg_decode`). Decode builds its own `Req` from the
//! request the router forwarded and runs its own input-length check against
//! its own pool; `_pre_alloc` reserves pages for `len(origin_input_ids)` —
//! the full prompt unless decode itself rejected it — and nothing later
//! compares that with what arrived.

use kvw_evidence::{
    DoorDecision, DoorName, EventKind, Fix, PoisonMode, PollResult, PoolSide, ResourceAction as RA,
    ResourceKind as RK, Worker,
};
use kvw_kernels::cpu::{self, PagedAttention};
use kvw_kernels::TagCheck;

use super::lookahead::{self, Lookahead};
use super::prefill::answer_of;
use super::Sim;
use crate::attention::{self, k_code, v_code, SM_SCALE};
use crate::policy::{self, Door, HandoffDecision, KvPoll, SessionEffect};
use crate::req::{FinishReason, Req};
use crate::trace::{ranges, req_state};

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
    /// The client aborted: `kv_receiver.abort()` was called.
    receiver_aborted: bool,
    /// Requeued by `retract_decode` (`add(..., is_retracted=True)`).
    requeued: bool,
    /// Decode's metadata buffer index (it lives on `DecodeRequest`, not `Req`).
    metadata: Option<u32>,
    /// Full prompt splits read ahead for the coming steps (CPU only).
    lookahead: Option<Box<Lookahead>>,
}

/// State of the decode scheduler.
#[derive(Debug, Clone, Default)]
pub struct DecodeWorker {
    prealloc_queue: Vec<DReq>,
    transfer_queue: Vec<DReq>,
    running_batch: Vec<DReq>,
    /// Retracted requests waiting to resume from their backup.
    retracted_queue: Vec<DReq>,
    busy_until: u64,
}

impl DecodeWorker {
    fn queues(&self) -> impl Iterator<Item = &DReq> {
        self.prealloc_queue
            .iter()
            .chain(&self.transfer_queue)
            .chain(&self.running_batch)
            .chain(&self.retracted_queue)
    }

    /// Whether request `idx` is in one of decode's queues.
    pub(super) fn holds(&self, idx: u32) -> bool {
        self.queues().any(|d| d.idx == idx)
    }

    /// Requests in decode's queues.
    pub(super) fn queued(&self) -> usize {
        self.queues().count()
    }
}

/// Record a door decision of decode, with the request's state it read.
fn door(sim: &mut Sim, d: &DReq, door: DoorName, decision: DoorDecision) {
    let state = req_state(&d.req, d.original_len, door, decision);
    sim.record(
        d.idx,
        EventKind::Door {
            worker: Worker::Decode,
            door,
            state,
            decision,
        },
    );
}

/// A request arrives from the router with the prompt the client sent;
/// decode's own input check runs against decode's own cap.
pub fn receive(sim: &mut Sim, i: u32) {
    let mut req = sim.entries[i as usize].req_on(false);
    let requeued = sim.entries[i as usize]
        .extras
        .reentry
        .as_ref()
        .is_some_and(|r| r.decode && r.requeued_by_retract);
    if req.retraction_backup.is_some() {
        sim.resource(i, Worker::Decode, RK::RetractionBackup, RA::Allocate, 0);
    }
    let original_len = req.input_len();
    let cap = sim.config.decode_input_cap();
    sim.check_input(i, &mut req, Worker::Decode, cap);
    sim.decode.prealloc_queue.push(DReq {
        req,
        idx: i,
        original_len,
        table: Vec::new(),
        waited_since: 0,
        has_receiver: false,
        receiver_aborted: false,
        requeued,
        metadata: None,
        lookahead: None,
    });
}

/// The client aborted request `i`: a queued request's receiver is aborted
/// (`kv_receiver.abort()`), a running one finishes at its next step.
pub fn client_abort(sim: &mut Sim, i: u32) {
    let w = &mut sim.decode;
    let abort = crate::req::FinishReason::Abort {
        message: super::ABORT_MESSAGE.into(),
        status_code: 503,
    };
    for d in w
        .prealloc_queue
        .iter_mut()
        .chain(w.transfer_queue.iter_mut())
        .filter(|d| d.idx == i)
    {
        if d.req.to_finish.is_none() && !d.req.finished() {
            d.req.to_finish = Some(abort.clone());
        }
        d.receiver_aborted = d.has_receiver;
    }
    for d in w.running_batch.iter_mut().filter(|d| d.idx == i) {
        if d.req.to_finish.is_none() && !d.req.finished() {
            d.req.to_finish = Some(abort.clone());
        }
    }
}

/// Retracted requests resume from their retraction backup; one that carries
/// a pending abort goes through normal cleanup instead: the backup is
/// discarded (`retraction_discard`) and the abort's status answered.
fn retracted(sim: &mut Sim) {
    for mut d in std::mem::take(&mut sim.decode.retracted_queue) {
        if d.req.to_finish.is_some() {
            d.req.update_finish_state();
            if d.req.retraction_backup.take().is_some() {
                sim.resource(d.idx, Worker::Decode, RK::RetractionBackup, RA::Free, 0);
            }
            let (status, message) = answer_of(&d.req);
            sim.decode_answer(sim.now, d.idx, status, message, Vec::new());
        } else {
            // Nothing to restore in this model: it re-enters through a receiver.
            d.requeued = false;
            sim.decode.prealloc_queue.push(d);
        }
    }
}

/// One iteration of the decode event loop. Returns when to run again.
pub fn tick(sim: &mut Sim) -> Option<u64> {
    if sim.now < sim.decode.busy_until {
        return Some(sim.decode.busy_until);
    }
    sim.release_deferred(PoolSide::Decode);
    retracted(sim);
    prealloc(sim);
    let mut next = transfer(sim);
    if !sim.decode.running_batch.is_empty() {
        let end = sim.now + sim.costs.decode_step_us;
        let running = std::mem::take(&mut sim.decode.running_batch);
        for d in running {
            decode_step(sim, d, end);
        }
        sim.decode.busy_until = end;
        next = Some(next.map_or(end, |n: u64| n.min(end)));
    }
    if !sim.decode.retracted_queue.is_empty() {
        let soon = sim.now + sim.costs.decode_step_us;
        next = Some(next.map_or(soon, |n: u64| n.min(soon)));
    }
    if !sim.decode.prealloc_queue.is_empty()
        && next.is_none()
        && !sim.decode.transfer_queue.is_empty()
    {
        next = Some(sim.now + sim.costs.decode_step_us);
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
        if !d.has_receiver
            && sim.decide(|fixes| policy::entry_door_with(&d.req, fixes, &sim.doors))
                == Door::Retire
        {
            door(
                sim,
                &d,
                DoorName::DecodePreallocQueue,
                DoorDecision::Retired,
            );
            if (sim.doors.session_effect)(d.req.session.as_ref()) == SessionEffect::DetachActiveSlot
            {
                sim.session_release(d.idx, RA::Detach);
            }
            d.req.update_finish_state();
            let (status, message) = answer_of(&d.req);
            sim.decode_answer(sim.now, d.idx, status, message, Vec::new());
            continue;
        }
        if !d.has_receiver && d.requeued {
            door(
                sim,
                &d,
                DoorName::DecodePreallocQueue,
                DoorDecision::Admitted,
            );
            sim.decode.retracted_queue.push(d);
            continue;
        }
        if !d.has_receiver {
            door(
                sim,
                &d,
                DoorName::DecodePreallocQueue,
                DoorDecision::Admitted,
            );
            d.has_receiver = true;
            if probed {
                sim.counters.receivers += 1;
            }
        }
        // `_pre_alloc`: reserve pages for decode's own `origin_input_ids`.
        let need = d.req.input_len().div_ceil(ps);
        let Some(table) = sim.decode_pool.alloc(need) else {
            blocked = true;
            sim.decode.prealloc_queue.push(d);
            continue;
        };
        for &page in &table {
            sim.decode_owner[page as usize] = Some(d.idx);
        }
        d.table = table;
        if let Some(slot) = sim.metadata[PoolSide::Decode as usize].alloc() {
            sim.resource(
                d.idx,
                Worker::Decode,
                RK::MetadataBuffer,
                if slot.collided {
                    RA::DoubleFree
                } else {
                    RA::Allocate
                },
                slot.index as u64,
            );
            d.metadata = Some(slot.index);
        }
        d.req.metadata_buffer_index = d.metadata.map(|m| m as usize);
        d.waited_since = sim.now;
        sim.register_receiver(d.req.bootstrap_room, d.table.clone());
        sim.wake_prefill(sim.now + sim.costs.hop_back_us);
        sim.record(
            d.idx,
            EventKind::Bootstrap {
                worker: Worker::Decode,
                room: d.req.bootstrap_room,
                metadata_buffer: d.req.metadata_buffer_index.unwrap_or(0) as u64,
            },
        );
        if probed {
            sim.counters.metadata_buffers += 1;
            sim.marks.reserved = d.table.clone();
        }
        sim.record_with_picture(
            d.idx,
            EventKind::Reserve {
                pages: ranges(&d.table),
                tokens: d.req.input_len() as u64,
            },
            PoolSide::Decode,
        );
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
        let poll = if d.receiver_aborted {
            KvPoll::Failed
        } else {
            sim.channel.poll(room)
        };
        let waited = sim.now - d.waited_since;
        if poll == KvPoll::Transferring && waited < timeout_us {
            let deadline = d.waited_since + timeout_us;
            next = Some(next.map_or(deadline, |n| n.min(deadline)));
            sim.decode.transfer_queue.push(d);
            continue;
        }
        sim.record(
            d.idx,
            EventKind::Poll {
                worker: Worker::Decode,
                result: match poll {
                    KvPoll::Transferring => PollResult::Transferring,
                    KvPoll::Success => PollResult::Success,
                    KvPoll::Failed => PollResult::Failed,
                },
            },
        );
        let checksum_ok = (sim.fix(Fix::KvChecksum) && poll == KvPoll::Success).then(|| {
            let covered = checksum_pages(sim, &d);
            sim.decode_pool.settle(&covered);
            let computed =
                cpu::adler32_pages(sim.layout, sim.decode_pool.kv_of(&covered), &covered);
            let expected = sim.channel.room(room).and_then(|r| r.checksum).unwrap_or(0);
            sim.record(
                d.idx,
                EventKind::ChecksumCheck {
                    expected,
                    computed,
                    pages: covered.len() as u64,
                },
            );
            expected == computed
        });
        let probed = sim.is_probed(d.idx);
        match policy::handoff_door(&d.req, poll, waited, timeout_us, checksum_ok) {
            HandoffDecision::Wait => sim.decode.transfer_queue.push(d),
            HandoffDecision::Admit => {
                sim.ack(room);
                sim.wake_prefill(sim.now + sim.costs.hop_back_us);
                door(
                    sim,
                    &d,
                    DoorName::DecodeTransferQueue,
                    DoorDecision::Admitted,
                );
                sim.decode.running_batch.push(d);
            }
            HandoffDecision::Abort {
                status,
                message,
                transfer_failure,
            } => {
                if probed && transfer_failure {
                    sim.counters.transfer_failures += 1;
                }
                door(
                    sim,
                    &d,
                    DoorName::DecodeTransferQueue,
                    DoorDecision::Aborted,
                );
                sim.record(
                    d.idx,
                    EventKind::Abort {
                        worker: Worker::Decode,
                        status,
                        message: message.clone(),
                    },
                );
                sim.ack(room);
                finish(sim, d, status, message, sim.now);
            }
        }
    }
    next
}

/// The pages decode's checksum covers (model assumption: `--checksum-scope`).
fn checksum_pages(sim: &Sim, d: &DReq) -> Vec<u32> {
    match sim.config.checksum_scope {
        kvw_evidence::ChecksumScope::Reserved => d.table.clone(),
        kvw_evidence::ChecksumScope::Received => {
            let written = sim
                .channel
                .room(d.req.bootstrap_room)
                .map_or(0, |r| r.landed);
            d.table[..written.min(d.table.len())].to_vec()
        }
    }
}

/// One decode step for one request: real paged attention, read-out, append KV.
fn decode_step(sim: &mut Sim, mut d: DReq, end: u64) {
    let ps = sim.config.page_size as usize;
    let probed = sim.is_probed(d.idx);
    let seq_len = d.req.seq_len();
    let used = seq_len.div_ceil(ps).min(d.table.len());
    let first = d.req.output_ids.is_empty();
    let me = sim.writer(d.idx, d.req.generation);
    let poisoned = d.table[..used]
        .iter()
        .filter(|&&p| sim.decode_pool.meta(p).canary)
        .count();
    if poisoned > 0 && sim.poison_mode() != PoisonMode::Off {
        if probed {
            sim.counters.poison_reads += poisoned as u32;
        }
        let mode = sim.poison_mode();
        sim.record(
            d.idx,
            EventKind::PoisonCheck {
                pages: poisoned as u64,
                mode,
            },
        );
        if mode == PoisonMode::Refuse {
            finish(
                sim,
                d,
                500,
                "poison-on-free: read of a freed page refused".into(),
                end,
            );
            return;
        }
    }
    let q = attention::query(1 + d.req.output_ids.len() as u64);
    let read = PagedAttention {
        layout: sim.layout,
        kv: &[],
        page_table: &d.table,
        seq_len,
        q: &q,
        num_q_heads: 1,
        sm_scale: SM_SCALE,
        tags: None,
    };
    // Page tags change nothing where every page read is the reader's own;
    // where one is not, the read stops there and reads no bytes at all.
    let foreign_tag = cpu::check_tags(&PagedAttention {
        tags: Some(tag_check(&sim.decode_pool, me)),
        ..read
    })
    .is_err();
    let tagged = sim.fix_where(Fix::PageTags, || foreign_tag);
    let reads = if tagged && foreign_tag {
        &[][..]
    } else {
        &d.table[..used]
    };
    sim.decode_pool.settle(reads);
    let pool = &sim.decode_pool;
    let attend = PagedAttention {
        kv: pool.kv_of(reads),
        tags: tagged.then(|| tag_check(pool, me)),
        ..read
    };
    let result = lookahead::attend(
        sim.backend,
        &sim.decode_pool,
        &mut d.lookahead,
        &attend,
        d.req.output_ids.len(),
        d.req.max_new_tokens as usize,
    );
    let out = match result {
        Ok(out) => out,
        Err(refused) => {
            if probed {
                if first {
                    sim.marks.read = d.table[..refused.index].to_vec();
                }
                sim.counters.tag_refusals += 1;
            }
            sim.record_with_picture(
                d.idx,
                EventKind::TagRefused {
                    index: refused.index as u64,
                    page: d.table[refused.index] as u64,
                },
                PoolSide::Decode,
            );
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
    let read = d.table[..used].to_vec();
    let foreign = foreign_pages(sim, &read, me);
    if probed {
        for &p in &read {
            if sim.decode_pool.meta(p).writer.is_some_and(|w| w != me) {
                sim.marks.foreign_seen.insert(p);
            }
        }
        if first {
            sim.marks.read = read;
        }
    }
    let token = attention::read_out(&out);
    let kind = EventKind::Attend {
        decode_step: d.req.output_ids.len() as u32 + 1,
        pages: used as u64,
        foreign_pages: foreign as u64,
        token,
    };
    if first {
        sim.record_with_picture(d.idx, kind, PoolSide::Decode);
    } else {
        sim.record(d.idx, kind);
    }
    // Append the new token's KV at position seq_len.
    let pos = seq_len;
    if pos / ps >= d.table.len() {
        match sim.decode_pool.alloc(1) {
            Some(p) => {
                for &page in &p {
                    sim.decode_owner[page as usize] = Some(d.idx);
                }
                d.table.extend(p)
            }
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
    // The step's result: a pending abort (decode's own rejection) is
    // applied now and answers with its status; otherwise the length limit.
    if d.req.to_finish.is_none() && d.req.output_ids.len() as u32 >= d.req.max_new_tokens {
        d.req.to_finish = Some(FinishReason::Length {
            length: d.req.max_new_tokens,
        });
    }
    d.req.update_finish_state();
    match d.req.finished_reason.clone() {
        Some(FinishReason::Length { .. }) => {
            let text = attention::decode(&d.req.output_ids);
            finish(sim, d, 200, text, end);
        }
        Some(FinishReason::Abort {
            message,
            status_code,
        }) => finish(sim, d, status_code, message, end),
        None => sim.decode.running_batch.push(d),
    }
}

/// The owner-tag check of a read by `reader`.
fn tag_check(pool: &crate::pool::KvPool, reader: crate::pool::WriterId) -> TagCheck<'_> {
    TagCheck {
        page_tags: pool.tags(),
        expected: reader.tag(),
    }
}

/// Pages of `pages` whose bytes another request wrote.
fn foreign_pages(sim: &Sim, pages: &[u32], me: crate::pool::WriterId) -> usize {
    pages
        .iter()
        .filter(|&&p| sim.decode_pool.meta(p).writer.is_some_and(|w| w != me))
        .count()
}

/// Answer the router and give the pages back (or defer them).
fn finish(sim: &mut Sim, mut d: DReq, status: u16, text: String, at: u64) {
    let output = d.req.output_ids.clone();
    if let Some(index) = d.metadata.take() {
        let held = sim.metadata[PoolSide::Decode as usize].free(index);
        let action = if held { RA::Free } else { RA::DoubleFree };
        sim.resource(
            d.idx,
            Worker::Decode,
            RK::MetadataBuffer,
            action,
            index as u64,
        );
    }
    if d.req.retraction_backup.take().is_some() {
        sim.resource(d.idx, Worker::Decode, RK::RetractionBackup, RA::Free, 0);
    }
    sim.release(PoolSide::Decode, d.idx, d.req.bootstrap_room, d.table);
    sim.decode_answer(at, d.idx, status, text, output);
}
