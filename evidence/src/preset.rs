//! The sizes a probe starts from and the input cap they imply: the one
//! table of each scale's numbers and the one computation of SGLang's
//! `max_req_input_len`, shared by the engine, receipts and pages.

use crate::predicate::Scale;

/// SGLang's per-request input cap, `max_req_input_len`:
/// `min(context_len - 1, pool - 1) - 5`. Context length is never rejected
/// at start-up for exceeding the pool, so a request can be within the
/// context and above this cap. The one computation of it.
pub fn max_req_input_len(context_len: u64, pool_tokens: u64) -> u64 {
    context_len
        .saturating_sub(1)
        .min(pool_tokens.saturating_sub(1))
        .saturating_sub(5)
}

/// The one page count the record states: decode reserved eight pages and
/// read all of them (the walkthrough's sizes reproduce it). Any other
/// count a run shows, such as the incident scale's 10,646 pages of 64
/// tokens, follows from sizes the record does not give.
pub const DISCLOSED_RESERVED_PAGES: u64 = 8;

/// The sizes a probe at a [`Scale`] starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub context_len: u64,
    pub prefill_pool_tokens: u64,
    pub decode_pool_tokens: u64,
    pub page_size: u32,
    pub max_new_tokens: u32,
}

impl Scale {
    /// The sizes of this scale, the one table of them.
    pub const fn preset(self) -> Preset {
        match self {
            // 8 reserved pages of 16 tokens for a 128-token prompt.
            Scale::Walkthrough => Preset {
                context_len: 256,
                prefill_pool_tokens: 112,
                decode_pool_tokens: 256,
                page_size: 16,
                max_new_tokens: 24,
            },
            // The disclosed production numbers; the decode pool holding the
            // whole context is a model assumption.
            Scale::Incident => Preset {
                context_len: 1_048_576,
                prefill_pool_tokens: 681_280,
                decode_pool_tokens: 1_048_576,
                page_size: 64,
                max_new_tokens: 20,
            },
        }
    }
}
