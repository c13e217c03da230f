//! NULL (non-disaggregated) mode: one scheduler, no handoff.
//!
//! Upstream's `Scheduler._add_request_to_queue` enqueues a request rejected
//! by `validate_input_length` like any other; the one-token stub then costs
//! one cheap forward and the batch boundary (`update_finish_state`) turns
//! the pending rejection into the 400. PR #38935 deliberately leaves this
//! door alone ([`policy::null_mode_door`]): it is the disaggregated doors
//! that let the stub into a handoff. This module serves one request that way
//! on a real KV pool and records the same typed events as the PD workers.

use kvw_evidence::{DoorDecision, DoorName, Event, EventKind, Fix, RequestInfo, Scale, Worker};
use kvw_kernels::KvLayout;
use rand::SeedableRng;

use crate::attention::{self, k_code, v_code, HEAD_DIM};
use crate::policy::{self, Door, Doors, FixSet};
use crate::pool::{KvPool, WriterId};
use crate::req::{validate_input_length, Req};
use crate::trace::{req_state, Trace};

/// What serving one request in NULL mode recorded.
#[derive(Debug, Clone)]
pub struct NullRun {
    pub events: Vec<Event>,
    pub requests: Vec<RequestInfo>,
}

/// Serve one `prompt_len`-token request of a walkthrough-sized scheduler
/// (pool 112 tokens, input cap 106) in NULL mode.
pub fn serve(fixes: &[Fix], doors: &Doors, prompt_len: usize) -> NullRun {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(crate::scenarios::script::SEED);
    let canary = attention::canary("umbrella", &mut rng);
    let prompt = attention::document("umbrella", &canary, prompt_len, &mut rng);
    let preset = Scale::Walkthrough.preset();
    let (page_size, pool_tokens) = (preset.page_size, preset.prefill_pool_tokens);
    let cap = kvw_evidence::max_req_input_len(preset.context_len, pool_tokens);
    let layout = KvLayout {
        page_size: page_size as usize,
        num_kv_heads: 1,
        head_dim: HEAD_DIM,
    };
    let mut pool = KvPool::new(
        layout,
        (pool_tokens / page_size as u64) as usize,
        kvw_evidence::FreeListPolicy::Lifo,
    );
    let rid = "umbrella-1";
    let mut trace = Trace::new();
    let mut at = 0;
    let mut req = Req::new(rid, "umbrella", prompt.clone(), 8, 1000);
    let original = req.input_len();
    let rejection = validate_input_length(original, cap);
    trace.record(
        0,
        rid,
        at,
        EventKind::InputCheck {
            worker: Worker::Prefill,
            input_len: original as u64,
            cap,
            rejected: rejection.is_some(),
        },
    );
    if let Some(msg) = &rejection {
        req.set_finish_with_abort(msg, 400);
    }
    let door = policy::null_mode_door(&req, FixSet::new(fixes), doors);
    let decision = match door {
        Door::Retire => DoorDecision::Retired,
        Door::Admit | Door::DropFinished => DoorDecision::Admitted,
    };
    let state = req_state(&req, original, DoorName::PrefillWaitingQueue, decision);
    trace.record(
        0,
        rid,
        at,
        EventKind::Door {
            worker: Worker::Prefill,
            door: DoorName::PrefillWaitingQueue,
            state,
            decision,
        },
    );
    if door == Door::Admit {
        // The batch: a forward over the (stub) input, then the boundary.
        let n = req.input_len();
        let pages = pool
            .alloc(n.div_ceil(page_size as usize))
            .unwrap_or_default();
        let writer = WriterId {
            req: 0,
            generation: 0,
        };
        for pos in 0..n.min(pages.len() * page_size as usize) {
            let slot = pos % page_size as usize;
            let page = pages[pos / page_size as usize];
            pool.write_slot(
                page,
                slot,
                &k_code(pos as u64),
                &v_code(req.origin_input_ids[pos]),
                writer,
            );
        }
        at += 2_000;
        trace.record(
            0,
            rid,
            at,
            EventKind::Forward {
                from: 0,
                to: n as u64,
                pages: pages.len() as u64,
            },
        );
        let _ = pool.free(&pages, false, false);
        trace.record(
            0,
            rid,
            at,
            EventKind::Release {
                worker: Worker::Prefill,
                pages: pages.len() as u64,
                deferred: false,
            },
        );
    }
    req.update_finish_state();
    let (status, message) = super::prefill::answer_of(&req);
    trace.record(
        0,
        rid,
        at,
        EventKind::WorkerAnswer {
            worker: Worker::Prefill,
            status,
            finish_reason: message.clone(),
        },
    );
    trace.record(
        0,
        rid,
        at + 100,
        EventKind::Response {
            status,
            text: message,
        },
    );
    NullRun {
        events: trace.events,
        requests: vec![RequestInfo {
            rid: rid.into(),
            tenant: "umbrella".into(),
            prompt_len: prompt.len() as u64,
            canary,
            arrival_us: 0,
            probed: true,
        }],
    }
}
