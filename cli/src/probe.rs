//! `kvw probe incident`: run the incident probe and show the seven steps.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use kvw_evidence::{
    ChecksumScope, FixSet, FreeListPolicy, PageTail, PoisonMode, ProbePredicate, Scale,
};
use kvw_words::probe::{self as words, Lang};

use kvw_engine::config::{ProbeSpec, ValidConfig, DEFAULT_SEED};
use kvw_engine::probe;

#[derive(Debug, Subcommand)]
pub enum ProbeCommand {
    /// The 2026 incident: an over-long prompt through the PD handoff.
    Incident(IncidentArgs),
}

#[derive(Debug, Args)]
pub struct IncidentArgs {
    /// Fix switches: a comma list, `none` or `all`.
    #[arg(long, default_value = "none")]
    pub fixes: FixSet,
    /// `walkthrough` (a few drawable pages) or `incident` (the disclosed numbers).
    #[arg(long, default_value = "walkthrough")]
    pub scale: Scale,
    /// Seed of the scheduler and of the tenants' documents.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// `poison-on-free` (this project's own defense): `off`, `log` or `refuse`.
    #[arg(long, default_value = "off")]
    pub poison_on_free: PoisonMode,
    /// Override the prefill pool size in tokens (e.g. 1048576 for "pool ≥ context").
    #[arg(long)]
    pub prefill_pool: Option<u64>,
    /// Override the decode pool size in tokens (model assumption; the
    /// default holds the whole context, so decode does not reject).
    #[arg(long)]
    pub decode_pool: Option<u64>,
    /// Free-list policy of both pools: `lifo` or `fifo`.
    #[arg(long, default_value = "lifo")]
    pub free_list: FreeListPolicy,
    /// Override the page size in tokens.
    #[arg(long)]
    pub page_size: Option<u32>,
    /// Pages decode's kv-checksum covers: `reserved` or `received` (model assumption).
    #[arg(long, default_value = "reserved")]
    pub checksum_scope: ChecksumScope,
    /// What the unused tail of the last prefill page carries: `carried` or `zeroed`.
    #[arg(long, default_value = "carried")]
    pub page_tail: PageTail,
    /// Language of the account: `en` or `it`.
    #[arg(long, default_value = "en")]
    pub lang: Lang,
    /// Print one JSON object (the receipt predicate) instead of the account.
    #[arg(long)]
    pub json: bool,
    /// Also write a signed receipt (DSSE envelope) to this file (an
    /// existing file is refused unless --force).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub sign: crate::sign::SignArgs,
    /// Size limits (defaults 65536 pages per pool and 33554432 attended
    /// tokens): a probe over them is refused before it runs.
    #[command(flatten)]
    pub budget: crate::budget::ProbeBudget,
}

impl IncidentArgs {
    /// The probe these flags describe, validated once, within the budget.
    pub fn config(&self) -> anyhow::Result<ValidConfig> {
        let c = ProbeSpec {
            scale: self.scale,
            fixes: self.fixes,
            poison_on_free: self.poison_on_free,
            seed: self.seed,
            free_list: self.free_list,
            checksum_scope: self.checksum_scope,
            page_tail: self.page_tail,
            prefill_pool_tokens: self.prefill_pool,
            decode_pool_tokens: self.decode_pool,
            page_size: self.page_size,
        }
        .validate()?;
        self.budget
            .check(&c)
            .map_err(|why| anyhow::anyhow!("probe refused: {why}"))?;
        Ok(c)
    }
}

pub fn run(cmd: ProbeCommand) -> anyhow::Result<()> {
    match cmd {
        ProbeCommand::Incident(args) => incident(args),
    }
}

fn incident(args: IncidentArgs) -> anyhow::Result<()> {
    let config = args.config()?;
    if let Some(path) = &args.out {
        crate::write::check_new(path, args.sign.force())?;
    }
    let predicate = probe::run(&config)?;
    if let Some(path) = &args.out {
        write_receipt(path, args.sign.key(), &predicate, args.sign.force())?;
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &predicate)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", account(&predicate, args.lang))?;
    }
    if let Some(path) = &args.out {
        errln!("signed receipt written to {}", path.display());
    }
    Ok(())
}

/// Sign a predicate of any kind and write the DSSE envelope under the one
/// output rule of [`crate::write`]: an existing file is refused unless
/// `force`; the file appears whole or not at all.
pub fn write_receipt<P: kvw_evidence::PredicateKind>(
    path: &std::path::Path,
    key: Option<&std::path::Path>,
    p: &P,
    force: bool,
) -> anyhow::Result<()> {
    crate::write::check_new(path, force)?;
    let (signer, _) = crate::sign::signer(key)?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow::anyhow!("--out {} has no file name", path.display()))?;
    let envelope = kvw_evidence::sign_statement(name, p, &signer)?;
    write_envelope(path, &envelope, force)
}

/// Write a signed envelope to `path` (see [`crate::write::write_file`]).
pub fn write_envelope(
    path: &std::path::Path,
    envelope: &kvw_evidence::Envelope,
    force: bool,
) -> anyhow::Result<()> {
    crate::write::write_file(path, envelope.to_json_pretty().as_bytes(), force)
}

/// The readable seven-step account, rendered from the predicate's facts.
pub fn account(p: &ProbePredicate, lang: Lang) -> String {
    let c = &p.config;
    let fixes = words::fix_labels(&c.fixes);
    let mut s = String::new();
    s += &format!(
        "kvw probe incident — scale {}, context {} tokens, prefill pool {} tokens, decode pool {} tokens, page {} tokens\n",
        c.scale, c.context_len, c.prefill_pool_tokens, c.decode_pool_tokens, c.page_size
    );
    s += &format!(
        "prefill input cap min(context-1, pool-1)-5 = {}; fixes: {fixes}; poison-on-free: {}; free list: {}; seed {}\n\n",
        c.prefill_input_cap(), c.poison_on_free, c.free_list, c.seed
    );
    for step in &p.steps {
        s += &format!(
            "{}. {} [{}]\n",
            step.step,
            words::step_name(step.step, lang),
            words::provenance_label(words::step_provenance(step), lang)
        );
        for f in &step.facts {
            s += &format!(
                "   {} ({}: {})\n",
                words::claim(&f.claim, lang),
                words::provenance_label(f.provenance, lang),
                f.basis
            );
        }
    }
    let v = &p.verdict;
    let mut text = v.response_text.clone();
    for c in &v.canaries_leaked {
        text = text.replace(c, &format!(">>>{c}<<<"));
    }
    s += &format!("\nHTTP {} · response: {text:?}\n", v.http_status);
    s += &format!("verdict: {}\n", words::outcome_line(p, lang));
    if !p.assumptions.is_empty() {
        s += &format!(
            "{}\n",
            lang.pick("model assumptions:", "ipotesi del modello:")
        );
        for a in &p.assumptions {
            s += &format!(
                "  - {} [{}]\n",
                words::assumption_text(a.id, lang),
                a.alternative
            );
        }
    }
    s += &format!("trace sha256: {}\n", p.trace_sha256);
    s
}
