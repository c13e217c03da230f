//! Skipping prefill iterations that cannot change anything.
//!
//! While its waiting queue waits for pages, the prefill event loop polls
//! every `prefill_fixed_us`. An iteration that records no event and starts
//! quiet ([`super::prefill::quiet`]) changed nothing; with resource events
//! on, every change an iteration makes is recorded. Until the next message
//! that is not a prefill iteration arrives, or a prefill timeout falls due,
//! every later poll sees the same state and changes nothing either. Such a
//! poll goes straight to the first point of its poll grid at or after that
//! message (the message runs first: it was queued before the poll), or to
//! the timeout when that comes first. Every poll that still runs runs at the
//! time it ran at before, so no event moves.
//!
//! Several poll chains may be queued at once (a wake earlier than the
//! queued poll adds one). Before the skip, the last chain to poll before the
//! next message left its successor, the latest of all, as the scheduler's
//! next wake; `Sim::idle_latest` keeps that latest successor across the
//! chains that skipped, so a wake compares with the same time as it did.

use super::{prefill, Msg, Sim};

impl Sim<'_> {
    /// Where the successor of an idle prefill iteration goes that would
    /// poll again at `at`: past every poll that could change nothing. The
    /// last poll at or before the horizon still runs, so the run ends at the
    /// time it ended at.
    pub(super) fn idle_poll_successor(&self, at: u64) -> u64 {
        let period = self.costs.prefill_fixed_us;
        if period == 0 || at != self.now + period {
            return at;
        }
        // The poll grid point `steps` periods on (at least one).
        let point = |steps: u64| self.now.saturating_add(period.saturating_mul(steps.max(1)));
        let mut to = point(self.horizon_us.saturating_sub(self.now) / period);
        if let Some(change) = self.queue.next_at_of(|m| *m != Msg::PrefillTick) {
            to = to.min(point(change.saturating_sub(self.now).div_ceil(period)));
        }
        if let Some(deadline) = prefill::deadline(self) {
            to = to.min(deadline);
        }
        to
    }
}
