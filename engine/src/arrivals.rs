//! Scenario scripts: who sends what, when.
//!
//! A scenario is a list of arrivals (tenant, prompt length, tokens to
//! generate, time) plus faults. The incident scenario runs two ordinary
//! tenants first so that their KV really is left behind in freed pages, then
//! the probed tenant's over-long prompt.

use kvw_evidence::{ProbeConfig, Scale};
use rand::Rng;

use crate::attention;

/// One request of the script.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub at_us: u64,
    pub tenant: String,
    pub prompt: Vec<u32>,
    pub canary: String,
    pub max_new_tokens: u32,
    /// The request the receipt is about.
    pub probed: bool,
}

/// Prompt length of the probed request: within the context, above the
/// incident's input cap (681,274) and above the 681,280-token prefill pool,
/// like every affected prompt in the disclosure.
pub fn probed_prompt_len(scale: Scale) -> usize {
    match scale {
        Scale::Walkthrough => 128,
        Scale::Incident => 681_281,
    }
}

/// Tenants whose earlier requests warm the decode pool at incident scale.
const WARM_TENANTS: [&str; 11] = [
    "initech",
    "hooli",
    "stark",
    "wayne",
    "wonka",
    "tyrell",
    "cyberdyne",
    "soylent",
    "oscorp",
    "vandelay",
    "massive",
];

/// Prompt length of each warming request at incident scale: together they
/// write more decode pages (11 × 1,016) than the probe will reserve (10,646).
const WARM_PROMPT: usize = 65_000;

/// The incident: `globex` and then `acme` are served normally (acme's
/// request is the larger one and reuses globex's freed pages), then
/// `umbrella` sends a prompt the prefill pool cannot hold. At incident scale
/// the decode pool is warm first, as a busy production pool is: earlier
/// requests of eleven more tenants filled and freed it (model assumption
/// `warm-pool`), so the pages the probe reserves hold real foreign KV.
pub fn incident(config: &ProbeConfig, rng: &mut impl Rng) -> Vec<Arrival> {
    let (globex_len, acme_len, gap_us) = match config.scale {
        Scale::Walkthrough => (60, 100, 2_000_000),
        Scale::Incident => (4_000, 8_000, 2_000_000),
    };
    let jitter = rng.random_range(0..1_000);
    let mut arrival = |tenant: &str, at_us: u64, len: usize, new: u32, probed: bool| {
        let canary = attention::canary(tenant, rng);
        let prompt = attention::document(tenant, &canary, len, rng);
        Arrival {
            at_us,
            tenant: tenant.to_string(),
            prompt,
            canary,
            max_new_tokens: new,
            probed,
        }
    };
    let mut out = Vec::new();
    let mut start = 0;
    if config.scale == Scale::Incident {
        for (k, tenant) in WARM_TENANTS.iter().enumerate() {
            out.push(arrival(tenant, k as u64 * 1_000, WARM_PROMPT, 2, false));
        }
        start = 10 * gap_us;
    }
    out.push(arrival("globex", start, globex_len, 20, false));
    out.push(arrival(
        "acme",
        start + gap_us / 2 + jitter,
        acme_len,
        28,
        false,
    ));
    out.push(arrival(
        "umbrella",
        start + gap_us + jitter,
        probed_prompt_len(config.scale),
        config.max_new_tokens,
        true,
    ));
    out
}
