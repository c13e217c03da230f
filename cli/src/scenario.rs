//! `kvw scenario`: list the scenarios and run one.
//!
//! `list` prints each scenario's gate, name and what it mirrors upstream
//! (`--json` for machines); `run NAME` runs it under `--fixes`, prints the
//! verdict and the events, optionally writes a signed scenario receipt, and
//! exits 0 when the assertion holds, 1 when it does not.

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, Subcommand};
use kvw_engine::scenarios::{self, receipts, Status};
use kvw_words::probe::{event_line, Lang};
use kvw_words::scenario::{self as words, scenario_text};
use serde_json::json;

use crate::out::clean;
use kvw_evidence::FixSet;

#[derive(Debug, Subcommand)]
pub enum ScenarioCommand {
    /// List every scenario.
    List {
        /// Print JSON: name, gate, description, upstream {path, test, subtest}.
        #[arg(long)]
        json: bool,
    },
    /// Run one scenario; exit 0 when its assertion holds, 1 when not.
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenario name (see `kvw scenario list`).
    pub name: String,
    /// Fix switches: a comma list, `none` or `all`.
    #[arg(long, default_value = "all")]
    pub fixes: FixSet,
    /// Print the scenario predicate as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write a signed scenario receipt to this file (an existing file is
    /// refused unless --force).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub sign: crate::sign::SignArgs,
    /// Language of the description, events and verdict: `en` or `it`.
    #[arg(long, default_value = "en")]
    pub lang: Lang,
}

pub fn run(cmd: ScenarioCommand) -> anyhow::Result<()> {
    match cmd {
        ScenarioCommand::List { json } => list(json),
        ScenarioCommand::Run(args) => run_one(args),
    }
}

fn list(as_json: bool) -> anyhow::Result<()> {
    let all = scenarios::all();
    if as_json {
        let items: Vec<_> = all
            .iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "gate": s.gate.name(),
                    "description": scenario_text(s.name).map(|t| t.description(Lang::En).to_string()),
                    "upstream": s.upstream.map(|u| json!({
                        "path": u.path, "test": u.test, "subtest": u.subtest, "url": u.url(),
                    })),
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&items)?)?;
        return Ok(());
    }
    for s in &all {
        let upstream = s
            .upstream
            .map(|u| match u.subtest {
                Some(sub) => format!("  [{} {}]", u.test, sub),
                None => format!("  [{}]", u.test),
            })
            .unwrap_or_default();
        outln!("{:<18} {}{}", s.gate.name(), s.name, upstream)?;
    }
    outln!("{} scenarios", all.len())?;
    Ok(())
}

fn run_one(args: RunArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.out {
        crate::write::check_new(path, args.sign.force())?;
    }
    let Some(judged) = receipts::run_named(&args.name, &args.fixes.list()) else {
        bail!(
            "unknown scenario '{}' (see kvw scenario list)",
            clean(&args.name)
        );
    };
    let predicate = receipts::scenario_predicate(&judged);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&predicate)?)?;
    } else {
        let s = &judged.scenario;
        outln!(
            "{} — gate {}, fixes {}",
            s.name,
            s.gate.name(),
            FixSet::new(&judged.fixes)
        )?;
        let lang = args.lang;
        if let Some(t) = scenario_text(s.name) {
            outln!("  {}", t.description(lang))?;
        }
        if let Some(u) = s.upstream {
            outln!(
                "  upstream: {} {} ({})",
                u.test,
                u.subtest.unwrap_or(""),
                u.url()
            )?;
        }
        for e in &judged.observed_run.events {
            outln!("    {}", clean(&event_line(e, lang)))?;
        }
        outln!(
            "  {}: {}",
            lang.pick("expected", "atteso"),
            clean(&words::expected(&judged.expected, lang).to_string())
        )?;
        outln!(
            "  {}: {}",
            lang.pick("observed", "osservato"),
            clean(&words::observed(&judged.observed, lang).to_string())
        )?;
        outln!(
            "  {}: {}",
            words::status(predicate.status, lang),
            clean(&words::why(&judged.why, lang).to_string())
        )?;
    }
    if let Some(path) = &args.out {
        crate::probe::write_receipt(path, args.sign.key(), &predicate, args.sign.force())?;
        eprintln!("signed receipt written to {}", path.display());
    }
    if judged.status == Status::Fail {
        bail!(
            "scenario {} fails: {}",
            judged.scenario.name,
            clean(&words::why(&judged.why, Lang::En).to_string())
        );
    }
    Ok(())
}
