//! The pool / context gate: a configured context longer than a worker's KV
//! pool makes the reject path reachable by valid-looking prompts.
//!
//! SGLang computes each worker's input cap as
//! `min(context_len - 1, pool - 1) - 5` and never refuses a context longer
//! than the pool at start-up. [`capacity`] compares the two the way a
//! server's start-up log states them; the scenarios send a prompt inside
//! the context and beyond the pool, and the configuration answer.

use super::words;
use kvw_evidence::{EventKind, Fix, ProbeConfig};

use super::script::{judge, Script};
use super::{Gate, Guard, Observed, Record, Scenario, Setup};
use crate::ensure;
use crate::sim::Extras;

/// One worker's pool against the configured context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capacity {
    pub worker: &'static str,
    pub context_len: u64,
    pub pool_tokens: u64,
    /// The per-request input cap derived from both.
    pub max_req_input_len: u64,
    /// Prompts within the context but over the cap exist.
    pub reject_path_reachable: bool,
}

/// Both workers' pools against the context of `c`.
pub fn capacity(c: &ProbeConfig) -> Vec<Capacity> {
    [
        ("prefill", c.prefill_pool_tokens),
        ("decode", c.decode_pool_tokens),
    ]
    .into_iter()
    .map(|(worker, pool_tokens)| {
        let cap = c.input_cap(pool_tokens);
        Capacity {
            worker,
            context_len: c.context_len,
            pool_tokens,
            max_req_input_len: cap,
            reject_path_reachable: cap < c.context_len.saturating_sub(6),
        }
    })
    .collect()
}

/// The defenses each of which keeps the over-pool prompt from a 200 (see
/// the fix matrix in the README).
const PATH_DEFENSES: &[Fix] = &[
    Fix::RetireAbortedPrefillResult,
    Fix::RetireUnadmittedReject,
    Fix::KvChecksum,
    Fix::PageTags,
];

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "context_beyond_pool_is_never_answered_200",
            gate: Gate::PoolContext,
            description: "context 256, prefill pool 112 (cap 106): a 128-token prompt within the context is never answered 200 and reads no foreign page",
            upstream: None,
            guard: Guard {
                fixes: PATH_DEFENSES,
                rule: None,
            },
            closed_by: "PRs #36988, #38935, #39500 and read-time page tags (each alone)",
            record: Record::Fails,
            expects: "an error status, no foreign page read",
            run: beyond_pool,
        },
        Scenario {
            name: "pool_at_least_context_takes_no_reject_path",
            gate: Gate::PoolContext,
            description: "the configuration answer: a prefill pool as large as the context admits the same prompt and serves it correctly",
            upstream: None,
            guard: Guard {
                fixes: &[],
                rule: None,
            },
            closed_by: "configuration (prefill pool ≥ context)",
            record: Record::HoldsVacuously,
            expects: "no input rejection; 200 with its own text",
            run: pool_covers_context,
        },
    ]
}

fn beyond_pool(setup: &Setup) -> Observed {
    let mut s = Script::with_prefill_pool(setup, 112);
    s.request("globex", 0, 60, Extras::default());
    s.request("acme", 500_000, 100, Extras::default());
    let r = s.request("umbrella", 1_000_000, 128, Extras::default());
    judge(s.run(), |ran| {
        let status = ran.status(r);
        ensure!(status.is_some(), "never answered");
        ensure!(
            status != Some(200),
            "answered 200 to a prompt beyond the pool"
        );
        let foreign = ran.foreign_reads(r);
        ensure!(foreign == 0, "decode attended to {foreign} foreign page(s)");
        Ok(format!("answered {}", status.unwrap_or(0)))
    })
}

fn pool_covers_context(setup: &Setup) -> Observed {
    let mut s = Script::with_prefill_pool(setup, 256);
    s.request("globex", 0, 60, Extras::default());
    let r = s.request("umbrella", 1_000_000, 128, Extras::default());
    judge(s.run(), |ran| {
        let rejected = ran.count(r, |k| {
            matches!(k, EventKind::InputCheck { rejected: true, .. })
        });
        ensure!(rejected == 0, "the input check rejected the prompt");
        let want = ran.want(r, 8);
        let got = ran.responses[r as usize].as_ref();
        ensure!(
            got.is_some_and(|g| g.status == 200 && g.text == want),
            "answered {}, not 200 with its own text",
            words::status(got.map(|g| g.status))
        );
        Ok("admitted and answered 200 with its own text".into())
    })
}
