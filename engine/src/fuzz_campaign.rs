//! Many fuzz runs at once: [`campaign`] spreads `runs` generated cases
//! (see [`crate::fuzz`]) over the machine's cores, counts what broke which
//! invariant, shrinks the lowest-numbered violating run and returns the
//! fuzz receipt's predicate. Memory stays constant however many runs there
//! are, and the result does not depend on the core count.

use std::time::Instant;

use kvw_evidence::scenario::{FuzzPredicate, InvariantCount};
use kvw_evidence::{Fix, FixSet};
use rayon::prelude::*;

use crate::fuzz::{self, Invariant};

/// Most runs one campaign (or one `--reproduce`) may ask for: ten million,
/// about an hour and a half at the measured 2,000 runs/s on two cores.
pub const MAX_RUNS: u64 = 10_000_000;

/// The outcome of a campaign.
pub struct Summary {
    pub predicate: FuzzPredicate,
    /// Wall time of the runs and the shrinking.
    pub seconds: f64,
}

/// Counts over runs, merged across threads.
#[derive(Default)]
struct Tally {
    violating: u64,
    stalled: u64,
    by_invariant: [u64; Invariant::ALL.len()],
    /// The lowest-numbered violating run and what it broke.
    first: Option<(u64, Invariant)>,
}

/// Where `inv` is counted in [`Tally::by_invariant`].
fn slot(inv: Invariant) -> usize {
    Invariant::ALL.iter().position(|&i| i == inv).unwrap_or(0)
}

impl Tally {
    fn add(mut self, i: u64, violation: Option<Invariant>, stalled: bool) -> Tally {
        self.stalled += stalled as u64;
        if let Some(inv) = violation {
            self.violating += 1;
            self.by_invariant[slot(inv)] += 1;
            if self.first.is_none_or(|(j, _)| i < j) {
                self.first = Some((i, inv));
            }
        }
        self
    }

    fn merge(mut self, o: Tally) -> Tally {
        self.violating += o.violating;
        self.stalled += o.stalled;
        for (a, b) in self.by_invariant.iter_mut().zip(o.by_invariant) {
            *a += b;
        }
        self.first = match (self.first, o.first) {
            (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
            (a, b) => a.or(b),
        };
        self
    }
}

/// Run `runs` cases of `seed` with `fixes`, calling `progress` after each
/// run; shrink the first failing one into the predicate's counterexample.
pub fn campaign(runs: u64, seed: u64, fixes: &[Fix], progress: &(dyn Fn() + Sync)) -> Summary {
    let start = Instant::now();
    let tally = (0..runs)
        .into_par_iter()
        .fold(Tally::default, |t, i| {
            let r = fuzz::run_case(&fuzz::generate(seed, i), fixes);
            progress();
            t.add(i, r.violation.map(|v| v.invariant), r.stalled)
        })
        .reduce(Tally::default, Tally::merge);
    let by_invariant = Invariant::ALL
        .into_iter()
        .map(|inv| InvariantCount {
            invariant: inv.name().into(),
            runs: tally.by_invariant[slot(inv)],
        })
        .filter(|c| c.runs > 0)
        .collect();
    let counterexample = tally.first.and_then(|(i, inv)| {
        let case = fuzz::generate(seed, i);
        let small = fuzz::shrink(&case, fixes, inv);
        fuzz::counterexample(i, &case, &small, fixes)
    });
    Summary {
        predicate: FuzzPredicate {
            engine: crate::probe::engine_info(),
            fixes: FixSet::canonical(fixes),
            seed,
            runs,
            violating_runs: tally.violating,
            stalled_runs: tally.stalled,
            by_invariant,
            counterexample,
        },
        seconds: start.elapsed().as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn a_campaign_counts_every_run_and_finds_the_prefix_leak_without_fixes() {
        let seen = AtomicU64::new(0);
        let none = campaign(200, 3, &[], &|| {
            seen.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(seen.load(Ordering::Relaxed), 200);
        assert_eq!(none.predicate.runs, 200);
        assert!(
            none.predicate.violating_runs > 0,
            "no fixes: some run breaks an invariant"
        );
        assert!(none.predicate.counterexample.is_some());
        let all = campaign(200, 3, &Fix::ALL, &|| {});
        assert_eq!(all.predicate.violating_runs, 0);
        assert_eq!(all.predicate.fixes, Fix::ALL);
    }
}
