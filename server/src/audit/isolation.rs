//! Gate `isolation`: tenants with distinct canaries, interleaved and
//! concurrent; no tenant's answer may contain another tenant's canary.
//!
//! Each round has two phases. *Interleaved*: for every ordered pair of
//! tenants, the first sends an ordinary canary document and then the second
//! sends a long one (past the KV pool where the pool is known, as the public
//! analysis of the incident recommends), so freed pages of the first are
//! what the second's request may be handed. *Concurrent*: every tenant sends
//! an ordinary and a long document at once. Every answer is searched for
//! every other tenant's canary; a hit fails the gate and is quoted.

use futures_util::future::join_all;
use kvw_evidence::audit::{Exchange, GateResult};
use rand::SeedableRng as _;
use serde_json::json;

use super::client::Reply;
use super::{capacity, prompts, Audit, AuditError, GateOutcome};

/// Ordinary and long prompt lengths, in tokens.
pub fn lengths(a: &Audit) -> (u64, u64) {
    let f = &a.found;
    let context = f.context_len.unwrap_or(2048);
    let normal = f.pool_tokens.unwrap_or(context).min(context) / 2;
    let normal = normal.clamp(32, 2048);
    let long = f
        .pool_tokens
        .and_then(|p| capacity::over_pool_tokens(p, context, a.opts.max_tokens))
        .unwrap_or(normal);
    (normal, long)
}

/// Ordinary documents sent together before each long one.
pub fn warmers(normal: u64, long: u64) -> u64 {
    (long.div_ceil(normal.max(1)) + 1).min(8)
}

pub async fn run(a: &Audit) -> Result<GateOutcome, AuditError> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(a.opts.seed ^ 0x15);
    let canaries: Vec<String> = a
        .tenants
        .iter()
        .map(|t| prompts::canary(&t.label, &mut rng))
        .collect();
    let (normal, long) = lengths(a);
    let doc = |t: usize, tokens: u64| {
        let text = prompts::canary_document(&canaries[t], a.chars(tokens));
        a.body(t, &text, a.opts.max_tokens)
    };
    let n = a.tenants.len();
    let warmers = warmers(normal, long);
    let mut replies: Vec<(usize, Reply)> = Vec::new();
    for _ in 0..a.opts.rounds {
        for j in 0..n {
            for i in (0..n).filter(|&i| i != j) {
                // Enough of j's documents at once to cover a long prompt's
                // worth of KV when they are freed.
                let warm = join_all((0..warmers).map(|_| {
                    let body = doc(j, normal);
                    async move { a.complete(j, &body).await }
                }))
                .await;
                for r in warm {
                    replies.push((j, r?));
                }
                replies.push((i, a.complete(i, &doc(i, long)).await?));
            }
        }
        let batch = (0..n).flat_map(|t| [(t, normal), (t, long)]);
        let sent = join_all(batch.map(|(t, len)| {
            let body = doc(t, len);
            async move { (t, a.complete(t, &body).await) }
        }))
        .await;
        for (t, r) in sent {
            replies.push((t, r?));
        }
    }
    let mut leaks = Vec::new();
    let mut ok = 0;
    for (k, (t, r)) in replies.iter().enumerate() {
        if r.status == 200 {
            ok += 1;
        }
        // Search the whole body: a leak may sit in any field.
        for (owner, c) in canaries.iter().enumerate() {
            if owner != *t && r.body.contains(c.as_str()) {
                leaks.push(json!({
                    "exchange": k, "receiver": a.tenants[*t].label, "owner": a.tenants[owner].label,
                    "canary": c, "status": r.status, "answer": r.text(),
                }));
            }
        }
    }
    let exchanges: Vec<Exchange> = replies.into_iter().map(|(_, r)| r.exchange).collect();
    let evidence = json!({
        "tenants": n, "warmers": warmers, "rounds": a.opts.rounds, "requests": exchanges.len(), "answered_200": ok,
        "normal_prompt_tokens": normal, "long_prompt_tokens": long,
        "canaries": canaries, "leaks": leaks,
    });
    let (result, reason) = match leaks.first() {
        Some(l) => (
            GateResult::Fail,
            format!(
                "tenant {} received tenant {}'s canary {} (exchange {}); {} leak(s) in {} requests",
                l["receiver"].as_str().unwrap_or_default(),
                l["owner"].as_str().unwrap_or_default(),
                l["canary"].as_str().unwrap_or_default(),
                l["exchange"],
                leaks.len(),
                exchanges.len()
            ),
        ),
        None => (
            GateResult::Pass,
            format!(
                "no canary crossed tenants in {} requests ({ok} answered 200)",
                exchanges.len()
            ),
        ),
    };
    Ok(GateOutcome {
        result,
        reason,
        evidence,
        exchanges,
    })
}
