//! `kvw fuzz`: randomized runs of the engine with the invariants checked
//! after every event (see `kvw_engine::fuzz`), spread over the cores.
//!
//! Prints runs per second. When a run breaks an invariant, the first such
//! run is shrunk and printed, and `--out DIR` writes it as a signed fuzz
//! receipt whose events a replay walks. Exits 0 with zero violations, 1
//! otherwise.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::bail;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kvw_engine::fuzz::{self, Invariant};
use kvw_evidence::scenario::{FuzzPredicate, InvariantCount};
use kvw_evidence::Fix;
use rayon::prelude::*;

use crate::check::FixArg;
use crate::gates::fixes_text as fix_list;
use crate::out::clean;

/// Most runs one command (or one `--reproduce`) may ask for: ten million,
/// about an hour and a half at the measured 2,000 runs/s on two cores.
pub const MAX_RUNS: u64 = 10_000_000;

#[derive(Debug, Args)]
pub struct FuzzArgs {
    /// Randomized runs (1 to 10000000).
    #[arg(long, default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=MAX_RUNS))]
    pub runs: u64,
    /// Seed of the runs.
    #[arg(long, default_value_t = kvw_engine::config::DEFAULT_SEED)]
    pub seed: u64,
    /// Fix switches: a comma list, `none` or `all`.
    #[arg(long, default_value = "all", value_parser = crate::check::parse_fix_arg)]
    pub fixes: FixArg,
    /// Write the result as a signed fuzz receipt into this folder (an
    /// existing receipt of the same name is refused unless --force).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub force: crate::write::ForceArg,
    /// Signing key file (default: the local key, created on first use).
    #[arg(long)]
    pub key: Option<PathBuf>,
}

/// The outcome of many runs.
pub struct Summary {
    pub predicate: FuzzPredicate,
    pub seconds: f64,
}

/// Counts over runs, merged across threads: memory stays constant however
/// many runs there are.
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

/// Run `runs` cases of `seed` with `fixes`; shrink the first failing one.
pub fn fuzz_runs(runs: u64, seed: u64, fixes: &[Fix], bar: &ProgressBar) -> Summary {
    let start = Instant::now();
    let tally = (0..runs)
        .into_par_iter()
        .fold(Tally::default, |t, i| {
            let r = fuzz::run_case(&fuzz::generate(seed, i), fixes);
            bar.inc(1);
            t.add(i, r.violation.map(|v| v.invariant), r.stalled)
        })
        .reduce(Tally::default, Tally::merge);
    let seconds = start.elapsed().as_secs_f64();
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
    let mut fixes = fixes.to_vec();
    fixes.sort();
    Summary {
        predicate: FuzzPredicate {
            engine: kvw_engine::probe::engine_info(),
            fixes,
            seed,
            runs,
            violating_runs: tally.violating,
            stalled_runs: tally.stalled,
            by_invariant,
            counterexample,
        },
        seconds,
    }
}

/// The file `kvw fuzz --out DIR` writes.
pub fn receipt_name(fixes: &[Fix], seed: u64) -> String {
    format!(
        "fuzz-fixes-{}-seed-{seed}.json",
        crate::gates::fix_label(fixes)
    )
}

pub fn run(args: FuzzArgs) -> anyhow::Result<()> {
    if args.seed > kvw_engine::config::MAX_SEED {
        bail!("--seed exceeds 2^53 - 1, the largest integer a receipt records exactly");
    }
    let fixes = &args.fixes.0;
    if let Some(dir) = &args.out {
        crate::write::check_new(&dir.join(receipt_name(fixes, args.seed)), args.force.force)?;
    }
    let bar = ProgressBar::new(args.runs);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs  {per_sec}  {elapsed_precise}")
    {
        bar.set_style(style);
    }
    let summary = fuzz_runs(args.runs, args.seed, fixes, &bar);
    bar.finish_and_clear();
    let p = &summary.predicate;
    outln!(
        "kvw fuzz — fixes {}; {} runs, seed {}: {} violating, {} stalled on a lost ack; {:.2} s, {:.0} runs/s",
        fix_list(fixes),
        p.runs,
        p.seed,
        p.violating_runs,
        p.stalled_runs,
        summary.seconds,
        p.runs as f64 / summary.seconds.max(1e-9)
    )?;
    for c in &p.by_invariant {
        outln!("  {:<24} {} run(s)", c.invariant, c.runs)?;
    }
    if let Some(c) = &p.counterexample {
        outln!(
            "shrunk run {} from {} to {} request(s): {} — {}",
            c.run,
            c.original_requests,
            c.requests.len(),
            c.invariant,
            clean(&c.detail)
        )?;
        for r in &c.requests {
            outln!(
                "  {} at {} µs, {} tokens{}{}{}",
                r.tenant,
                r.at_us,
                r.prompt_len,
                r.abort_after_us
                    .map(|a| format!(", client abort after {a} µs"))
                    .unwrap_or_default(),
                if r.reenters { ", re-enters" } else { "" },
                if r.faults.is_empty() {
                    String::new()
                } else {
                    format!(", faults {:?}", r.faults)
                }
            )?;
        }
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        let path = dir.join(receipt_name(fixes, args.seed));
        crate::probe::write_receipt(&path, args.key.as_deref(), p, args.force.force)?;
        eprintln!("signed receipt written to {}", path.display());
    }
    if p.violating_runs > 0 {
        bail!(
            "{} of {} runs broke an invariant with fixes {}",
            p.violating_runs,
            p.runs,
            fix_list(fixes)
        );
    }
    Ok(())
}
