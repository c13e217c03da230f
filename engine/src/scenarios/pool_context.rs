//! The pool / context gate: a configured context longer than a worker's KV
//! pool makes the reject path reachable by valid-looking prompts.
//!
//! SGLang computes each worker's input cap as
//! `min(context_len - 1, pool - 1) - 5` and never refuses a context longer
//! than the pool at start-up. [`capacity`] compares the two the way a
//! server's start-up log states them; the scenarios send a prompt inside
//! the context and beyond the pool, and the configuration answer.

use kvw_evidence::judged::{Breach, Outcome};
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
            upstream: None,
            guard: Guard {
                fixes: PATH_DEFENSES,
                rule: None,
            },
            record: Record::Fails,
            expects: || Outcome::RefusedBeyondPool { status: None },
            run: beyond_pool,
        },
        Scenario {
            name: "pool_at_least_context_takes_no_reject_path",
            gate: Gate::PoolContext,
            upstream: None,
            guard: Guard {
                fixes: &[],
                rule: None,
            },
            record: Record::HoldsVacuously,
            expects: || Outcome::ServedOwnText {
                door: None,
                status: 200,
            },
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
        ensure!(
            status.is_some(),
            Breach::ClientGot {
                rid: ran.rid(r),
                status: None,
                expected: None
            }
        );
        ensure!(
            status != Some(200),
            Breach::ClientGot200 { rid: ran.rid(r) }
        );
        let foreign = ran.foreign_reads(r);
        ensure!(
            foreign == 0,
            Breach::ForeignReads {
                rid: ran.rid(r),
                pages: foreign
            }
        );
        Ok(Outcome::RefusedBeyondPool { status })
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
        ensure!(rejected == 0, Breach::InputRejected { rid: ran.rid(r) });
        let status = ran.own_text(r, 8)?;
        Ok(Outcome::ServedOwnText { door: None, status })
    })
}
