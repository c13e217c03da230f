//! Probes: run a scenario on the simulator and turn what happened into a
//! receipt predicate.
//!
//! `run` is deterministic: the same [`ProbeConfig`] (seed included) gives the
//! same predicate, byte for byte, on any machine — that is what lets
//! `kvw verify --reproduce` re-run a receipt and compare digests.

use kvw_evidence::{
    EngineInfo, Fix, KvCanaryMode, ProbeConfig, ProbeInfo, ProbePredicate, Provenance, Step,
    Verdict,
};
use rand::SeedableRng;

use crate::backend::Backend;
pub use crate::config::{incident_config, validate, with_prefill_pool};
use crate::model;
use crate::scenario;
use crate::sim::Sim;

/// Version of the incident scenario script.
pub const INCIDENT_PROBE_VERSION: u32 = 1;

/// Names of the seven steps.
pub const STEP_NAMES: [&str; 7] = [
    "Bootstrap",
    "Prefill admission",
    "Prefill forward",
    "KV transfer",
    "Decode admission",
    "Decode attention",
    "Response",
];

/// Which path the probed request took, decided by the first guard that
/// stops it (in pipeline order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// The prompt fits: no reject path at all.
    Healthy,
    /// PR #38935 retired it at the entry doors.
    EntryRetire,
    /// PR #36988 retired the aborted prefill result.
    ResultRetire,
    /// PR #39500's checksum caught the short handoff.
    Checksum,
    /// `--kv-canary=raise` aborted the read.
    CanaryRaise,
    /// Page tags refused foreign pages.
    Tags,
    /// Scrubbed pages: no foreign data, wrong answer.
    Scrub,
    /// The disclosed incident.
    Incident,
}

fn path_of(c: &ProbeConfig, prompt_len: usize) -> Path {
    let on = |f| c.fixes.contains(&f);
    if prompt_len as u64 <= c.max_req_input_len {
        Path::Healthy
    } else if on(Fix::RetireUnadmittedReject) {
        Path::EntryRetire
    } else if on(Fix::RetireAbortedPrefillResult) {
        Path::ResultRetire
    } else if on(Fix::KvChecksum) {
        Path::Checksum
    } else if c.kv_canary == KvCanaryMode::Raise {
        Path::CanaryRaise
    } else if on(Fix::PageTags) {
        Path::Tags
    } else if on(Fix::ScrubOnFree) {
        Path::Scrub
    } else {
        Path::Incident
    }
}

/// Where step `n`'s behaviour comes from on this path.
fn provenance(path: Path, n: u8) -> Provenance {
    use Provenance::*;
    let incident = |n: u8| if n == 2 { UpstreamTest } else { Disclosed };
    match path {
        Path::Incident => incident(n),
        Path::Healthy => ModelAssumption,
        Path::EntryRetire => {
            if n == 2 {
                UpstreamTest
            } else {
                UpstreamThread
            }
        }
        Path::ResultRetire => match n {
            1..=3 => incident(n),
            4 => UpstreamTest,
            5 | 6 => UpstreamThread,
            _ => ModelAssumption,
        },
        Path::Checksum => match n {
            1..=4 => incident(n),
            5 | 6 => UpstreamThread,
            _ => ModelAssumption,
        },
        Path::CanaryRaise | Path::Tags | Path::Scrub => {
            if n <= 5 {
                incident(n)
            } else {
                ModelAssumption
            }
        }
    }
}

fn not_reached(path: Path) -> &'static str {
    match path {
        Path::EntryRetire => "Not reached: the request was retired at the entry door (PR #38935) before any bootstrap, forward or transfer.",
        Path::ResultRetire => "Not reached: prefill retired the aborted result (PR #36988), so no handoff arrived; decode waited until its timeout.",
        Path::Checksum => "Not reached: the checksum mismatch aborted the request before it was batched.",
        _ => "Not reached in this run.",
    }
}

/// Why a probe produced no predicate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    #[error("invalid probe configuration: {0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("scenario has no probed request")]
    NoProbedRequest,
    #[error("the probed request got no answer within the simulated hour")]
    NoAnswer,
}

/// Run the incident probe with this configuration on the detected backend.
pub fn run(config: &ProbeConfig) -> Result<ProbePredicate, ProbeError> {
    run_on(config, &Backend::detect())
}

/// Run the incident probe on a given backend (detect it once for many runs).
pub fn run_on(config: &ProbeConfig, backend: &Backend) -> Result<ProbePredicate, ProbeError> {
    validate(config)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(config.seed);
    let arrivals = scenario::incident(config, &mut rng);
    let mut sim = Sim::new(config.clone(), arrivals, backend);
    sim.run();
    assemble(&sim)
}

fn assemble(sim: &Sim) -> Result<ProbePredicate, ProbeError> {
    let config = &sim.config;
    let probed = sim.probed().ok_or(ProbeError::NoProbedRequest)?;
    let entry = &sim.entries[probed as usize];
    let response = entry.response.clone().ok_or(ProbeError::NoAnswer)?;
    let prompt = &entry.arrival.prompt;
    let path = path_of(config, prompt.len());

    let steps: Vec<Step> = (1..=7u8)
        .map(|n| {
            let log = &sim.trace.steps[n as usize];
            let mut summary = log.sentences.join(" ");
            if !log.reached && summary.is_empty() {
                summary = not_reached(path).to_string();
            }
            Step {
                step: n,
                name: STEP_NAMES[n as usize - 1].to_string(),
                provenance: provenance(path, n),
                summary,
                state: log.state.clone(),
                pages: log.pages.clone(),
                sources: log.sources.clone(),
                events: log.events.clone(),
            }
        })
        .collect();

    let leaked: Vec<String> = sim
        .entries
        .iter()
        .filter(|e| {
            e.arrival.tenant != entry.arrival.tenant && response.text.contains(&e.arrival.canary)
        })
        .map(|e| e.arrival.canary.clone())
        .collect();
    let foreign = sim.marks.foreign_seen.len() as u64;
    let leak = !leaked.is_empty() || (response.status == 200 && foreign > 0);
    let admissible = prompt.len() as u64 <= config.max_req_input_len;
    let want = model::decode(&prompt[1..=(config.max_new_tokens as usize).min(prompt.len() - 1)]);
    let correct_answer = if admissible {
        response.status == 200 && response.text == want
    } else {
        response.status == 400
    };
    let latency_s = (response.at_us - entry.arrival.at_us) as f64 / 1e6;
    let outcome = outcome_line(
        &response.status,
        leak,
        &leaked,
        foreign,
        correct_answer,
        latency_s,
        &sim.entries,
        entry,
    );
    let mut steps = steps;
    let final_sentence = format!(
        "The client got HTTP {} after {:.3} virtual seconds. {}",
        response.status, latency_s, outcome
    );
    steps[6].summary = if steps[6].summary.is_empty() {
        final_sentence
    } else {
        format!("{} {}", steps[6].summary, final_sentence)
    };

    let trace_sha256 = kvw_evidence::receipt::trace_sha256(&steps);
    Ok(ProbePredicate {
        probe: ProbeInfo {
            name: "incident".into(),
            version: INCIDENT_PROBE_VERSION,
        },
        engine: EngineInfo {
            version: env!("CARGO_PKG_VERSION").to_string(),
            commit: env!("KVW_COMMIT").to_string(),
        },
        backend: sim.backend.info(),
        config: config.clone(),
        steps,
        verdict: Verdict {
            leak,
            http_status: response.status,
            foreign_pages_read: foreign,
            canaries_leaked: leaked,
            latency_s,
            response_text: response.text,
            correct_answer,
            outcome,
            counters: sim.counters.clone(),
        },
        trace_sha256,
    })
}

#[allow(clippy::too_many_arguments)]
fn outcome_line(
    status: &u16,
    leak: bool,
    leaked: &[String],
    foreign: u64,
    correct: bool,
    latency_s: f64,
    entries: &[crate::sim::Entry],
    me: &crate::sim::Entry,
) -> String {
    if leak {
        let whose: Vec<&str> = entries
            .iter()
            .filter(|e| leaked.contains(&e.arrival.canary))
            .map(|e| e.arrival.tenant.as_str())
            .collect();
        if whose.is_empty() {
            format!("LEAK: HTTP {status} computed over {foreign} page(s) of other requests.")
        } else {
            format!(
                "LEAK: HTTP {status} for tenant {} carrying {}'s canary; {foreign} foreign page(s) read.",
                me.arrival.tenant,
                whose.join(", ")
            )
        }
    } else if *status == 200 && !correct {
        "No foreign data, but HTTP 200 with a wrong answer.".to_string()
    } else if *status == 200 {
        "Correct: HTTP 200 with the request's own text.".to_string()
    } else if latency_s >= 1.0 {
        format!("No leak: HTTP {status} after {latency_s:.0} s.")
    } else {
        format!("No leak: HTTP {status} at once.")
    }
}
