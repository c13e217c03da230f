//! Gate `capacity`: a prompt within the context but beyond the KV pool must
//! get a clear 4xx, never 200.
//!
//! This is the incident's trigger: SGLang accepted a context larger than its
//! prefill pool, rejected the over-pool prompt too late, and answered 200
//! with another tenant's KV. A server whose pool holds the whole context
//! cannot be put in that state; one whose pool is unknown is inconclusive.

use kvw_evidence::audit::GateResult;
use serde_json::json;

use super::{prompts, Audit, AuditError, GateOutcome};

/// Tokens of headroom kept below the context for the completion.
const MARGIN: u64 = 16;

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
    });
    let (Some(pool), Some(context)) = (f.pool_tokens, f.context_len) else {
        return Ok(GateOutcome {
            result: GateResult::Inconclusive,
            reason: format!(
                "the KV pool or the context length is unknown (pool: {}; context: {}); pass --pool-tokens and --context-len",
                f.pool_source, f.context_source
            ),
            evidence: facts,
            exchanges: vec![],
        });
    };
    let Some(tokens) = over_pool_tokens(pool, context, a.opts.max_tokens) else {
        return Ok(GateOutcome {
            result: GateResult::Pass,
            reason: format!("the KV pool ({pool} tokens) holds the whole context ({context} tokens): no prompt fits the context and exceeds the pool"),
            evidence: facts,
            exchanges: vec![],
        });
    };
    let Some(chars) = a.prompt_chars(tokens) else {
        return Ok(GateOutcome {
            result: GateResult::Inconclusive,
            reason: format!(
                "a {tokens}-token prompt past the {pool}-token pool would be {} characters, above the audit's {}-byte request cap",
                a.chars(tokens),
                super::bounds::MAX_REQUEST_BYTES
            ),
            evidence: facts,
            exchanges: vec![],
        });
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(a.opts.seed);
    let canary = prompts::canary(&a.tenants[0].label, &mut rng);
    let prompt = prompts::canary_document(&canary, chars);
    let r = a
        .complete(0, &a.body(0, &prompt, a.opts.max_tokens))
        .await?;
    let (result, reason) = match r.status {
        400..=499 => (
            GateResult::Pass,
            format!(
                "a {tokens}-token prompt (pool {pool}, context {context}) was refused with {}",
                r.status
            ),
        ),
        200 => (
            GateResult::Fail,
            format!("a {tokens}-token prompt beyond the {pool}-token pool answered 200"),
        ),
        0 => (
            GateResult::Fail,
            format!(
                "a {tokens}-token prompt beyond the pool got no answer within the request timeout"
            ),
        ),
        s => (
            GateResult::Fail,
            format!("a {tokens}-token prompt beyond the pool answered {s}, not a clear 4xx"),
        ),
    };
    let mut evidence = facts;
    evidence["prompt_tokens"] = json!(tokens);
    evidence["status"] = json!(r.status);
    evidence["answer"] = json!(r.text());
    evidence["complete"] = json!(r.complete);
    Ok(GateOutcome {
        result,
        reason,
        evidence,
        exchanges: vec![r.exchange],
    })
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
