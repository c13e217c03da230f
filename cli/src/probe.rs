//! `kvw probe incident`: run the incident probe and show the seven steps.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use kvw_evidence::{sign_predicate, FreeListPolicy, KvCanaryMode, ProbePredicate, Scale, Signer};

use kvw_engine::config::{incident_config, parse_fixes, validate, with_prefill_pool, DEFAULT_SEED};
use kvw_engine::probe;

#[derive(Debug, Subcommand)]
pub enum ProbeCommand {
    /// The 2026 incident: an over-long prompt through the PD handoff.
    Incident(IncidentArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ScaleArg {
    Walkthrough,
    Incident,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CanaryArg {
    Off,
    Log,
    Raise,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FreeListArg {
    Lifo,
    Fifo,
}

/// A parsed `--fixes` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixList(pub Vec<kvw_evidence::Fix>);

fn parse_fix_list(s: &str) -> Result<FixList, String> {
    parse_fixes(s).map(FixList)
}

#[derive(Debug, Args)]
pub struct IncidentArgs {
    /// Fix switches: a comma list, `none` or `all`.
    #[arg(long, default_value = "none", value_parser = parse_fix_list)]
    pub fixes: FixList,
    /// `walkthrough` (a few drawable pages) or `incident` (the disclosed numbers).
    #[arg(long, value_enum, default_value = "walkthrough")]
    pub scale: ScaleArg,
    /// Seed of the scheduler and of the tenants' documents.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// `--kv-canary` mode.
    #[arg(long, value_enum, default_value = "off")]
    pub kv_canary: CanaryArg,
    /// Override the prefill pool size in tokens (e.g. 1048576 for "pool ≥ context").
    #[arg(long)]
    pub prefill_pool: Option<u64>,
    /// Free-list policy of both pools.
    #[arg(long, value_enum, default_value = "lifo")]
    pub free_list: FreeListArg,
    /// Override the page size in tokens.
    #[arg(long)]
    pub page_size: Option<u32>,
    /// Print one JSON object (the receipt predicate) instead of the account.
    #[arg(long)]
    pub json: bool,
    /// Also write a signed receipt (DSSE envelope) to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Signing key file (default: the local key, created on first use).
    #[arg(long)]
    pub key: Option<PathBuf>,
}

impl IncidentArgs {
    /// The probe configuration these flags describe.
    pub fn config(&self) -> anyhow::Result<kvw_evidence::ProbeConfig> {
        let scale = match self.scale {
            ScaleArg::Walkthrough => Scale::Walkthrough,
            ScaleArg::Incident => Scale::Incident,
        };
        let canary = match self.kv_canary {
            CanaryArg::Off => KvCanaryMode::Off,
            CanaryArg::Log => KvCanaryMode::Log,
            CanaryArg::Raise => KvCanaryMode::Raise,
        };
        let fixes: Vec<_> = self.fixes.0.clone();
        let mut c = incident_config(scale, &fixes, canary, self.seed)?;
        c.free_list = match self.free_list {
            FreeListArg::Lifo => FreeListPolicy::Lifo,
            FreeListArg::Fifo => FreeListPolicy::Fifo,
        };
        if let Some(ps) = self.page_size {
            c.page_size = ps;
        }
        if let Some(pool) = self.prefill_pool {
            c = with_prefill_pool(c, pool)?;
        }
        validate(&c)?;
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
    let predicate = probe::run(&config)?;
    if let Some(path) = &args.out {
        write_receipt(path, args.key.as_deref(), &predicate)?;
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &predicate)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", account(&predicate))?;
    }
    if let Some(path) = &args.out {
        errln!("signed receipt written to {}", path.display());
    }
    Ok(())
}

/// Sign the predicate and write the DSSE envelope; the file appears whole
/// or not at all.
fn write_receipt(
    path: &std::path::Path,
    key: Option<&std::path::Path>,
    p: &ProbePredicate,
) -> anyhow::Result<()> {
    let signer = match key {
        Some(k) => Signer::load(k)?,
        None => Signer::load_or_create_default()?.0,
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow::anyhow!("--out {} has no file name", path.display()))?;
    let envelope = sign_predicate(name, p, &signer)?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| anyhow::anyhow!("cannot write in {}: {e}", dir.display()))?;
    tmp.write_all(envelope.to_json_pretty().as_bytes())?;
    tmp.persist(path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {}", path.display(), e.error))?;
    Ok(())
}

/// The readable seven-step account.
pub fn account(p: &ProbePredicate) -> String {
    let c = &p.config;
    let fixes = if c.fixes.is_empty() {
        "none".to_string()
    } else {
        c.fixes
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut s = String::new();
    s += &format!(
        "kvw probe incident — scale {:?}, context {} tokens, prefill pool {} tokens, decode pool {} tokens, page {} tokens\n",
        c.scale, c.context_len, c.prefill_pool_tokens, c.decode_pool_tokens, c.page_size
    );
    s += &format!(
        "input cap min(context-1, pool-1)-5 = {}; fixes: {fixes}; kv-canary: {:?}; free list: {:?}; seed {}\n\n",
        c.max_req_input_len, c.kv_canary, c.free_list, c.seed
    );
    for step in &p.steps {
        s += &format!(
            "{}. {} [{}]\n",
            step.step,
            step.name,
            provenance_label(step.provenance)
        );
        s += &format!("   {}\n", step.summary);
        if let Some(st) = &step.state {
            s += &format!(
                "   door {}: to_finish={} finished_reason={} finished()={} prompt {} → origin_input_ids {} — {}\n",
                st.door,
                st.to_finish.as_deref().unwrap_or("None"),
                st.finished_reason.as_deref().unwrap_or("None"),
                st.finished,
                st.original_prompt_len,
                st.origin_input_len,
                st.decision
            );
        }
        if let Some(v) = &step.pages {
            let count = |r: &[kvw_evidence::PageRange]| r.iter().map(|x| x.count).sum::<u64>();
            s += &format!(
                "   {:?} pool: {} pages reserved, {} written by the handoff, {} read\n",
                v.pool,
                count(&v.reserved),
                count(&v.transferred),
                count(&v.read)
            );
        }
    }
    let v = &p.verdict;
    let mut text = v.response_text.clone();
    for c in &v.canaries_leaked {
        text = text.replace(c, &format!(">>>{c}<<<"));
    }
    s += &format!(
        "\nHTTP {} after {:.3} s (virtual)\n",
        v.http_status, v.latency_s
    );
    s += &format!("response: {text:?}\n");
    s += &format!(
        "verdict: {} (foreign pages read: {}, canaries leaked: {})\n",
        v.outcome,
        v.foreign_pages_read,
        if v.canaries_leaked.is_empty() {
            "none".into()
        } else {
            v.canaries_leaked.join(", ")
        }
    );
    s += &format!("trace sha256: {}\n", p.trace_sha256);
    s
}

fn provenance_label(p: kvw_evidence::Provenance) -> &'static str {
    use kvw_evidence::Provenance::*;
    match p {
        Disclosed => "disclosed",
        UpstreamTest => "upstream test",
        UpstreamThread => "upstream thread",
        ModelAssumption => "model assumption",
    }
}
