//! What the audit will send, before it sends it.
//!
//! After discovery (GET requests only, no prompt) the audit knows the
//! context and pool it will aim at, and every gate's prompts are targets in
//! tokens: this module counts, per step, the requests and the prompt tokens
//! of the completions it will send. Before calibration the counts are an
//! estimate: the calibration samples are sized at `--chars-per-token`, and
//! whether the server counts tokens at all is not yet known. After
//! calibration they are in the server's tokens (its `/tokenize` or its
//! `usage.prompt_tokens`), unless the server counts nothing, when they stay
//! assumed. Not counted: the text sent to `/tokenize` to fit a prompt (at
//! most [`super::bounds::MAX_FIT_STEPS`] counts per fitted prompt; a
//! tokenizer prefills nothing), and the resends of a prompt the server
//! counts short of its limit (at most two per such prompt, noted on its
//! line).

use kvw_evidence::audit::SizeSource;
use serde::Serialize;

use super::tokens::{Calibration, SAMPLE_CHARS};
use super::{
    admission, capacity, isolation, lifetime, prefix_cache, status, version, AuditOptions,
    Discovered,
};

/// One step of the plan.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// `calibration` or a gate's name.
    pub step: String,
    pub requests: u64,
    /// Prompt tokens of the completions the step sends.
    pub prompt_tokens: u64,
    /// What the counts leave out or rest on.
    pub note: String,
}

/// The whole plan.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub requests: u64,
    pub prompt_tokens: u64,
    /// `estimate` before calibration, `server tokens` after it, `assumed`
    /// when the server counts no tokens.
    pub sizes: String,
    /// How the sizes are known, in words.
    pub how: String,
}

/// What the plan is computed from.
pub struct Facts<'a> {
    pub opts: &'a AuditOptions,
    pub found: &'a Discovered,
    pub tenants: u64,
    /// `None` before calibration.
    pub calibration: Option<&'a Calibration>,
}

impl Facts<'_> {
    /// Characters per token of canary text: calibrated, else assumed.
    fn canary_rate(&self) -> f64 {
        self.calibration
            .map_or(self.opts.chars_per_token, |c| c.canary_rate)
    }
}

/// The plan of the chosen gates.
pub fn plan(f: &Facts) -> Plan {
    let mut steps = Vec::new();
    if f.calibration.is_none() {
        let chars = calibration_chars(f.found.context_len) as f64;
        steps.push(Step {
            step: "calibration".into(),
            requests: CALIBRATION_REQUESTS,
            prompt_tokens: (2.0 * chars / f.opts.chars_per_token).ceil() as u64,
            note: format!(
                "at most: two {chars}-character samples, to /tokenize (nothing prefilled) or, without one, as completions of max_tokens 1"
            ),
        });
    }
    for gate in &f.opts.gates {
        steps.push(match gate.as_str() {
            "version" => Step {
                step: "version".into(),
                requests: version::REQUESTS,
                prompt_tokens: 0,
                note: "at most: GET /get_server_info and GET /version, no prompt".into(),
            },
            "capacity" => capacity_step(f),
            "admission" => admission_step(f),
            "isolation" => isolation_step(f),
            "lifetime" => lifetime_step(f),
            "status" => status_step(f),
            _ => prefix_cache_step(f),
        });
    }
    let (sizes, how) = match f.calibration {
        None => (
            "estimate",
            format!(
                "not yet calibrated: the gates' targets in tokens, sized at --chars-per-token {} until the server counts a sample",
                f.opts.chars_per_token
            ),
        ),
        Some(c) if c.source == SizeSource::Assumed => ("assumed", c.how.clone()),
        Some(c) => ("server tokens", c.how.clone()),
    };
    Plan {
        requests: steps.iter().map(|s| s.requests).sum(),
        prompt_tokens: steps.iter().map(|s| s.prompt_tokens).sum(),
        steps,
        sizes: sizes.into(),
        how,
    }
}

/// Characters of each calibration sample for a context of `context`.
pub fn calibration_chars(context: Option<u64>) -> usize {
    context.map_or(SAMPLE_CHARS, |c| {
        (c / 2).clamp(16, SAMPLE_CHARS as u64) as usize
    })
}

/// Most calibration requests: two samples to each `/tokenize` shape, then
/// two completions.
const CALIBRATION_REQUESTS: u64 = 6;

const RESENDS: &str = "a prompt the server counts short of its limit is resent, up to twice";

fn capacity_step(f: &Facts) -> Step {
    let d = f.found;
    let (requests, tokens, note) = match (d.pool_tokens, d.context_len) {
        (Some(pool), Some(context)) => {
            match capacity::over_pool_tokens(pool, context, f.opts.max_tokens) {
                Some(t) => (
                    1,
                    t,
                    format!("one prompt past the {pool}-token pool; {RESENDS}"),
                ),
                None => (0, 0, "the pool holds the context: nothing to send".into()),
            }
        }
        _ => (0, 0, "pool or context unknown: nothing to send".into()),
    };
    Step {
        step: "capacity".into(),
        requests,
        prompt_tokens: tokens,
        note,
    }
}

fn admission_step(f: &Facts) -> Step {
    let d = f.found;
    let tokenize = f.calibration.and_then(|c| c.tokenize).is_some();
    let bound = f.opts.refusal_bound.as_secs_f64();
    let (requests, tokens, note) =
        match admission::target(d.pool_tokens, d.context_len, f.opts.max_tokens, tokenize) {
            Some((t, limit, what)) => (
                1,
                t,
                format!(
                    "one prompt past the {limit}-token {what}, refused within {bound} s; {RESENDS}"
                ),
            ),
            None => (0, 0, "context unknown: nothing to send".into()),
        };
    Step {
        step: "admission".into(),
        requests,
        prompt_tokens: tokens,
        note,
    }
}

fn isolation_step(f: &Facts) -> Step {
    let max_canary = (super::bounds::MAX_PROMPT_CHARS as f64 / f.canary_rate()).floor() as u64;
    let (normal, long) = isolation::lengths_for(f.found, f.opts.max_tokens, max_canary);
    let w = isolation::warmers(normal, long);
    let n = f.tenants;
    let pairs = n * n.saturating_sub(1);
    let rounds = u64::from(f.opts.rounds);
    Step {
        step: "isolation".into(),
        requests: rounds * ((w + 1) * pairs + 2 * n),
        prompt_tokens: rounds * (pairs * (w * normal + long) + n * (normal + long)),
        note: format!(
            "{rounds} round(s) of {normal}- and {long}-token canary documents, {w} before each long one"
        ),
    }
}

fn lifetime_step(f: &Facts) -> Step {
    let max_canary = (super::bounds::MAX_PROMPT_CHARS as f64 / f.canary_rate()).floor() as u64;
    let (long, _) = isolation::lengths_for(f.found, f.opts.max_tokens, max_canary);
    let rounds = u64::from(f.opts.rounds);
    let trials = lifetime::TRIALS;
    let per_round =
        long + trials / 2 * (lifetime::SHORT_TOKENS + long) + 2 * trials * lifetime::VICTIM_TOKENS;
    Step {
        step: "lifetime".into(),
        requests: rounds * lifetime::requests_per_round(),
        prompt_tokens: rounds * per_round,
        note: format!(
            "{rounds} round(s): {trials} {}- and {long}-token canary documents walked away from, each beside two {}-token documents of another tenant",
            lifetime::SHORT_TOKENS,
            lifetime::VICTIM_TOKENS
        ),
    }
}

fn status_step(f: &Facts) -> Step {
    let tokenize = f.calibration.and_then(|c| c.tokenize).is_some();
    let (requests, tokens, note) = match f.found.context_len {
        Some(context) => (
            4,
            context.saturating_add(status::margin(context, tokenize)) + status::ORDINARY_TOKENS,
            format!("a prompt past the {context}-token context ({RESENDS}), two malformed requests, a {}-token prompt", status::ORDINARY_TOKENS),
        ),
        None => (
            3,
            status::ORDINARY_TOKENS,
            format!(
                "context unknown: two malformed requests and a {}-token prompt",
                status::ORDINARY_TOKENS
            ),
        ),
    };
    Step {
        step: "status".into(),
        requests,
        prompt_tokens: tokens,
        note,
    }
}

fn prefix_cache_step(f: &Facts) -> Step {
    let prefix = prefix_cache::prefix_tokens(f.found, f.opts);
    let pairs = u64::from(f.opts.pairs);
    Step {
        step: "prefix-cache".into(),
        requests: 3 * pairs,
        // Each pair: the prefix, then the prefix and a fresh one with a short suffix.
        prompt_tokens: pairs * (3 * prefix + 2 * prefix_cache::SUFFIX_TOKENS),
        note: format!("{pairs} pairs on a {prefix}-token prefix, max_tokens 1"),
    }
}

impl Plan {
    /// The plan as lines for a person.
    pub fn lines(&self, endpoint: &str) -> Vec<String> {
        let mut out = vec![
            format!(
                "plan for {endpoint} (prompt tokens: {}; {})",
                self.sizes, self.how
            ),
            format!(
                "  {:<13} {:>8} {:>13}  what",
                "step", "requests", "prompt tokens"
            ),
        ];
        for s in &self.steps {
            out.push(format!(
                "  {:<13} {:>8} {:>13}  {}",
                s.step, s.requests, s.prompt_tokens, s.note
            ));
        }
        out.push(format!(
            "  {:<13} {:>8} {:>13}",
            "total", self.requests, self.prompt_tokens
        ));
        out
    }

    /// Refuse a plan above `max` prompt tokens.
    pub fn within(&self, max: Option<u64>) -> Result<(), super::AuditError> {
        let sent = match self.sizes.as_str() {
            "estimate" => "no prompt sent",
            _ => "no gate traffic sent",
        };
        match max {
            Some(m) if self.prompt_tokens > m => Err(super::AuditError(format!(
                "the audit would send {} prompt tokens ({}), above --max-prompt-tokens {m}; {sent}",
                self.prompt_tokens, self.sizes
            ))),
            _ => Ok(()),
        }
    }
}
