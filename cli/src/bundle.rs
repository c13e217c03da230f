//! `kvw bundle`: run the whole fix matrix and publish it as a signed bundle.
//!
//! One command produces the evidence the project publishes: the runs of
//! [`kvw_engine::matrix`] and, beside them, the gate runs of
//! [`GATE_FIX_SETS`] (the gates receipt of each and the scenario receipts
//! its rows refer to, named as `kvw gates --out` names them), and the
//! model-check and upstream-run receipts it is handed. This module
//! adds the flags, the progress bar and the read-back. Each run is signed and the lot is
//! written with [`kvw_evidence::bundle::write_bundle_with_others`], which
//! builds the folder beside its destination and renames it into place, so a
//! failed run leaves nothing.
//!
//! Runs are independent and deterministic, so they are spread over the
//! machine's cores; receipts are ordered by name, not by finishing time, and
//! the bundle is the same whatever the core count.

use std::path::PathBuf;

use anyhow::{anyhow, bail};
use indicatif::{ProgressBar, ProgressStyle};
use kvw_evidence::bundle::{check_target, write_bundle_with_others, VerifyOptions};
use kvw_evidence::{sign_predicate, verify_bundle, ProbePredicate, Scale};

use kvw_engine::matrix::{self, MatrixSize, Row, GATE_FIX_SETS};
use kvw_engine::probe;
use kvw_engine::scenarios::receipts;

/// Run the fix matrix and write a signed evidence bundle.
#[derive(clap::Args, Debug, Clone)]
pub struct BundleArgs {
    /// Bundle folder to write (created; an older bundle there is replaced,
    /// any other non-empty folder is refused).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// Private key file to sign with. Default: the default signing key
    /// ($KVW_KEY, else ~/.config/kvwitness/signing-key.json), created on first use.
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,

    /// Seed of every run.
    #[arg(long, value_name = "N", default_value_t = kvw_engine::config::DEFAULT_SEED)]
    pub seed: u64,

    /// Scales to run, comma-separated.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "walkthrough,incident"
    )]
    pub scales: Vec<Scale>,

    /// Incident-scale rows: `full` (every combination, as at walkthrough
    /// scale) or `outcomes` (no fixes, each switch alone, poison-on-free log and
    /// raise, pool ≥ context) for a smaller published bundle.
    #[arg(long, default_value = "full")]
    pub incident_matrix: MatrixSize,

    /// A model-check receipt (`kvw check --out`) to carry too, signed by the
    /// same key; repeatable.
    #[arg(long, value_name = "FILE")]
    pub model_check: Vec<PathBuf>,

    /// A folder written by `kvw upstream run --out` whose receipts (what
    /// real SGLang releases did, case by case) the bundle carries too; they
    /// must be signed by the same key.
    #[arg(long, value_name = "DIR")]
    pub upstream_run: Option<PathBuf>,
}

/// Most upstream-run receipts one bundle carries (the differential writes
/// one per case and release: a few dozen).
const MAX_UPSTREAM_RECEIPTS: usize = 1000;

/// The model-check receipts to carry, read before any probe runs.
fn read_model_checks(paths: &[PathBuf]) -> anyhow::Result<Vec<(String, kvw_evidence::Envelope)>> {
    paths
        .iter()
        .map(|path| {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| anyhow!("--model-check {} has no file name", path.display()))?;
            // A FIFO, a device or a link to one is refused, never read.
            let bytes = kvw_evidence::fsutil::read_limited(
                path,
                kvw_evidence::receipt::MAX_RECEIPT_BYTES,
                "model-check receipt",
            )
            .map_err(|e| anyhow!("--model-check: {e}"))?;
            let envelope = kvw_evidence::Envelope::from_json(&bytes)
                .map_err(|e| anyhow!("{}: {e}", path.display()))?;
            Ok((name.to_string(), envelope))
        })
        .collect()
}

/// The upstream-run receipts of `dir`, each checked against the key that
/// signs the bundle, read before any probe runs. Only regular files named
/// as `kvw upstream run` names them (and its `kvw.pub.json`) are accepted;
/// anything else, a link among them, is refused.
fn read_upstream_runs(
    dir: &std::path::Path,
    key: &kvw_evidence::PublicKey,
) -> anyhow::Result<Vec<(String, kvw_evidence::Envelope)>> {
    use kvw_evidence::upstream_run::UPSTREAM_RUN_PREDICATE_TYPE;
    let what = |e: &dyn std::fmt::Display| anyhow!("--upstream-run {}: {e}", dir.display());
    let meta = std::fs::symlink_metadata(dir).map_err(|e| what(&e))?;
    if !meta.is_dir() {
        bail!("--upstream-run {} is not a folder", dir.display());
    }
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| what(&e))? {
        let entry = entry.map_err(|e| what(&e))?;
        let name = entry.file_name();
        let name = name
            .to_str()
            .ok_or_else(|| what(&format!("a file name that is not UTF-8: {name:?}")))?;
        if name == kvw_evidence::signing::PUBLIC_KEY_FILE {
            continue;
        }
        if !name.starts_with("upstream-") {
            bail!(
                "--upstream-run {}: unexpected file {name} (only upstream-*.json receipts)",
                dir.display()
            );
        }
        kvw_evidence::receipt::check_receipt_name(name).map_err(|e| what(&e))?;
        names.push(name.to_string());
        if names.len() > MAX_UPSTREAM_RECEIPTS {
            bail!(
                "--upstream-run {}: more than {MAX_UPSTREAM_RECEIPTS} receipts",
                dir.display()
            );
        }
    }
    if names.is_empty() {
        bail!(
            "--upstream-run {}: no upstream-*.json receipts",
            dir.display()
        );
    }
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let path = dir.join(&name);
            // A link is refused, never followed; so is a FIFO or a device.
            let bytes = kvw_evidence::fsutil::read_no_follow(
                &path,
                kvw_evidence::receipt::MAX_RECEIPT_BYTES,
                "upstream-run receipt",
            )
            .map_err(|e| what(&e))?;
            let statement = kvw_evidence::receipt::verify_statement(&bytes, key).map_err(|e| {
                anyhow!(
                    "--upstream-run {name}: {e} (the bundle signs with key {}; write the \
                     receipts with kvw upstream run --key and the same key)",
                    key.keyid()
                )
            })?;
            if statement.predicate_type != UPSTREAM_RUN_PREDICATE_TYPE {
                bail!(
                    "--upstream-run {name}: predicate type {}, not an upstream-run receipt",
                    statement.predicate_type
                );
            }
            let envelope = kvw_evidence::Envelope::from_json(&bytes).map_err(|e| what(&e))?;
            Ok((name, envelope))
        })
        .collect()
}

/// Run every row, spread over the cores (rows that share a warm-up share
/// one run of it); results keep the rows' order.
fn run_all(rows: &[Row], bar: &ProgressBar) -> anyhow::Result<Vec<ProbePredicate>> {
    let configs: Vec<_> = rows.iter().map(|row| row.config.clone()).collect();
    let done = |i: usize| {
        bar.set_message(rows[i].name.clone());
        bar.inc(1);
    };
    probe::run_many(&configs, &done)
        .into_iter()
        .zip(rows)
        .map(|(result, row)| result.map_err(|e| anyhow!("probe {} failed: {}", row.name, e)))
        .collect()
}

pub fn run(args: BundleArgs) -> anyhow::Result<()> {
    if args.scales.is_empty() {
        bail!("--scales is empty; give walkthrough, incident or both");
    }
    // Refuse an unusable --out before minutes of probes, not after.
    check_target(&args.out).map_err(|e| anyhow!("{e}"))?;
    let model_checks = read_model_checks(&args.model_check)?;
    let (signer, key_path) = crate::sign::signer(args.key.as_deref())?;
    let upstream_runs = match &args.upstream_run {
        Some(dir) => read_upstream_runs(dir, &signer.public())?,
        None => Vec::new(),
    };
    outln!(
        "signing with key {} ({})",
        signer.keyid(),
        key_path.display()
    )?;

    let rows = matrix::rows(&args.scales, args.seed, args.incident_matrix)?;
    let bar = ProgressBar::new(rows.len() as u64);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs  {elapsed_precise}  {wide_msg}")
    {
        bar.set_style(style);
    }
    let predicates = run_all(&rows, &bar);
    bar.finish_and_clear();
    let predicates = predicates?;

    let mut receipts = Vec::with_capacity(rows.len());
    let mut leaks = 0;
    for (row, predicate) in rows.iter().zip(predicates) {
        if predicate.verdict.leak {
            leaks += 1;
        }
        let envelope = sign_predicate(&row.name, &predicate, &signer)
            .map_err(|e| anyhow!("cannot sign {}: {e}", row.name))?;
        receipts.push((row.name.clone(), envelope, predicate));
    }
    let (model_check_receipts, upstream_receipts) = (model_checks.len(), upstream_runs.len());
    let mut others = model_checks;
    others.extend(upstream_runs);
    for fixes in GATE_FIX_SETS {
        others.extend(receipts::run_signed(&fixes.list(), &signer)?);
    }
    let probes = receipts.len();
    let gate_receipts = others.len() - model_check_receipts - upstream_receipts;
    let count = probes + others.len();
    let public = signer.public();
    let written = write_bundle_with_others(&args.out, receipts, others, &signer)
        .map_err(|e| anyhow!("{e}"))?;

    // Read back what was written, as a reader would.
    let report = verify_bundle(
        &written.dir,
        &VerifyOptions {
            trusted_key: Some(public),
            reproduce: None,
            reproduce_other: None,
        },
    )
    .map_err(|e| anyhow!("the bundle just written does not verify: {e}"))?;
    if !report.ok() {
        crate::verify::print_report(&report)?;
        bail!("the bundle just written does not verify");
    }
    outln!(
        "wrote {count} receipts to {}: {probes} probe runs ({leaks} leak, {} no leak) and \
         {gate_receipts} gate and scenario receipts (fixes none and all), \
         {model_check_receipts} model-check receipt(s), {upstream_receipts} upstream-run \
         receipt(s); keyid {}",
        written.dir.display(),
        probes - leaks,
        written.keyid
    )?;
    Ok(())
}
