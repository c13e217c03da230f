//! `kvw upstream run`: the engine side by side with real SGLang releases.
//!
//! Sets up one cached venv per release (`upstream/setup.sh`, idempotent),
//! runs the project's probes (`upstream/probes/kvw_probe.py`) with each
//! venv's interpreter, runs every case's engine twin under the fixes that
//! release contains ([`kvw_engine::upstream_twin`]), compares the two field
//! by field and prints a case × release table. With `--out` each case and
//! release becomes a signed `upstream-run/v1` receipt; the folder appears
//! whole or not at all.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use kvw_engine::upstream_twin::{self, Inputs};
use kvw_evidence::bundle::Rerun;
use kvw_evidence::upstream_run::{
    compare, release_fixes, Totals, UpstreamRunPredicate, Verdict, RELEASES,
    UPSTREAM_RUN_PREDICATE_TYPE,
};
use kvw_evidence::VerifiedStatement;
use rayon::prelude::*;
use serde_json::Value;

/// A probe run may not take longer than this (importing sglang on a busy
/// 2-core machine takes a few minutes).
const PROBE_TIMEOUT: Duration = Duration::from_secs(1200);
/// Largest probe output read.
const MAX_PROBE_OUTPUT: u64 = 4 * 1024 * 1024;

#[derive(Debug, Subcommand)]
pub enum UpstreamCommand {
    /// Install (cached) and probe SGLang releases; compare with the engine.
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Comma list of SGLang releases.
    #[arg(
        long,
        default_value = "0.5.19,0.5.20,0.5.21,0.5.23",
        value_delimiter = ','
    )]
    pub sglang: Vec<String>,
    /// Comma list of cases (default: all).
    #[arg(long, value_delimiter = ',')]
    pub cases: Vec<String>,
    /// Write one signed upstream-run receipt per case and release here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Signing key file for --out (default: the local key).
    #[arg(long)]
    pub key: Option<PathBuf>,
    /// Exit 1 when a field of these cases differs at any release with no
    /// reason given for it (`all`: every case run).
    #[arg(long, value_delimiter = ',')]
    pub require_agree: Vec<String>,
}

pub fn run(cmd: UpstreamCommand) -> Result<()> {
    match cmd {
        UpstreamCommand::Run(args) => run_all(args),
    }
}

/// Where the probes and the setup script live: `$KVW_UPSTREAM_DIR`, else
/// the source tree this binary was built from.
fn upstream_dir() -> PathBuf {
    std::env::var_os("KVW_UPSTREAM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../upstream"))
}

/// Where the venvs are cached: `$KVW_UPSTREAM_HOME`, else `upstream/` under
/// `$KVW_CACHE`, else under `~/.cache/kvwitness` (as `upstream/setup.sh`).
fn venv_home() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("KVW_UPSTREAM_HOME") {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("KVW_CACHE") {
        return Ok(PathBuf::from(d).join("upstream"));
    }
    let home = std::env::var_os("HOME").ok_or_else(|| anyhow!("HOME is not set"))?;
    Ok(PathBuf::from(home).join(".cache/kvwitness/upstream"))
}

/// What setup recorded about a release's venv.
struct Venv {
    python: PathBuf,
    wheel: String,
    wheel_sha256: String,
}

fn venv(release: &str) -> Result<Venv> {
    let dir = venv_home()?.join(format!("sglang-{release}"));
    let ready = dir.join(".kvw-ready");
    let text = std::fs::read_to_string(&ready).map_err(|_| {
        anyhow!(
            "SGLang {release}: no venv at {} (run kvw upstream run to set it up)",
            dir.display()
        )
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "SGLang {release}: broken venv marker {}: {e}",
            ready.display()
        )
    })?;
    let s = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| anyhow!("SGLang {release}: venv marker lacks {k}"))
    };
    let python = dir.join("bin/python");
    if !python.exists() {
        bail!(
            "SGLang {release}: broken venv, {} is missing",
            python.display()
        );
    }
    Ok(Venv {
        python,
        wheel: s("wheel")?,
        wheel_sha256: s("wheel_sha256")?,
    })
}

/// SHA-256 over the probe sources, each as its name, a NUL and its bytes,
/// in name order.
fn probe_sha256(dir: &Path) -> Result<String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read the probes in {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    files.sort();
    let mut all = Vec::new();
    for f in files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        all.extend_from_slice(name.as_bytes());
        all.push(0);
        all.extend(std::fs::read(&f).with_context(|| format!("cannot read {}", f.display()))?);
    }
    Ok(kvw_evidence::canonical::sha256_hex(&all))
}

fn run_setup(dir: &Path, releases: &[String]) -> Result<()> {
    let status = Command::new("bash")
        .arg(dir.join("setup.sh"))
        .args(releases)
        .stdin(Stdio::null())
        .status()
        .context("cannot run upstream/setup.sh")?;
    if !status.success() {
        bail!("upstream setup failed (see the line above naming the release)");
    }
    Ok(())
}

/// Run the probes of `cases` in `venv`; the parsed output.
fn run_probe(release: &str, venv: &Venv, script: &Path, cases: &[String]) -> Result<Value> {
    let mut child = Command::new(&venv.python)
        .arg(script)
        .arg("--cases")
        .arg(cases.join(","))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("SGLang {release}: cannot start {}", venv.python.display()))?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow!("no probe stdout"))?;
    let mut stderr = child
        .stderr
        .take()
        .ok_or_else(|| anyhow!("no probe stderr"))?;
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stdout).take(MAX_PROBE_OUTPUT).read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stderr).take(MAX_PROBE_OUTPUT).read_to_end(&mut buf);
        buf
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if start.elapsed() > PROBE_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "SGLang {release}: the probes ran past {} s",
                PROBE_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let out = reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    let parsed: Option<Value> = serde_json::from_slice(&out).ok();
    // A case that raised: name the release and the case.
    if let Some(cases) = parsed
        .as_ref()
        .and_then(|v| v.get("cases"))
        .and_then(Value::as_object)
    {
        if let Some((case, e)) = cases.iter().find_map(|(c, v)| Some((c, v.get("error")?))) {
            bail!(
                "SGLang {release}, case {case}: the probe raised {}",
                e.as_str().unwrap_or("?")
            );
        }
    }
    match parsed {
        Some(v) if status.success() => Ok(v),
        _ => {
            let text = String::from_utf8_lossy(&err);
            let last = text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output");
            bail!("SGLang {release}: the probes failed ({status}): {last}")
        }
    }
}

/// Differences the stubs or the engine's model explain, by case and field.
fn explanation(case: &str, field: &str) -> Option<String> {
    let text = match (case, field) {
        ("aborted-middle-result", "queue" | "status" | "message") => return None,
        ("aborted-middle-result", _)
        | (
            "test_aborted_middle_result_waits_for_inflight_chunk",
            "chunk_sent"
            | "after_middle_chunk_sent"
            | "after_middle_kv_released"
            | "after_middle_metadata_released"
            | "after_middle_streamed",
        ) => {
            "limit of the engine's model: its middle-chunk result stands for upstream's result path plus the next step's `process_prefill_chunk`, which sends the chunk (it checks no abort), while the probe drives the result path alone, where no release sends an aborted middle chunk (`is_aborted`); and from #36988 upstream keeps a request whose next chunk is launched (`still_chunking`), with its KV and metadata, for its final result, where the engine retires it at the middle result, one result early (where the final result is also run, the state after it agrees)"
        }
        (c, "message") if c.starts_with("test_sampling_mask_abort_preserves_error_and_releases_once") => {
            "wording: upstream's sampling-mask messages name the backend's captured support and the --sampling-mask-max-tokens limit; the engine's name the mask's fault (status and finish state agree)"
        }
        ("test_grammar_rejection_retires_prefill_before_transfer", "message") => {
            "wording: upstream's prepare_abort message names the grammar backend's failure; the engine's names the refused token (status 500 and the finish state agree)"
        }
        ("decode-timeout", "message") => {
            "wording: the engine's message names the waiting timeout; upstream's names the failed transfer (rank, rid, room) and the transport's exception, here the stub's"
        }
        (_, "message") => {
            "wording: upstream's validate_input_length adds \"Use a shorter input or enable --allow-auto-truncate.\"; the engine's message stops before that advice"
        }
        _ => return None,
    };
    Some(text.to_string())
}

fn fields_of(v: &Value) -> Result<BTreeMap<String, Value>> {
    serde_json::from_value(v.clone()).map_err(|e| anyhow!("probe fields are not an object: {e}"))
}

/// Run and compare one release: one predicate per case.
fn compare_release(
    release: &str,
    venv: &Venv,
    probe: &Value,
    cases: &[String],
    probe_digest: &str,
) -> Result<Vec<UpstreamRunPredicate>> {
    let fixes =
        release_fixes(release).ok_or_else(|| anyhow!("unknown SGLang release {release}"))?;
    let inputs = probe
        .get("inputs")
        .and_then(Inputs::from_json)
        .ok_or_else(|| anyhow!("SGLang {release}: the probe output has no inputs"))?;
    let s = |k: &str| {
        probe
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let stubs: Vec<String> = probe
        .get("stubs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for case in cases {
        let observed = probe
            .pointer(&format!(
                "/cases/{}/fields",
                case.replace('~', "~0").replace('/', "~1")
            ))
            .ok_or_else(|| anyhow!("SGLang {release}, case {case}: no observation"))?;
        let upstream = fields_of(observed)?;
        let engine = upstream_twin::observe(case, &inputs, fixes)
            .ok_or_else(|| anyhow!("case {case}: the engine has no twin for it"))?;
        let fields = compare(&upstream, &engine, |f| explanation(case, f));
        out.push(UpstreamRunPredicate {
            release: release.to_string(),
            wheel: venv.wheel.clone(),
            wheel_sha256: venv.wheel_sha256.clone(),
            python: s("python"),
            torch: s("torch"),
            probe_sha256: probe_digest.to_string(),
            case: case.clone(),
            fixes: fixes.to_vec(),
            stubs: stubs.clone(),
            upstream,
            engine,
            fields,
            kvw_version: env!("CARGO_PKG_VERSION").to_string(),
        });
    }
    Ok(out)
}

/// `agree`, `agree*` (every difference carries its reason) or `DIFFER`,
/// then agree/explained/unexplained/n.a. field counts.
fn cell(p: &UpstreamRunPredicate) -> String {
    let t = p.totals();
    let word = match (t.differ, t.explained) {
        (0, 0) => "agree",
        (0, _) => "agree*",
        _ => "DIFFER",
    };
    format!(
        "{word} {}/{}/{}/{}",
        t.agree, t.explained, t.differ, t.not_applicable
    )
}

/// The fields of one case a release cannot show for one reason, and the
/// releases where that is so.
type NotShown<'a> = (BTreeSet<&'a str>, Vec<&'a str>);

fn print_table(
    releases: &[String],
    cases: &[String],
    runs: &[Vec<UpstreamRunPredicate>],
) -> Result<()> {
    let width = cases.iter().map(|c| c.len()).max().unwrap_or(4).max(4);
    let mut head = format!("{:width$}", "case");
    for r in releases {
        head.push_str(&format!("  {:>17}", format!("SGLang {r}")));
    }
    outln!("{head}")?;
    for (i, case) in cases.iter().enumerate() {
        let mut line = format!("{case:width$}");
        for run in runs {
            line.push_str(&format!("  {:>17}", cell(&run[i])));
        }
        outln!("{line}")?;
    }
    let mut t = Totals::default();
    for p in runs.iter().flatten() {
        t += p.totals();
    }
    outln!(
        "cells: fields agree/differ with reason/differ unexplained/n.a. (real release vs engine under the fixes it contains); * = every difference explained"
    )?;
    outln!(
        "total: {} fields agree, {} differ with the reason given, {} differ unexplained, {} n.a., over {} case runs",
        t.agree,
        t.explained,
        t.differ,
        t.not_applicable,
        runs.iter().flatten().count()
    )?;
    // Each difference once, with the releases it shows at; the fields a
    // release cannot show, one line per case and reason.
    let mut seen: BTreeMap<(String, String, String, String), Vec<&str>> = BTreeMap::new();
    let mut not_shown: BTreeMap<(&str, String), NotShown> = BTreeMap::new();
    for p in runs.iter().flatten() {
        for f in p
            .fields
            .iter()
            .filter(|f| f.verdict == Verdict::NotApplicable)
        {
            let reason = f.reason.clone().unwrap_or_else(|| "no reason given".into());
            let (fields, releases) = not_shown.entry((&p.case, reason)).or_default();
            fields.insert(&f.field);
            if releases.last() != Some(&p.release.as_str()) {
                releases.push(&p.release);
            }
        }
        for f in p.fields.iter().filter(|f| f.verdict == Verdict::Differ) {
            let side =
                |m: &BTreeMap<String, Value>| m.get(&f.field).unwrap_or(&Value::Null).to_string();
            let key = (
                format!("{} {} {}", f.verdict.name(), p.case, f.field),
                side(&p.upstream),
                side(&p.engine),
                f.reason.clone().unwrap_or_else(|| "no reason given".into()),
            );
            seen.entry(key).or_default().push(&p.release);
        }
    }
    for ((what, real, engine, reason), releases) in seen {
        outln!(
            "  {what} (SGLang {}): real {real} vs engine {engine}; {reason}",
            releases.join(", ")
        )?;
    }
    for ((case, reason), (fields, releases)) in not_shown {
        outln!(
            "  n.a. {case}: {} field(s) {} (SGLang {}); {reason}",
            fields.len(),
            fields.into_iter().collect::<Vec<_>>().join(", "),
            releases.join(", ")
        )?;
    }
    Ok(())
}

fn write_receipts(
    dir: &Path,
    key: Option<&Path>,
    runs: &[Vec<UpstreamRunPredicate>],
) -> Result<()> {
    if dir.exists() {
        bail!("--out {} exists; give a new folder", dir.display());
    }
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = tempfile::Builder::new()
        .prefix(".upstream-run")
        .tempdir_in(parent)
        .with_context(|| format!("cannot write in {}", parent.display()))?;
    let (signer, _) = crate::sign::signer(key)?;
    for p in runs.iter().flatten() {
        let name = kvw_evidence::receipt_name::upstream(&p.release, &p.case);
        let envelope = kvw_evidence::sign_statement(&name, p, &signer)?;
        crate::probe::write_envelope(&tmp.path().join(&name), &envelope, false)?;
    }
    // The public key beside the receipts, so `kvw verify FILE` finds it.
    signer.public().save(tmp.path().join("kvw.pub.json"))?;
    let tmp = tmp.keep();
    std::fs::rename(&tmp, dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(())
}

fn run_all(args: RunArgs) -> Result<()> {
    for r in &args.sglang {
        if release_fixes(r).is_none() {
            let known: Vec<&str> = RELEASES.iter().map(|(r, _)| *r).collect();
            bail!("unknown SGLang release {r:?} (known: {})", known.join(", "));
        }
    }
    let cases: Vec<String> = if args.cases.is_empty() {
        upstream_twin::CASES.iter().map(|c| c.to_string()).collect()
    } else {
        args.cases.clone()
    };
    if let Some(c) = cases
        .iter()
        .chain(args.require_agree.iter().filter(|c| *c != "all"))
        .find(|c| !upstream_twin::CASES.contains(&c.as_str()))
    {
        bail!(
            "unknown case {c:?} (known: {})",
            upstream_twin::CASES.join(", ")
        );
    }
    if let Some(out) = &args.out {
        if out.exists() {
            bail!("--out {} exists; give a new folder", out.display());
        }
    }
    let dir = upstream_dir();
    let script = dir.join("probes/kvw_probe.py");
    if !script.exists() {
        bail!("no probes at {} (set KVW_UPSTREAM_DIR)", script.display());
    }
    let digest = probe_sha256(&dir.join("probes"))?;
    run_setup(&dir, &args.sglang)?;
    // One probe process per release, as many at once as there are cores:
    // each is one Python thread, most of it importing torch.
    let runs = args
        .sglang
        .par_iter()
        .map(|r| {
            let v = venv(r)?;
            eprintln!("upstream: probing SGLang {r} ({} cases)", cases.len());
            let probe = run_probe(r, &v, &script, &cases)?;
            compare_release(r, &v, &probe, &cases, &digest)
        })
        .collect::<Result<Vec<_>>>()?;
    print_table(&args.sglang, &cases, &runs)?;
    if let Some(out) = &args.out {
        write_receipts(out, args.key.as_deref(), &runs)?;
        outln!(
            "wrote {} receipts to {}",
            runs.iter().flatten().count(),
            out.display()
        )?;
    }
    let broken: Vec<String> = runs
        .iter()
        .flatten()
        .filter(|p| {
            args.require_agree
                .iter()
                .any(|c| c == "all" || *c == p.case)
                && p.totals().differ > 0
        })
        .map(|p| format!("{} on {}", p.case, p.release))
        .collect();
    if !broken.is_empty() {
        bail!("real SGLang and the engine differ: {}", broken.join("; "));
    }
    Ok(())
}

/// What re-running every case on one release came to, kept for the rest of
/// the process: a bundle carries several cases per release, and one probe
/// process per release runs them all (starting torch is most of a run).
type ReleaseRerun = Result<Vec<UpstreamRunPredicate>, String>;
type Once = std::sync::Arc<std::sync::OnceLock<ReleaseRerun>>;
static RERUNS: std::sync::LazyLock<std::sync::Mutex<BTreeMap<String, Once>>> =
    std::sync::LazyLock::new(Default::default);

/// Every case of `release` re-run in its venv, once per process; receipts
/// of one release wait for its run, those of another run theirs meanwhile.
fn rerun_release(release: &str, v: &Venv) -> ReleaseRerun {
    let once = RERUNS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(release.to_string())
        .or_default()
        .clone();
    once.get_or_init(|| {
        let cases: Vec<String> = upstream_twin::CASES.iter().map(|c| c.to_string()).collect();
        let dir = upstream_dir();
        probe_sha256(&dir.join("probes"))
            .and_then(|digest| {
                let probe = run_probe(release, v, &dir.join("probes/kvw_probe.py"), &cases)?;
                compare_release(release, v, &probe, &cases, &digest)
            })
            .map_err(|e| e.to_string())
    })
    .clone()
}

/// Re-run, as many at once as there are cores, every release whose
/// upstream-run receipts are among `statements` and whose venv is set up
/// here, so that [`reproduce`] finds each release's run done rather than
/// waiting for them one after another.
pub fn rerun_releases_of<'a>(statements: impl Iterator<Item = &'a VerifiedStatement>) {
    let releases: BTreeSet<String> = statements
        .filter(|s| s.predicate_type == UPSTREAM_RUN_PREDICATE_TYPE)
        .filter_map(|s| s.parse::<UpstreamRunPredicate>().ok())
        .map(|p| p.release)
        .collect();
    releases.par_iter().for_each(|r| {
        if let Ok(v) = venv(r) {
            let _ = rerun_release(r, &v);
        }
    });
}

/// `kvw verify --reproduce` for an upstream-run receipt: re-run its probe in
/// the release's venv and compare with what was signed. Without the venv
/// the receipt is not re-run and the line says how to set it up; nothing is
/// installed by a verification.
pub fn reproduce(statement: &VerifiedStatement) -> Result<Rerun, String> {
    if statement.predicate_type != UPSTREAM_RUN_PREDICATE_TYPE {
        return Err(format!(
            "not an upstream-run receipt: {}",
            statement.predicate_type
        ));
    }
    let p: UpstreamRunPredicate = statement.parse().map_err(|e| e.to_string())?;
    let home = venv_home().map_err(|e| e.to_string())?;
    if !home
        .join(format!("sglang-{}/.kvw-ready", p.release))
        .exists()
    {
        return Ok(Rerun::NotRerun(format!(
            "the SGLang {} venv is not set up here; kvw upstream run --sglang {} installs it, \
             then --reproduce re-runs this case",
            p.release, p.release
        )));
    }
    let v = venv(&p.release).map_err(|e| e.to_string())?;
    if v.wheel_sha256 != p.wheel_sha256 {
        return Err(format!(
            "the SGLang {} venv holds wheel {}, the receipt {}",
            p.release, v.wheel_sha256, p.wheel_sha256
        ));
    }
    let again = rerun_release(&p.release, &v)?;
    let again = again
        .iter()
        .find(|a| a.case == p.case)
        .ok_or_else(|| format!("no case {:?} in this version's probes", p.case))?;
    if again.upstream != p.upstream || again.engine != p.engine {
        return Err(format!(
            "re-running {} on SGLang {} does not reproduce the receipt's observations",
            p.case, p.release
        ));
    }
    Ok(Rerun::Reproduced)
}
