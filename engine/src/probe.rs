//! Probes: run a scenario on the simulator and turn what happened into a
//! receipt predicate.
//!
//! `run` is deterministic: the same [`ProbeConfig`] (seed included) gives the
//! same predicate, byte for byte, on any machine — that is what lets
//! `kvw verify --reproduce` re-run a receipt and compare digests.

use kvw_evidence::{
    Assumption, AssumptionId, EngineInfo, Fix, Outcome, PageTail, PoisonMode, ProbeConfig,
    ProbeInfo, ProbePredicate, Scale, Verdict,
};
use rand::SeedableRng;
use rayon::prelude::*;

use crate::arrivals;
use crate::attention;
use crate::backend::Backend;
pub use crate::config::{incident_config, with_prefill_pool, ProbeSpec, ValidConfig};
use crate::narrate;
use crate::sim::cost::Costs;
use crate::sim::fork::warm_up_config;
use crate::sim::Sim;

/// Version of the incident scenario script.
pub const INCIDENT_PROBE_VERSION: u32 = 2;

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
pub fn run(config: &ValidConfig) -> Result<ProbePredicate, ProbeError> {
    run_on(config, &Backend::detect())
}

/// Run the incident probe on a given backend (detect it once for many runs).
pub fn run_on(config: &ValidConfig, backend: &Backend) -> Result<ProbePredicate, ProbeError> {
    run_with_costs(config, backend, Costs::default())
}

/// Run the incident probe with other hop and step costs (they only order
/// events; see [`Costs`]).
pub fn run_with_costs(
    config: &ValidConfig,
    backend: &Backend,
    costs: Costs,
) -> Result<ProbePredicate, ProbeError> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(config.seed);
    let arrivals = arrivals::incident(config, &mut rng);
    let mut sim = Sim::with_costs((**config).clone(), arrivals, backend, costs);
    sim.run();
    assemble(&sim)
}

/// Run the incident probe for each of `configs`, spread over the cores, on
/// the detected backend; results keep the order of `configs`, and `done(i)`
/// is called as probe `i` finishes. Probes whose configurations differ only
/// in [`FORKABLE`](crate::sim::fork::FORKABLE) switches run their common warm-up once and continue it
/// ([`crate::sim::fork`]); each predicate is the one [`run`] gives.
pub fn run_many(
    configs: &[ValidConfig],
    done: &(dyn Fn(usize) + Sync),
) -> Vec<Result<ProbePredicate, ProbeError>> {
    let mut groups: Vec<(ProbeConfig, Vec<usize>)> = Vec::new();
    for (i, config) in configs.iter().enumerate() {
        let warm = warm_up_config(config);
        match groups.iter_mut().find(|(w, _)| *w == warm) {
            Some((_, members)) => members.push(i),
            None => groups.push((warm, vec![i])),
        }
    }
    let mut results: Vec<(usize, Result<ProbePredicate, ProbeError>)> = groups
        .into_par_iter()
        .flat_map_iter(|(warm, members)| {
            let backend = Backend::detect();
            let configs: Vec<&ValidConfig> = members.iter().map(|&i| &configs[i]).collect();
            let results = run_group(&warm, &configs, &backend, &|k| done(members[k]));
            members.into_iter().zip(results)
        })
        .collect();
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// Probes that share the warm-up of `warm`: run it once up to the probed
/// request's arrival, then continue it for each configuration; run each
/// from the start instead when there is only one or when the warm-up
/// depended on a switch the configurations turn on.
fn run_group(
    warm: &ProbeConfig,
    configs: &[&ValidConfig],
    backend: &Backend,
    done: &dyn Fn(usize),
) -> Vec<Result<ProbePredicate, ProbeError>> {
    let mut kept = if configs.len() > 1 {
        WarmUp::run(warm, backend)
    } else {
        None
    };
    configs
        .iter()
        .enumerate()
        .map(|(k, config)| {
            let result = match kept.as_mut() {
                Some(warm_up) => warm_up.probe(config),
                None => run_on(config, backend),
            };
            done(k);
            result
        })
        .collect()
}

/// The warm-up of the incident scenario, run up to the probed request's
/// arrival and kept: every probe whose configuration differs from the
/// warm-up's only in [`FORKABLE`](crate::sim::fork::FORKABLE) switches
/// continues it instead of running it again ([`crate::sim::fork`]), and
/// gets the predicate [`run_on`] gives.
pub struct WarmUp<'b> {
    pub(crate) sim: Sim<'b>,
}

impl<'b> WarmUp<'b> {
    /// Run the warm-up of `config` with its forkable switches off
    /// ([`warm_up_config`]); `None` when the scenario has no probed request
    /// or the warm-up depended on a forkable switch (its probes then run
    /// from the start).
    pub fn run(config: &ProbeConfig, backend: &'b Backend) -> Option<WarmUp<'b>> {
        let warm = warm_up_config(config);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(warm.seed);
        let arrivals = arrivals::incident(&warm, &mut rng);
        let split = arrivals
            .iter()
            .find(|a| a.probed)
            .and_then(|a| a.at_us.checked_sub(1))?;
        let mut sim = Sim::new(warm, arrivals, backend);
        sim.watch_forkable();
        sim.run_until(split);
        if sim.depended_on_watched() {
            tracing::debug!(
                "the warm-up depended on a forkable switch; each probe runs from the start"
            );
            return None;
        }
        Some(WarmUp { sim })
    }

    /// The probe of `config`, continued from this warm-up (the warm-up's
    /// pool bytes are lent to it and come back as they were); `config`
    /// must share the warm-up ([`warm_up_config`] of both equal), else it
    /// runs from the start.
    pub fn probe(&mut self, config: &ValidConfig) -> Result<ProbePredicate, ProbeError> {
        if warm_up_config(config) != self.sim.config {
            return run_on(config, self.sim.backend);
        }
        let mut sim = self.sim.fork((**config).clone());
        sim.run();
        let result = assemble(&sim);
        self.sim.join(sim);
        result
    }
}

pub(crate) fn assemble(sim: &Sim) -> Result<ProbePredicate, ProbeError> {
    let config = &sim.config;
    let probed = sim.probed().ok_or(ProbeError::NoProbedRequest)?;
    let entry = &sim.entries[probed as usize];
    let response = entry.response.clone().ok_or(ProbeError::NoAnswer)?;
    let prompt = &entry.arrival.prompt;

    let leaked: Vec<&crate::sim::Entry> = sim
        .entries
        .iter()
        .filter(|e| {
            e.arrival.tenant != entry.arrival.tenant && response.text.contains(&e.arrival.canary)
        })
        .collect();
    let foreign = sim.marks.foreign_seen.len() as u64;
    let leak = !leaked.is_empty() || (response.status == 200 && foreign > 0);
    let admissible = prompt.len() as u64 <= config.prefill_input_cap();
    let want =
        attention::decode(&prompt[1..=(config.max_new_tokens as usize).min(prompt.len() - 1)]);
    let correct_answer = if admissible {
        response.status == 200 && response.text == want
    } else {
        response.status == 400
    };
    let outcome = if leak {
        Outcome::Leak
    } else if response.status == 200 && !correct_answer {
        Outcome::WrongAnswer
    } else if response.status == 200 {
        Outcome::Correct
    } else {
        Outcome::Refused
    };
    let latency_us = response.at_us - entry.arrival.at_us;
    let cx = narrate::Context {
        config,
        probed,
        prompt_len: prompt.len() as u64,
        pictures: &sim.trace.pictures,
        outcome,
        status: response.status,
        latency_us,
    };
    let events = sim.trace.events.clone();
    let steps = narrate::steps(&events, &sim.trace.requests, &cx);
    let trace_sha256 = kvw_evidence::receipt::trace_sha256(&events, &steps);
    Ok(ProbePredicate {
        probe: ProbeInfo {
            name: "incident".into(),
            version: INCIDENT_PROBE_VERSION,
        },
        engine: engine_info(),
        backend: sim.backend.info(),
        config: config.clone(),
        requests: sim.entries.iter().map(|e| e.info()).collect(),
        events,
        steps,
        assumptions: assumptions(config),
        verdict: Verdict {
            outcome,
            leak,
            http_status: response.status,
            foreign_pages_read: foreign,
            canaries_leaked: leaked.iter().map(|e| e.arrival.canary.clone()).collect(),
            tenants_leaked: leaked.iter().map(|e| e.arrival.tenant.clone()).collect(),
            latency_us,
            response_text: response.text,
            correct_answer,
            counters: sim.counters.clone(),
        },
        trace_sha256,
    })
}

/// This engine's version and the commit it was built from.
pub fn engine_info() -> EngineInfo {
    EngineInfo {
        version: env!("CARGO_PKG_VERSION").to_string(),
        commit: env!("KVW_COMMIT").to_string(),
    }
}

/// The model assumptions a configuration relies on, each with the flag of
/// `kvw probe incident` that runs the alternative.
pub fn assumptions(c: &ProbeConfig) -> Vec<Assumption> {
    let mut out = vec![Assumption {
        id: AssumptionId::DecodePool,
        alternative: "--decode-pool TOKENS".into(),
    }];
    let mut add = |on: bool, id, alternative: &str| {
        if on {
            out.push(Assumption {
                id,
                alternative: alternative.into(),
            });
        }
    };
    add(
        c.scale == Scale::Incident,
        AssumptionId::PageSize,
        "--page-size N",
    );
    add(
        c.scale == Scale::Incident,
        AssumptionId::WarmPool,
        "--scale walkthrough (a pool warmed by two requests)",
    );
    add(
        c.page_tail == PageTail::Carried,
        AssumptionId::PageTail,
        "--page-tail zeroed",
    );
    add(
        c.fixes.contains(&Fix::KvChecksum),
        AssumptionId::ChecksumScope,
        "--checksum-scope received",
    );
    add(
        c.fixes.contains(&Fix::PageTags),
        AssumptionId::TagRefusalStatus,
        "none: the status is fixed at 500",
    );
    add(
        c.poison_on_free != PoisonMode::Off,
        AssumptionId::PoisonOnFree,
        "--poison-on-free off",
    );
    add(
        c.fixes.contains(&Fix::ScrubOnFree),
        AssumptionId::ScrubOnFree,
        "--fixes without scrub-on-free",
    );
    out
}
