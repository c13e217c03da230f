//! `kvw fuzz`: randomized runs of the engine with the invariants checked
//! after every event (see `kvw_engine::fuzz`), spread over the cores.
//!
//! Prints runs per second. When a run breaks an invariant, the first such
//! run is shrunk and printed, and `--out DIR` writes it as a signed fuzz
//! receipt whose events a replay walks. Exits 0 with zero violations, 1
//! otherwise.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kvw_engine::fuzz_campaign::{campaign, Summary, MAX_RUNS};
use kvw_evidence::{receipt_name, Fix, FixSet};

use crate::out::clean;
use crate::sign::SignArgs;

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
    #[arg(long, default_value = "all")]
    pub fixes: FixSet,
    /// Write the result as a signed fuzz receipt into this folder (an
    /// existing receipt of the same name is refused unless --force).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub sign: SignArgs,
}

/// [`campaign`] with a progress bar on the terminal.
pub fn fuzz_runs(runs: u64, seed: u64, fixes: &[Fix], bar: &ProgressBar) -> Summary {
    campaign(runs, seed, fixes, &|| bar.inc(1))
}

pub fn run(args: FuzzArgs) -> anyhow::Result<()> {
    if args.seed > kvw_engine::config::MAX_SEED {
        bail!("--seed exceeds 2^53 - 1, the largest integer a receipt records exactly");
    }
    let set = args.fixes;
    let fixes = &set.list();
    let name = receipt_name::fuzz(set, args.seed);
    if let Some(dir) = &args.out {
        crate::write::check_new(&dir.join(&name), args.sign.force())?;
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
        set,
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
        let path = dir.join(&name);
        crate::probe::write_receipt(&path, args.sign.key(), p, args.sign.force())?;
        eprintln!("signed receipt written to {}", path.display());
    }
    if p.violating_runs > 0 {
        bail!(
            "{} of {} runs broke an invariant with fixes {}",
            p.violating_runs,
            p.runs,
            set
        );
    }
    Ok(())
}
