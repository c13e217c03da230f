//! Gate `admission`: a prompt the server rejects must be refused promptly,
//! with its original 4xx.
//!
//! Before SGLang PR #38935 a prompt past a worker's pool was admitted into
//! the PD queues anyway, and under upstream's router the client got
//! decode's 500 at its waiting timeout (300 s by default), not prefill's
//! 400. The gate sends a prompt the server must refuse — past the KV pool
//! where the pool is smaller than the context (the #38935 path), else past
//! the context — sized in the server's tokens ([`super::tokens`]), and
//! times the answer from sending to its last byte. A 4xx within
//! `--refusal-bound` passes; a 4xx past it, a 5xx or any other refusal
//! fails; no answer within the request timeout is a finding too (the wait
//! is bounded by it, never a hang). A 200 was not a refusal: the capacity
//! and status gates judge it, and this one is inconclusive. A prompt only
//! assumed (`--chars-per-token`) to be past the limit decides nothing.

use std::time::Duration;

use kvw_evidence::audit::GateResult;
use serde_json::json;

use super::tokens::{self, Text};
use super::{capacity, status, Audit, AuditError, GateOutcome};

/// `--refusal-bound` unless given.
pub const DEFAULT_REFUSAL_BOUND: Duration = Duration::from_secs(10);

/// The prompt the gate sends: its target and limit in tokens and what the
/// limit is; `None` when the context is unknown.
pub fn target(
    pool: Option<u64>,
    context: Option<u64>,
    max_tokens: u32,
    tokenize: bool,
) -> Option<(u64, u64, &'static str)> {
    let context = context?;
    if let Some(t) = pool.and_then(|p| capacity::over_pool_tokens(p, context, max_tokens)) {
        return Some((t, pool.unwrap_or_default(), "pool"));
    }
    Some((
        context.saturating_add(status::margin(context, tokenize)),
        context,
        "context",
    ))
}

fn secs(us: u64) -> String {
    format!("{:.3} s", us as f64 / 1e6)
}

pub async fn run(a: &Audit) -> Result<GateOutcome, AuditError> {
    let bound = a.opts.refusal_bound;
    let bound_us = bound.as_micros() as u64;
    let timeout = a.opts.limits.request_timeout;
    let f = &a.found;
    let tokenize = a.calibration.tokenize.is_some();
    let Some((target, limit, what)) =
        target(f.pool_tokens, f.context_len, a.opts.max_tokens, tokenize)
    else {
        let reason = format!(
            "the context length is unknown ({}), so no prompt is sure to be refused; pass --context-len",
            f.context_source
        );
        return Ok(GateOutcome::new(
            GateResult::Inconclusive,
            reason,
            json!({"bound_us": bound_us}),
        ));
    };
    let seed = a.opts.seed ^ 0xad;
    let make = |chars: usize| tokens::sample(Text::Filler, chars, seed);
    let purpose = format!("past the {what}, to be refused");
    let past = a
        .send_past(&purpose, Text::Filler, target, limit, &make)
        .await?;
    let mut evidence = json!({
        "limit": what, "limit_tokens": limit, "bound_us": bound_us,
        "request_timeout_s": timeout.as_secs(),
    });
    let Some(r) = past.reply else {
        let reason = format!(
            "a {target}-token prompt past the {what} would exceed the audit's {}-byte request cap",
            super::bounds::MAX_REQUEST_BYTES
        );
        return Ok(GateOutcome::new(GateResult::Inconclusive, reason, evidence)
            .resting_on(past.sizes, vec![]));
    };
    let took = r.total_us;
    let size = past.tokens;
    let n = size.unwrap_or(target);
    let prompt = format!("a {n}-token prompt past the {limit}-token {what}");
    let (result, reason) = match (r.status, size) {
        (400..=499, _) if took <= bound_us => (
            GateResult::Pass,
            format!(
                "{prompt} was refused with {} in {} (bound {})",
                r.status,
                secs(took),
                secs(bound_us)
            ),
        ),
        (400..=499, _) => (
            GateResult::Fail,
            format!(
                "{prompt} was refused with {} only after {}, past the {} bound",
                r.status,
                secs(took),
                secs(bound_us)
            ),
        ),
        (200, _) => (
            GateResult::Inconclusive,
            format!("{prompt} answered 200, so there was no refusal to time (the capacity and status gates judge a 200)"),
        ),
        (_, None) => (
            GateResult::Inconclusive,
            format!(
                "a prompt assumed (--chars-per-token) to be past the {limit}-token {what} answered {} after {}; the server counted none of its tokens",
                r.status,
                secs(took)
            ),
        ),
        (_, Some(m)) if m <= limit => (
            GateResult::Inconclusive,
            format!("the server counted the prompt meant to be past the {what} as {m} tokens, within its {limit} tokens"),
        ),
        (0, _) => (
            GateResult::Fail,
            format!(
                "{prompt} got no answer within the request timeout ({} s): a rejected prompt must be refused promptly",
                timeout.as_secs()
            ),
        ),
        (s, _) => (
            GateResult::Fail,
            format!(
                "{prompt} answered {s} after {}, not its original 4xx",
                secs(took)
            ),
        ),
    };
    evidence["prompt_tokens"] = json!(n);
    evidence["status"] = json!(r.status);
    evidence["refusal_us"] = json!(took);
    evidence["complete"] = json!(r.complete);
    Ok(GateOutcome::new(result, reason, evidence).resting_on(past.sizes, past.exchanges))
}

#[cfg(test)]
mod tests {
    use super::target;

    #[test]
    fn the_refused_prompt_is_past_the_pool_where_one_fits_else_past_the_context() {
        let (t, limit, what) = target(Some(4096), Some(8192), 32, true).unwrap();
        assert!(t > 4096 && t < 8192 && limit == 4096 && what == "pool");
        assert_eq!(
            target(Some(8192), Some(8192), 32, true),
            Some((8192 + 64, 8192, "context"))
        );
        assert_eq!(
            target(None, Some(8192), 32, false),
            Some((8192 + 1024, 8192, "context"))
        );
        assert_eq!(target(Some(4096), None, 32, true), None);
    }
}
