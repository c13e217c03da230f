//! `kvw verify`: check a bundle folder or a single receipt.
//!
//! All the checking lives in `kvw_evidence`; this module only picks the key,
//! optionally wires in the engine to re-run probes (`--reproduce`), prints
//! one line per receipt and a summary, and turns any failure into a
//! non-zero exit with a one-line error.
//!
//! Which key is used matters and is always printed: `--key` names a key the
//! user trusts; without it a bundle is checked against its own
//! `kvw.pub.json`, which proves the files are intact and consistent but not
//! who signed them.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail};

use crate::budget::ReproduceBudget;
use crate::out::clean;
use kvw_evidence::bundle::{
    check_reproduction, read_bundle, verify_files, verify_files_keeping, BundleReport, IndexEntry,
    ReceiptFacts, ReceiptLine, ReceiptOk, RECEIPTS_DIR,
};
use kvw_evidence::kinds;
use kvw_evidence::receipt::{check_receipt_name, verify_statement_file};
use kvw_evidence::signing::PUBLIC_KEY_FILE;
use kvw_evidence::{ProbeConfig, ProbePredicate, PublicKey, VerifyOptions, PREDICATE_TYPE};
use kvw_evidence::{VerifiedReceipt, VerifiedStatement};

/// Verify a bundle folder or a single receipt.
#[derive(clap::Args, Debug, Clone)]
pub struct VerifyArgs {
    /// A bundle folder, or one receipt file (which needs --key or a
    /// kvw.pub.json beside it).
    #[arg(value_name = "PATH")]
    pub path: PathBuf,

    /// Public key file to trust (kvw.pub.json format). Without it a bundle is
    /// checked against its own kvw.pub.json.
    #[arg(long, value_name = "PUBFILE")]
    pub key: Option<PathBuf>,

    /// Also re-run every receipt (probe, scenario, gates, fuzz: every run
    /// it counts) with its recorded config and require the same
    /// reproducible result; a model check or an audit is marked "not
    /// re-run". A re-run over the budget below is refused before it starts.
    #[arg(long)]
    pub reproduce: bool,

    #[command(flatten)]
    pub budget: ReproduceBudget,
}

/// Re-run a probe for `--reproduce` within `budget`, reducing any error to
/// one line.
fn rerun(config: &ProbeConfig, budget: &ReproduceBudget) -> Result<ProbePredicate, String> {
    let config = kvw_engine::config::ValidConfig::new(config.clone()).map_err(|e| e.to_string())?;
    budget
        .probe
        .check(&config)
        .map_err(|why| format!("not re-run: {why}"))?;
    kvw_engine::probe::run(&config).map_err(|e| format!("{e:#}").replace('\n', " "))
}

pub fn run(args: VerifyArgs) -> anyhow::Result<()> {
    // Look before opening: a FIFO or device given as PATH or --key would
    // block or never end, and a link would hide what is really checked.
    let meta = std::fs::symlink_metadata(&args.path)
        .map_err(|e| anyhow!("cannot open {}: {e}", args.path.display()))?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        bail!(
            "{} is a symbolic link; give the bundle folder or receipt file itself",
            args.path.display()
        );
    }
    if !kind.is_dir() && !kind.is_file() {
        bail!(
            "{} is neither a bundle folder nor a receipt file (a FIFO, socket or device)",
            args.path.display()
        );
    }
    let trusted = match &args.key {
        Some(path) => Some(PublicKey::load(path).map_err(|e| anyhow!("{e}"))?),
        None => None,
    };
    if kind.is_dir() {
        verify_folder(&args, trusted)
    } else {
        verify_single(&args, trusted)
    }
}

fn verify_folder(args: &VerifyArgs, trusted: Option<PublicKey>) -> anyhow::Result<()> {
    let budget = args.budget;
    let files = read_bundle(&args.path).map_err(|e| anyhow!("{e}"))?;
    if args.reproduce {
        // The receipts that verify name the SGLang releases to re-run;
        // those start first, side by side (they are most of a re-run).
        let first = VerifyOptions {
            trusted_key: trusted.clone(),
            reproduce: None,
            reproduce_other: None,
        };
        let (_, statements) = verify_files_keeping(&files, &first).map_err(|e| anyhow!("{e}"))?;
        crate::upstream::rerun_releases_of(statements.values());
    }
    let probe = move |c: &ProbeConfig| rerun(c, &budget);
    let other = move |s: &VerifiedStatement| crate::verify_results::reproduce(s, &budget);
    let options = VerifyOptions {
        trusted_key: trusted,
        reproduce: if args.reproduce { Some(&probe) } else { None },
        reproduce_other: if args.reproduce { Some(&other) } else { None },
    };
    let report = verify_files(&files, &options).map_err(|e| anyhow!("{e}"))?;
    print_report(&report)?;
    if report.ok() {
        Ok(())
    } else {
        bail!(
            "{} of {} receipts in {} failed verification",
            report.failures(),
            report.receipts.len(),
            args.path.display()
        )
    }
}

/// Print a bundle report, each line escaped whole: a newline inside a
/// signed field stays inside its line and cannot print a line of its own.
pub fn print_report(report: &BundleReport) -> anyhow::Result<()> {
    outln!("{}", clean(&report.key_line()))?;
    for line in &report.receipts {
        outln!("{}", clean(&kvw_words::report::line(line)))?;
    }
    outln!("{}", clean(&report.summary()))
}

/// The public key to check a lone receipt with: `--key`, else `kvw.pub.json`
/// beside the receipt, else the one of the bundle the receipt sits in.
fn key_for_single(
    receipt: &Path,
    trusted: Option<PublicKey>,
) -> anyhow::Result<(PublicKey, String)> {
    if let Some(key) = trusted {
        let line = format!("key {} (trusted, from --key)", key.keyid());
        return Ok((key, line));
    }
    let folder = receipt.parent().unwrap_or(Path::new("."));
    let mut candidates = vec![folder.join(PUBLIC_KEY_FILE)];
    if folder.file_name().is_some_and(|n| n == RECEIPTS_DIR) {
        if let Some(bundle) = folder.parent() {
            candidates.push(bundle.join(PUBLIC_KEY_FILE));
        }
    }
    for candidate in candidates {
        if candidate.symlink_metadata().is_ok() {
            let key = PublicKey::load(&candidate).map_err(|e| anyhow!("{e}"))?;
            let line = format!(
                "key {} ({}, found beside the receipt: this proves integrity, not who \
                 signed; pass --key to check against a key you trust)",
                key.keyid(),
                candidate.display()
            );
            return Ok((key, line));
        }
    }
    // Last resort: this machine's own signing key, as `kvw probe --out` uses it.
    let local = kvw_evidence::Signer::default_path();
    if let Ok(local) = local {
        if local.is_file() {
            let key = kvw_evidence::Signer::load(&local)
                .map_err(|e| anyhow!("{e}"))?
                .public();
            let line = format!(
                "key {} (this machine's signing key {}; pass --key to check against another)",
                key.keyid(),
                local.display()
            );
            return Ok((key, line));
        }
    }
    bail!(
        "no key for {}: pass --key PUBFILE or put {PUBLIC_KEY_FILE} beside it",
        receipt.display()
    )
}

fn verify_single(args: &VerifyArgs, trusted: Option<PublicKey>) -> anyhow::Result<()> {
    let (key, key_line) = key_for_single(&args.path, trusted)?;
    outln!("{}", clean(&key_line))?;
    let shown = args.path.display().to_string();
    let budget = args.reproduce.then_some(&args.budget);
    let result = check_single(&args.path, &key, budget);
    let failed = result.is_err();
    let line = ReceiptLine {
        file: shown.clone(),
        result,
    };
    outln!("{}", clean(&kvw_words::report::line(&line)))?;
    if failed {
        bail!("receipt {shown} failed verification");
    }
    let rerun = match &line.result {
        Ok(ok) if ok.reproduced => "; 1 reproduced, 0 not re-run",
        Ok(ok) if ok.not_rerun.is_some() => "; 0 reproduced, 1 not re-run",
        _ => "",
    };
    outln!("OK: 1 of 1 receipts ok{rerun}")?;
    Ok(())
}

/// Check one receipt file; with `reproduce`, re-run it within that budget.
fn check_single(
    path: &Path,
    key: &PublicKey,
    reproduce: Option<&ReproduceBudget>,
) -> Result<ReceiptOk, String> {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    check_receipt_name(&file_name).map_err(|e| e.to_string())?;
    let statement = verify_statement_file(path, key).map_err(|e| e.unlocated().to_string())?;
    if statement.name != file_name {
        return Err(format!(
            "signed under the name {:?}, stored as {file_name:?}",
            statement.name
        ));
    }
    if statement.predicate_type != PREDICATE_TYPE {
        let facts = kinds::describe(&statement)?;
        let rerun = match reproduce {
            Some(budget) => Some(crate::verify_results::reproduce(&statement, budget)?),
            None => None,
        };
        return Ok(ReceiptOk {
            name: statement.name,
            facts: ReceiptFacts::Other(facts),
            reproduced: false,
            not_rerun: None,
        }
        .with_rerun(rerun));
    }
    let verified = VerifiedReceipt::from_statement(statement).map_err(|e| e.to_string())?;
    if let Some(budget) = reproduce {
        check_reproduction(&verified, &|c: &ProbeConfig| rerun(c, budget))?;
    }
    Ok(ReceiptOk {
        name: verified.name.clone(),
        facts: ReceiptFacts::Probe(Box::new(IndexEntry::for_receipt(&file_name, &verified))),
        reproduced: reproduce.is_some(),
        not_rerun: None,
    })
}
