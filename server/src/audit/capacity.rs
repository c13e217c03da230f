//! Gate `capacity` (the pool / context gate): the pool and context the
//! server declares, the incident's precondition (a KV pool smaller than the
//! context) reported as such, and a prompt within the context but beyond
//! the pool, which must get a clear 4xx, never 200.
//!
//! This is the incident's trigger: SGLang accepted a context larger than its
//! prefill pool, rejected the over-pool prompt too late, and answered 200
//! with another tenant's KV. The pool and context come from discovery
//! (SGLang's `/get_server_info` `max_total_num_tokens` and
//! `context_length`, vLLM's `/metrics` `vllm:cache_config_info` and
//! `max_model_len`, or the flags). A server whose pool holds the whole
//! context lacks the precondition and cannot be put in that state; one
//! whose pool is unknown is inconclusive. The prompt is sized in the
//! server's tokens ([`super::tokens`]); a non-4xx answer to a prompt whose
//! size was only assumed decides nothing.

use kvw_evidence::audit::GateResult;
use serde_json::json;

use super::tokens::Text;
use super::{prompts, Audit, AuditError, GateOutcome};

/// Tokens of headroom kept below the context for the completion.
const MARGIN: u64 = 16;

/// The incident's precondition: a KV pool smaller than the context; `None`
/// when either is unknown.
pub fn precondition(pool: Option<u64>, context: Option<u64>) -> Option<bool> {
    Some(pool? < context?)
}

/// The prompt length (tokens) the gate sends: past the pool, inside the context.
pub fn over_pool_tokens(pool: u64, context: u64, max_tokens: u32) -> Option<u64> {
    let room = context.checked_sub(u64::from(max_tokens).checked_add(MARGIN)?)?;
    (room > pool.checked_add(MARGIN)?).then(|| pool + (room - pool) / 2)
}

pub async fn run(a: &Audit) -> Result<GateOutcome, AuditError> {
    let f = &a.found;
    let facts = json!({
        "pool_tokens": f.pool_tokens, "pool_source": f.pool_source,
        "context_len": f.context_len, "context_source": f.context_source,
        "precondition": precondition(f.pool_tokens, f.context_len),
    });
    let (Some(pool), Some(context)) = (f.pool_tokens, f.context_len) else {
        let reason = format!(
            "the KV pool or the context length is unknown (pool: {}; context: {}); pass --pool-tokens and --context-len",
            f.pool_source, f.context_source
        );
        return Ok(GateOutcome::new(GateResult::Inconclusive, reason, facts));
    };
    let Some(tokens) = over_pool_tokens(pool, context, a.opts.max_tokens) else {
        let reason = if pool >= context {
            format!("the KV pool ({pool} tokens) holds the whole context ({context} tokens): the incident's precondition (pool < context) is absent, and no prompt fits the context and exceeds the pool")
        } else {
            format!("the incident's precondition holds (pool {pool} < context {context} tokens), but no prompt with --max-tokens {} of room fits between them", a.opts.max_tokens)
        };
        return Ok(GateOutcome::new(GateResult::Pass, reason, facts));
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(a.opts.seed);
    let canary = prompts::canary(&a.tenants[0].label, &mut rng);
    let make = |chars: usize| prompts::canary_document(&canary, chars);
    let past = a
        .send_past("beyond the pool", Text::Canary, tokens, pool, &make)
        .await?;
    let Some(r) = past.reply else {
        let reason = format!(
            "a {tokens}-token prompt past the {pool}-token pool would be {} characters, above the audit's {}-byte request cap",
            a.chars_of(Text::Canary, tokens),
            super::bounds::MAX_REQUEST_BYTES
        );
        return Ok(GateOutcome::new(GateResult::Inconclusive, reason, facts)
            .resting_on(past.sizes, vec![]));
    };
    // What the server counted, or the calibrated estimate; `None` when the
    // size was only assumed.
    let size = past.tokens;
    let (result, reason) = match (r.status, size) {
        (400..=499, _) => (
            GateResult::Pass,
            format!(
                "the incident's precondition holds (pool {pool} < context {context} tokens); a {}-token prompt within the context and past the pool was refused with {}",
                size.unwrap_or(tokens),
                r.status
            ),
        ),
        (s, None) => (
            GateResult::Inconclusive,
            format!(
                "a prompt assumed to be {tokens} tokens (--chars-per-token) answered {s}; the server counted none of its tokens, so it may not be past the pool"
            ),
        ),
        (s, Some(n)) if n <= pool => (
            GateResult::Inconclusive,
            format!("the server counted the prompt as {n} tokens, not past the {pool}-token pool, and answered {s}"),
        ),
        (200, Some(n)) => (
            GateResult::Fail,
            format!("the incident's precondition holds (pool {pool} < context {context} tokens) and a {n}-token prompt beyond the pool answered 200"),
        ),
        (0, Some(n)) => (
            GateResult::Fail,
            format!("a {n}-token prompt beyond the pool got no answer within the request timeout"),
        ),
        (s, Some(n)) => (
            GateResult::Fail,
            format!("a {n}-token prompt beyond the pool answered {s}, not a clear 4xx"),
        ),
    };
    let mut evidence = facts;
    evidence["prompt_tokens"] = json!(size.unwrap_or(tokens));
    evidence["status"] = json!(r.status);
    evidence["answer"] = json!(r.text());
    evidence["complete"] = json!(r.complete);
    Ok(GateOutcome::new(result, reason, evidence).resting_on(past.sizes, past.exchanges))
}

use rand::SeedableRng as _;

#[cfg(test)]
mod tests {
    use super::over_pool_tokens;

    #[test]
    fn absurd_sizes_do_not_overflow() {
        assert_eq!(
            over_pool_tokens(4096, 8192, 32),
            Some(4096 + (8192 - 48 - 4096) / 2)
        );
        assert_eq!(over_pool_tokens(u64::MAX, 8192, 32), None);
        assert_eq!(
            over_pool_tokens(4096, u64::MAX, u32::MAX).map(|t| t > 4096),
            Some(true)
        );
        assert_eq!(over_pool_tokens(8192, 8192, 32), None);
    }
}
