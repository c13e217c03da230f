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

#[derive(Debug, Args)]
pub struct FuzzArgs {
    /// Randomized runs.
    #[arg(long, default_value_t = 1000)]
    pub runs: u64,
    /// Seed of the runs.
    #[arg(long, default_value_t = kvw_engine::config::DEFAULT_SEED)]
    pub seed: u64,
    /// Fix switches: a comma list, `none` or `all`.
    #[arg(long, default_value = "all", value_parser = crate::check::parse_fix_arg)]
    pub fixes: FixArg,
    /// Write the result as a signed fuzz receipt into this folder.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Signing key file (default: the local key, created on first use).
    #[arg(long)]
    pub key: Option<PathBuf>,
}

/// The outcome of many runs.
pub struct Summary {
    pub predicate: FuzzPredicate,
    pub seconds: f64,
}

/// Run `runs` cases of `seed` with `fixes`; shrink the first failing one.
pub fn fuzz_runs(runs: u64, seed: u64, fixes: &[Fix], bar: &ProgressBar) -> Summary {
    let start = Instant::now();
    let results: Vec<(u64, Option<Invariant>, bool)> = (0..runs)
        .into_par_iter()
        .map(|i| {
            let r = fuzz::run_case(&fuzz::generate(seed, i), fixes);
            bar.inc(1);
            (i, r.violation.map(|v| v.invariant), r.stalled)
        })
        .collect();
    let seconds = start.elapsed().as_secs_f64();
    let violating: Vec<_> = results.iter().filter(|r| r.1.is_some()).collect();
    let by_invariant = Invariant::ALL
        .into_iter()
        .map(|inv| InvariantCount {
            invariant: inv.name().into(),
            runs: violating.iter().filter(|r| r.1 == Some(inv)).count() as u64,
        })
        .filter(|c| c.runs > 0)
        .collect();
    let counterexample = violating.first().and_then(|&&(i, inv, _)| {
        let case = fuzz::generate(seed, i);
        let small = fuzz::shrink(&case, fixes, inv?);
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
            violating_runs: violating.len() as u64,
            stalled_runs: results.iter().filter(|r| r.2).count() as u64,
            by_invariant,
            counterexample,
        },
        seconds,
    }
}

pub fn run(args: FuzzArgs) -> anyhow::Result<()> {
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if args.seed > kvw_engine::config::MAX_SEED {
        bail!("--seed exceeds 2^53 - 1, the largest integer a receipt records exactly");
    }
    let fixes = &args.fixes.0;
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
        let name = format!(
            "fuzz-fixes-{}-seed-{}.json",
            crate::gates::fix_label(fixes),
            args.seed
        );
        let path = dir.join(name);
        crate::probe::write_receipt(&path, args.key.as_deref(), p)?;
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
