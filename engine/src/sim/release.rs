//! Giving pages back: now, or once in-flight writes drained.
//!
//! Both workers free pages through here. [`policy::release_rule`] decides
//! whether the pages may return to the free list at once or must wait for
//! the room's writes to land and its drain ack (deferred release, SGLang PRs
//! #35049 / #40645 / #41404). Freed pages keep their bytes unless
//! `scrub-on-free` is on; with `--kv-canary` they are marked.

use kvw_evidence::{Fix, KvCanaryMode, PoolSide};

use super::Sim;
use crate::policy::{self, Release};

/// Pages held back until their room drains.
#[derive(Debug, Clone)]
pub struct Deferred {
    pub room: u64,
    pub pages: Vec<u32>,
}

impl Sim<'_> {
    /// Free `pages` of `side` that belonged to bootstrap `room`, or defer them.
    pub(super) fn release(&mut self, side: PoolSide, room: u64, pages: Vec<u32>) {
        if pages.is_empty() {
            return;
        }
        // A room nothing was posted to cannot receive a late write.
        let acked = self
            .channel
            .room(room)
            .is_none_or(|r| r.acked || r.posted == 0);
        match policy::release_rule(self.channel.inflight(room), acked, self.fixes) {
            Release::Now => {
                let scrub = self.fix(Fix::ScrubOnFree);
                let canary = self.canary_mode() != KvCanaryMode::Off;
                let pool = match side {
                    PoolSide::Prefill => &mut self.prefill_pool,
                    PoolSide::Decode => &mut self.decode_pool,
                };
                if pool.free(&pages, scrub, canary).is_err() {
                    self.counters.double_frees += 1;
                }
            }
            Release::Defer => self.deferred[side as usize].push(Deferred { room, pages }),
        }
    }

    /// Retry every deferred release of `side`.
    pub(super) fn release_deferred(&mut self, side: PoolSide) {
        for d in std::mem::take(&mut self.deferred[side as usize]) {
            self.release(side, d.room, d.pages);
        }
    }
}
