//! `kvw check`: the exhaustive model check of the PD handoff (`kvw-check`).
//!
//! Prints what was explored and each property's result; on a violation it
//! prints the shortest counterexample and can write it as a signed receipt.
//! Exits 0 when every property holds, 1 when one fails.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kvw_check::{explore_address, parse_faults, serve_explorer, CheckOptions, Strategy};
use kvw_evidence::model_check::FaultBudget;
use kvw_evidence::FixSet;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Fix switches: a comma list, `none` or `all`.
    #[arg(long, default_value = "none")]
    pub fixes: FixSet,
    /// Requests in the model (1..=6).
    #[arg(long, default_value_t = 2)]
    pub requests: u32,
    /// Tenants the requests belong to (1..=6).
    #[arg(long, default_value_t = 2)]
    pub tenants: u32,
    /// Decode pool pages (1..=32).
    #[arg(long, default_value_t = 8)]
    pub pages: u32,
    /// Faults to inject: `none`, `all` or a list like `aborts=2,late-write,lost-ack`.
    #[arg(long, default_value = "none", value_parser = parse_fault_arg)]
    pub faults: FaultArg,
    /// Give up after this many seconds (the verdict is then undecided).
    /// Default 600 (ten minutes; every fix with 3 requests and every fault
    /// takes about 144 s on two cores); at most 86400 (one day).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_TIMEOUT_S,
          value_parser = clap::value_parser!(u64).range(1..=MAX_TIMEOUT_S))]
    pub timeout: u64,
    /// Write the result as a signed receipt to this file (an existing file
    /// is refused unless --force).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub sign: crate::sign::SignArgs,
    /// Serve stateright's explorer UI on this loopback address instead of checking.
    #[arg(long, value_name = "ADDR")]
    pub explore: Option<String>,
}

/// `--timeout` when none is given: a search that runs away (4 requests with
/// every fault) stops with an undecided verdict instead of running for hours.
pub const DEFAULT_TIMEOUT_S: u64 = 600;
/// Largest `--timeout`: one day.
pub const MAX_TIMEOUT_S: u64 = 86_400;

/// A parsed `--faults` value.
#[derive(Debug, Clone)]
pub struct FaultArg(pub FaultBudget);

pub fn parse_fault_arg(s: &str) -> Result<FaultArg, String> {
    parse_faults(s).map(FaultArg).map_err(|e| e.to_string())
}

/// The verdict search `kvw check` runs: depth-first over every core with
/// the reductions of `kvw_check::symmetry`; a counterexample is still the
/// shortest one, from a breadth-first search of its own.
pub fn verdict_options(
    fixes: &FixSet,
    requests: u32,
    faults: FaultBudget,
    timeout: Duration,
) -> CheckOptions {
    CheckOptions {
        fixes: fixes.list(),
        requests,
        faults,
        timeout: Some(timeout),
        strategy: Strategy::DfsSymmetry,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        ..CheckOptions::default()
    }
}

pub fn run(args: CheckArgs) -> anyhow::Result<()> {
    let options = CheckOptions {
        tenants: args.tenants,
        decode_pages: args.pages,
        ..verdict_options(
            &args.fixes,
            args.requests,
            args.faults.0,
            Duration::from_secs(args.timeout),
        )
    };
    if let Some(addr) = &args.explore {
        let addr = explore_address(addr)?;
        options.model()?;
        eprintln!("serving the state-space explorer on http://{addr}/ (Ctrl-C to stop)");
        serve_explorer(&options, addr)?;
        return Ok(());
    }
    if let Some(path) = &args.out {
        crate::write::check_new(path, args.sign.force())?;
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {msg}").map_err(|e| anyhow!("{e}"))?);
    let report = kvw_check::run(&options, &mut |p| {
        bar.set_message(format!(
            "{} states, {} unique, depth {}",
            p.states, p.unique_states, p.max_depth
        ));
        bar.tick();
    })?;
    bar.finish_and_clear();

    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "kvw check — fixes {}; {} request(s), {} tenant(s), {} decode pages; faults: {} abort(s), {} late write(s), {} lost ack(s)",
        FixSet::new(&options.fixes),
        options.requests,
        options.tenants,
        options.decode_pages,
        options.faults.aborts,
        options.faults.late_writes,
        options.faults.lost_acks
    )?;
    writeln!(
        out,
        "states explored {}, unique {}, depth {}, {:.2} s ({:.0} states/s){}",
        report.states,
        report.unique_states,
        report.max_depth,
        report.elapsed.as_secs_f64(),
        report.states_per_second(),
        if report.complete {
            ""
        } else {
            "; search incomplete"
        }
    )?;
    for p in &report.properties {
        writeln!(
            out,
            "  {:<12} {:<44} {:?}",
            format!("{:?}", p.expectation),
            p.name,
            p.status
        )?;
    }
    let predicate = kvw_check::predicate(&report, kvw_engine::probe::engine_info());
    if let Some(cx) = &predicate.counterexample {
        writeln!(out, "shortest counterexample ({} steps):", cx.steps.len())?;
        for step in &cx.steps {
            writeln!(
                out,
                "  {:>2}. {:<8} {:<18} {}{}",
                step.index,
                step.actor,
                step.action,
                step.rid,
                step.decision
                    .as_ref()
                    .map(|d| format!(": {}", kvw_words::model_check::decision(d)))
                    .unwrap_or_default()
            )?;
        }
    }
    if let Some(cx) = &predicate.counterexample {
        if cx.steps.iter().any(|s| s.action == "release_timeout") {
            writeln!(
                out,
                "the pages went back when decode's deferred release timed out ({} s, SGLang PR #35049) \
                 without the drain ack, and a write still on the wire landed after: the use-after-free \
                 window SGLang #38961 describes, which no fix in the set closes (it needs a write later \
                 than the timeout: --faults late-write)",
                kvw_engine::policy::DEFERRED_RELEASE_TIMEOUT_US / 1_000_000
            )?;
        }
    }
    if let Some(path) = &args.out {
        crate::probe::write_receipt(path, args.sign.key(), &predicate, args.sign.force())?;
        eprintln!("signed receipt written to {}", path.display());
    }
    if report.all_hold() {
        Ok(())
    } else if report.counterexample.is_some() || report.complete {
        bail!("a property of the PD handoff fails (see the counterexample above)")
    } else {
        bail!(
            "the search stopped after --timeout {} s before it was complete: the verdict is undecided (raise --timeout, at most {MAX_TIMEOUT_S})",
            args.timeout
        )
    }
}
