//! One warm-up, several continuations.
//!
//! The rows of the fix matrix at one scale share their seed, and so their
//! arrivals; in the incident's script every request before the probed one
//! is an ordinary request that no door rejects and nobody aborts. Several
//! switches act only on a request like the probed one (#36988 on an
//! aborted result, #38935 on a rejected request that holds nothing, page
//! tags on a read of another request's page), so rows that differ only in
//! those switches run the same warm-up, event for event and byte for byte.
//! [`crate::probe::run_many`] runs that warm-up once, with those switches
//! off, up to the probed request's arrival, and continues it once per row.
//!
//! That the warm-up did not depend on them is checked, not assumed: while
//! it runs, the simulator [watches](Watch) the switches, and every
//! decision that reads one either tells the watch (`Sim::fix`,
//! `Sim::fix_where`) or is taken again with each combination of them on
//! (`Sim::decide`). A warm-up whose decisions would have differed is not
//! continued; its rows run from the start. The pools' bytes are not
//! copied: each continuation works on the warm-up's bytes and gives them
//! back as they were ([`KvPool::lend`](crate::pool::KvPool::lend)), so the
//! continuations of one warm-up run one after the other.

use std::cell::Cell;

use kvw_evidence::{Fix, FixSet, ProbeConfig};

use super::Sim;

/// The switches a warm-up runs without while runs that turn them on will
/// continue from it, and whether any decision so far depended on them.
#[derive(Debug, Clone)]
pub struct Watch {
    switches: FixSet,
    depended: Cell<bool>,
}

impl Watch {
    pub(super) fn watches(&self, f: Fix) -> bool {
        self.switches.has(f)
    }

    /// Switch `f` was asked for where its answer matters.
    pub(super) fn consulted(&self, f: Fix) {
        if self.watches(f) {
            self.depended.set(true);
        }
    }

    /// `answer` was decided with `fixes` on: decide again with each
    /// combination of the watched switches added.
    pub(super) fn compare<T: PartialEq>(
        &self,
        fixes: FixSet,
        answer: &T,
        decide: impl Fn(FixSet) -> T,
    ) {
        if self.depended.get() {
            return;
        }
        let differs = FixSet::every()
            .filter(|extra| extra.list().iter().all(|&f| self.switches.has(f)))
            .any(|extra| decide(extra.list().into_iter().fold(fixes, FixSet::with)) != *answer);
        if differs {
            self.depended.set(true);
        }
    }
}

/// Switches whose only effect is on a request that a door rejects, whose
/// prefill result is aborted, or that reads another request's page: a
/// warm-up of ordinary requests is the same with or without them.
pub const FORKABLE: [Fix; 3] = [
    Fix::RetireAbortedPrefillResult,
    Fix::RetireUnadmittedReject,
    Fix::PageTags,
];

/// `config` with the [`FORKABLE`] switches off: what the warm-up of every
/// row that differs from it only in those switches runs with.
pub fn warm_up_config(config: &ProbeConfig) -> ProbeConfig {
    let mut warm = config.clone();
    warm.fixes.retain(|f| !FORKABLE.contains(f));
    warm
}

impl<'b> Sim<'b> {
    /// Start watching the [`FORKABLE`] switches (off in this run).
    pub fn watch_forkable(&mut self) {
        debug_assert!(FORKABLE.iter().all(|&f| !self.fixes.has(f)));
        self.watch = Some(Watch {
            switches: FixSet::new(&FORKABLE),
            depended: Cell::new(false),
        });
    }

    /// Whether a decision so far depended on a watched switch (false
    /// when nothing is watched).
    pub fn depended_on_watched(&self) -> bool {
        self.watch.as_ref().is_some_and(|w| w.depended.get())
    }

    /// The run as it would be had `config` been its configuration from the
    /// start, given that it differs from this run's only in watched
    /// switches this run never depended on. The fork works on this run's
    /// pool bytes until [`Sim::join`] gives them back; this run holds none
    /// meanwhile.
    pub fn fork(&mut self, config: ProbeConfig) -> Sim<'b> {
        assert!(
            self.watch.is_some() && !self.depended_on_watched(),
            "only a watched run that never depended on its watched switches forks"
        );
        debug_assert_eq!(warm_up_config(&config), warm_up_config(&self.config));
        let fixes = FixSet::new(&config.fixes);
        Sim {
            backend: self.backend,
            now: self.now,
            config,
            fixes,
            watch: None,
            layout: self.layout,
            prefill_pool: self.prefill_pool.lend(),
            decode_pool: self.decode_pool.lend(),
            channel: self.channel.clone(),
            entries: self.entries.clone(),
            trace: self.trace.clone(),
            counters: self.counters.clone(),
            marks: self.marks.clone(),
            costs: self.costs,
            doors: self.doors,
            horizon_us: self.horizon_us,
            resource_events: self.resource_events,
            skip_idle_polls: self.skip_idle_polls,
            metadata: self.metadata.clone(),
            mamba: self.mamba.clone(),
            sessions: self.sessions.clone(),
            decode_owner: self.decode_owner.clone(),
            prefill_owner: self.prefill_owner.clone(),
            stale_writes: self.stale_writes.clone(),
            released_unacked: self.released_unacked.clone(),
            prefill_cached: self.prefill_cached.clone(),
            deferred: self.deferred.clone(),
            prefill: self.prefill.clone(),
            decode: self.decode.clone(),
            queue: self.queue.clone(),
            prefill_tick_at: self.prefill_tick_at,
            idle_latest: self.idle_latest,
            decode_tick_at: self.decode_tick_at,
            role: self.role,
            outbox: self.outbox.clone(),
            room_index: self.room_index.clone(),
        }
    }

    /// Take back the pool bytes lent to `fork`, as they were.
    pub fn join(&mut self, fork: Sim<'_>) {
        self.prefill_pool.take_back(fork.prefill_pool);
        self.decode_pool.take_back(fork.decode_pool);
    }
}

#[cfg(test)]
mod tests {
    use kvw_evidence::{Fix, FixSet, PoisonMode, Scale};

    use crate::backend::Backend;
    use crate::config::{ProbeSpec, ValidConfig};
    use crate::probe;

    fn config(prefill_pool: Option<u64>, fixes: &[Fix]) -> ValidConfig {
        ProbeSpec {
            prefill_pool_tokens: prefill_pool,
            poison_on_free: PoisonMode::Off,
            ..ProbeSpec::new(Scale::Walkthrough, FixSet::new(fixes))
        }
        .validate()
        .unwrap()
    }

    /// A warm-up of ordinary requests depends on no forkable switch, and
    /// every continuation of it signs what a run from the start signs; the
    /// bytes lent to each continuation come back unchanged. A configuration
    /// that does not share the warm-up runs from the start.
    #[test]
    fn continuations_of_an_ordinary_warm_up_sign_what_runs_from_the_start_sign() {
        let backend = Backend::Cpu;
        let base = config(None, &[]);
        let mut kept = probe::WarmUp::run(&base, &backend).expect("an ordinary warm-up is kept");
        let bytes = |kept: &probe::WarmUp| {
            let (p, d) = (&kept.sim.prefill_pool, &kept.sim.decode_pool);
            (p.kv_of(&[]).to_vec(), d.kv_of(&[]).to_vec())
        };
        let before = bytes(&kept);
        for fixes in [
            &[][..],
            &[Fix::RetireAbortedPrefillResult],
            &[Fix::RetireUnadmittedReject, Fix::PageTags],
            &[Fix::ScrubOnFree, Fix::PageTags],
        ] {
            let row = config(None, fixes);
            assert_eq!(kept.probe(&row), probe::run_on(&row, &backend), "{fixes:?}");
            assert!(
                bytes(&kept) == before,
                "{fixes:?}: the lent bytes came back changed"
            );
        }
    }

    /// With a prefill pool smaller than the earlier tenants' prompts, the
    /// warm-up itself meets the rejection #38935 acts on: the watch says so,
    /// and the warm-ups with and without the switch are indeed different
    /// runs (so a continuation of one would sign the wrong facts).
    #[test]
    fn a_warm_up_that_meets_a_rejection_is_not_continued() {
        let backend = Backend::Cpu;
        let small = config(Some(64), &[]);
        assert!(probe::WarmUp::run(&small, &backend).is_none());
        let with = config(Some(64), &[Fix::RetireUnadmittedReject]);
        let events = |c: &ValidConfig| {
            let p = probe::run_on(c, &backend).unwrap();
            let probed = p.requests.iter().find(|r| r.probed).unwrap().rid.clone();
            p.events
                .into_iter()
                .filter(|e| e.rid != probed)
                .collect::<Vec<_>>()
        };
        assert_ne!(events(&small), events(&with));
        // Both still give what their runs from the start give.
        let results = probe::run_many(&[small.clone(), with.clone()], &|_| {});
        assert_eq!(
            results[0].as_ref().unwrap(),
            &probe::run_on(&small, &backend).unwrap()
        );
        assert_eq!(
            results[1].as_ref().unwrap(),
            &probe::run_on(&with, &backend).unwrap()
        );
    }
}
