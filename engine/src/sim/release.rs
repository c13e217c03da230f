//! Giving pages back: now, or once in-flight writes drained.
//!
//! Both workers free pages through here. [`policy::release_rule`] decides
//! whether the pages may return to the free list at once or must wait for
//! the room's writes to land and its drain ack (deferred release, SGLang PRs
//! #35049 / #40645 / #41402 / #41404, default-on per #41023). Freed pages
//! keep their bytes unless `scrub-on-free` is on; with `poison-on-free` they
//! are marked. Decode's deferral ends at
//! [`policy::DEFERRED_RELEASE_TIMEOUT_US`] even without the drain ack (PR
//! #35049): the release then happens without it and is recorded in
//! [`Sim::released_unacked`].

use kvw_evidence::{EventKind, Fix, PoisonMode, PoolSide, Worker};

use super::Sim;
use crate::policy::{self, Release};

/// Pages held back until their room drains.
#[derive(Debug, Clone)]
pub struct Deferred {
    pub req: u32,
    pub room: u64,
    pub pages: Vec<u32>,
    /// When the release was first deferred.
    pub since_us: u64,
}

impl Sim<'_> {
    /// Free `pages` of `side` that belonged to bootstrap `room`, or defer them.
    pub(super) fn release(&mut self, side: PoolSide, req: u32, room: u64, pages: Vec<u32>) {
        self.release_or_retry(
            side,
            Deferred {
                req,
                room,
                pages,
                since_us: self.now,
            },
            false,
        );
    }

    fn release_or_retry(&mut self, side: PoolSide, d: Deferred, retry: bool) {
        let Deferred {
            req,
            room,
            ref pages,
            since_us,
        } = d;
        if pages.is_empty() {
            return;
        }
        // A room nothing was posted to cannot receive a late write.
        let acked = self
            .channel
            .room(room)
            .is_none_or(|r| r.acked || r.posted == 0);
        let worker = match side {
            PoolSide::Prefill => Worker::Prefill,
            PoolSide::Decode => Worker::Decode,
        };
        // Decode cannot see one-sided RDMA writes land; it counts writes in
        // flight only through drain-ack targets that wait for them (PR
        // #40645), one per decode peer (PR #41402).
        let inflight = if self.doors.ack_waits_for_writes && self.doors.ack_every_peer {
            self.channel.inflight(room)
        } else {
            0
        };
        // Only decode's deferral has the release timeout (PR #35049 is the
        // decode-side release).
        let waited = self.now.saturating_sub(since_us);
        let rule = self.decide(|fixes| match side {
            PoolSide::Decode => policy::deferred_release_rule(inflight, acked, waited, fixes),
            PoolSide::Prefill => policy::release_rule(inflight, acked, fixes),
        });
        if rule == Release::Defer {
            if side == PoolSide::Decode {
                // Retry at the timeout, whatever else wakes decode first.
                self.wake_decode(since_us + policy::DEFERRED_RELEASE_TIMEOUT_US);
            }
            if retry {
                self.deferred[side as usize].push(d);
                return;
            }
        }
        self.record(
            req,
            EventKind::Release {
                worker,
                pages: pages.len() as u64,
                deferred: rule == Release::Defer,
            },
        );
        if rule == Release::TimedOut {
            self.released_unacked.push((req, worker));
        }
        match rule {
            Release::Now | Release::TimedOut => {
                let scrub = self.fix(Fix::ScrubOnFree);
                let canary = self.poison_mode() != PoisonMode::Off;
                let pool = match side {
                    PoolSide::Prefill => &mut self.prefill_pool,
                    PoolSide::Decode => &mut self.decode_pool,
                };
                if pool.free(pages, scrub, canary).is_err() {
                    self.counters.double_frees += 1;
                }
                let owners = match side {
                    PoolSide::Prefill => &mut self.prefill_owner,
                    PoolSide::Decode => &mut self.decode_owner,
                };
                for &p in pages {
                    if let Some(o) = owners.get_mut(p as usize) {
                        if *o == Some(req) {
                            *o = None;
                        }
                    }
                }
            }
            Release::Defer => self.deferred[side as usize].push(d),
        }
    }

    /// Retry every deferred release of `side`.
    pub(super) fn release_deferred(&mut self, side: PoolSide) {
        for d in std::mem::take(&mut self.deferred[side as usize]) {
            self.release_or_retry(side, d, true);
        }
    }
}
