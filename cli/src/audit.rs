//! `kvw audit`: run the black-box gates against an OpenAI-compatible URL.
//!
//! Flags parse here; the gates live in `kvw_server::audit`. Exit codes: 0
//! when every gate passes, 1 when one fails or is inconclusive, 2 on an
//! error (unreachable or non-compatible endpoint, bad flags, limits), with
//! one line on stderr and nothing written.
//!
//! `--out DIR` writes a signed audit bundle ([`crate::audit_bundle`]): one
//! receipt per gate, the index, the signed manifest, `SHA256SUMS`, the
//! README and the key, as `kvw verify DIR` checks it and `kvw site build`
//! renders it as a report.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use kvw_evidence::audit::GateResult;
use kvw_server::audit::plan::Plan;
use kvw_server::audit::{self, AuditOptions, Limits};

/// `kvw audit --endpoint URL --key K1 --key K2 [...]`
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Base URL of the endpoint, e.g. http://127.0.0.1:8080 or
    /// https://llm.example.com (redirects are never followed).
    #[arg(long)]
    pub endpoint: String,
    /// PEM file of the CA certificate(s) an https endpoint's certificate
    /// must chain to, instead of the public and system roots.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// API key of one tenant; give at least two.
    #[arg(long = "key", value_name = "KEY", required = true)]
    pub keys: Vec<String>,
    /// Gates to run (comma list): version, capacity, admission, isolation,
    /// lifetime, status, prefix-cache.
    #[arg(
        long,
        default_value = "version,capacity,admission,isolation,lifetime,status,prefix-cache"
    )]
    pub gates: String,
    /// Model name (default: the first one /v1/models lists).
    #[arg(long)]
    pub model: Option<String>,
    /// Context length in tokens, when the server does not say.
    #[arg(long)]
    pub context_len: Option<u64>,
    /// KV pool in tokens, when the server does not say.
    #[arg(long)]
    pub pool_tokens: Option<u64>,
    /// Characters per token assumed when the server counts no tokens (no
    /// /tokenize, no usage.prompt_tokens); recorded as an assumption, and no
    /// gate fails on a size only assumed.
    #[arg(long, default_value_t = 1.0)]
    pub chars_per_token: f64,
    /// max_tokens of the audit's completions.
    #[arg(long, default_value_t = 32)]
    pub max_tokens: u32,
    /// Seconds a refused prompt may take to be refused (admission gate);
    /// the request timeout bounds the wait whatever this says.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub refusal_bound: f64,
    /// Rounds of the isolation gate.
    #[arg(long, default_value_t = 2)]
    pub rounds: u32,
    /// Hit/miss pairs of the prefix-cache gate.
    #[arg(long, default_value_t = 12)]
    pub pairs: u32,
    /// Prefix length of the prefix-cache gate, in tokens.
    #[arg(long)]
    pub prefix_tokens: Option<u64>,
    /// False-positive rate of the prefix-cache test.
    #[arg(long, default_value_t = 0.01)]
    pub alpha: f64,
    /// Send a per-tenant cache_salt with every request.
    #[arg(long)]
    pub cache_salt: bool,
    /// Most requests the audit may send.
    #[arg(long, default_value_t = 1000)]
    pub max_requests: u32,
    /// Most seconds the audit may run.
    #[arg(long, default_value_t = 600)]
    pub max_seconds: u64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub concurrency: u64,
    /// Seconds one request may take.
    #[arg(long, default_value_t = 60)]
    pub request_timeout: u64,
    /// Print the plan (requests and prompt tokens per gate) and stop:
    /// only discovery's GET requests are sent, no calibration and no gate
    /// traffic, so the sizes are estimates.
    #[arg(long)]
    pub dry_run: bool,
    /// Refuse, before any prompt is sent, an audit whose plan sends more
    /// prompt tokens than this (checked again in the server's tokens once
    /// calibrated, before any gate).
    #[arg(long, value_name = "N")]
    pub max_prompt_tokens: Option<u64>,
    /// Print the plan and one JSON object per gate.
    #[arg(long)]
    pub json: bool,
    /// Write a signed audit bundle into this folder (created whole once the
    /// audit has run; an existing non-empty folder is refused, and with
    /// --force only an earlier bundle is replaced).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub force: crate::write::ForceArg,
    /// Signing key file (default: the local key).
    #[arg(long)]
    pub signing_key: Option<PathBuf>,
}

/// Run `kvw audit`; prints its own errors.
pub fn run(args: AuditArgs) -> ExitCode {
    match audit(args) {
        Ok(code) => code,
        Err(e) => {
            errln!("error: {}", crate::out::clean(&crate::one_line(&e)));
            ExitCode::from(2)
        }
    }
}

fn audit(args: AuditArgs) -> anyhow::Result<ExitCode> {
    if !(args.alpha > 0.0 && args.alpha < 0.5) {
        anyhow::bail!("--alpha must be between 0 and 0.5");
    }
    if !(args.refusal_bound > 0.0 && args.refusal_bound <= 3600.0) {
        anyhow::bail!("--refusal-bound must be above 0 and at most 3600 seconds");
    }
    if !(args.chars_per_token >= 0.25 && args.chars_per_token <= 16.0) {
        anyhow::bail!("--chars-per-token must be between 0.25 and 16");
    }
    let mut opts = AuditOptions::new(&args.endpoint, args.keys.clone());
    opts.gates = args
        .gates
        .split(',')
        .map(|g| g.trim().to_string())
        .collect();
    opts.model = args.model;
    opts.context_len = args.context_len;
    opts.pool_tokens = args.pool_tokens;
    opts.chars_per_token = args.chars_per_token;
    opts.max_tokens = args.max_tokens.clamp(1, 4096);
    opts.rounds = args.rounds.clamp(1, 100);
    opts.pairs = args.pairs.clamp(1, 1000);
    opts.prefix_tokens = args.prefix_tokens;
    opts.alpha = args.alpha;
    opts.cache_salt = args.cache_salt;
    opts.refusal_bound = Duration::from_secs_f64(args.refusal_bound);
    opts.cacert = args.cacert;
    opts.limits = Limits {
        max_requests: args.max_requests,
        max_time: Duration::from_secs(args.max_seconds),
        concurrency: args.concurrency as usize,
        request_timeout: Duration::from_secs(args.request_timeout.max(1)),
    };
    let bundle = match &args.out {
        // The folder and the key before any request: a refusal sends and
        // writes nothing.
        Some(dir) => Some(crate::audit_bundle::AuditBundle::prepare(
            dir,
            args.signing_key.as_deref(),
            args.force.force,
        )?),
        None => None,
    };
    let progress = indicatif::ProgressBar::new(0).with_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg:12} {bar:30} {pos}/{len} requests")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let endpoint = opts.endpoint.clone();
    let show = |plan: &Plan| -> anyhow::Result<()> {
        if args.json {
            outln!("{}", serde_json::json!({ "plan": plan }))?;
        } else {
            for line in plan.lines(&endpoint) {
                outln!("{}", crate::out::clean(&line))?;
            }
        }
        Ok(())
    };
    let reports = runtime.block_on(async {
        let found = audit::discover(opts).await?;
        let plan = found.plan();
        show(&plan)?;
        plan.within(args.max_prompt_tokens)?;
        if args.dry_run {
            const DRY: &str = "dry run: only discovery's GET requests were sent (no calibration, no gate traffic)";
            if args.json {
                outln!("{}", serde_json::json!({ "dry_run": DRY }))?;
            } else {
                outln!("{DRY}")?;
            }
            return anyhow::Ok(None);
        }
        let calibrated = found.calibrate(progress).await?;
        let plan = calibrated.plan();
        show(&plan)?;
        plan.within(args.max_prompt_tokens)?;
        Ok(Some(calibrated.run_gates().await?))
    })?;
    let Some(reports) = reports else {
        return Ok(ExitCode::SUCCESS);
    };
    let mut code = ExitCode::SUCCESS;
    for r in &reports {
        let p = &r.predicate;
        if p.result != GateResult::Pass {
            code = ExitCode::FAILURE;
        }
        if args.json {
            let line = serde_json::json!({
                "gate": p.gate, "result": p.result, "reason": p.reason, "evidence": p.evidence,
                "requests": p.exchanges.len(),
            });
            outln!("{line}")?;
        } else {
            let word = match p.result {
                GateResult::Pass => "PASS",
                GateResult::Fail => "FAIL",
                GateResult::Inconclusive => "INCONCLUSIVE",
            };
            outln!("{:<13} {:<12} {}", p.gate, word, p.reason)?;
        }
    }
    // Only an audit that ran writes anything, and the bundle appears whole.
    if let Some(bundle) = bundle {
        let predicates: Vec<_> = reports.iter().map(|r| &r.predicate).collect();
        let line = bundle.write(&predicates)?;
        if args.json {
            outln!("{}", serde_json::json!({ "bundle": line }))?;
        } else {
            outln!("{}", crate::out::clean(&line))?;
        }
    }
    Ok(code)
}
