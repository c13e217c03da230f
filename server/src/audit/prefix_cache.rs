//! Gate `prefix-cache`: does a prefix one tenant sent make another tenant's
//! first token faster?
//!
//! For each pair: tenant `t0` sends a fresh random prefix P (which a shared
//! cache would keep); then tenant `t1` sends P plus a suffix ("hit") and a
//! fresh prefix Q of the same length plus the same suffix ("miss"), in a
//! random order. With `max_tokens` 1 the latency is time-to-first-token.
//! A one-sided Mann-Whitney U test ([`super::stats`]) at false-positive rate
//! `alpha` decides: hits significantly faster fails the gate (another
//! tenant's cached prefix is observable — the prompt-caching side channel).
//! With `--cache-salt` every request carries a per-tenant `cache_salt`
//! (vLLM's defence), which a server honouring it keeps apart.

use kvw_evidence::audit::{Exchange, GateResult};
use rand::{Rng, SeedableRng as _};
use serde_json::json;

use super::stats::{mann_whitney_less, median};
use super::tokens::Text;
use super::{prompts, Audit, AuditError, AuditOptions, Discovered, GateOutcome};

/// Most tokens of a pair's suffix (` question N`, N below 1000): one per
/// character at worst.
pub const SUFFIX_TOKENS: u64 = 13;

/// The prefix length: `--prefix-tokens`, else three quarters of what the
/// pool and context hold, within 64 to 4,096 tokens.
pub fn prefix_tokens(found: &Discovered, opts: &AuditOptions) -> u64 {
    let context = found.context_len.unwrap_or(2048);
    let cap = found.pool_tokens.unwrap_or(context).min(context);
    opts.prefix_tokens.unwrap_or((cap * 3 / 4).clamp(64, 4096))
}

pub async fn run(a: &Audit) -> Result<GateOutcome, AuditError> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(a.opts.seed ^ 0xca);
    let prefix = prefix_tokens(&a.found, &a.opts);
    let Some(chars) = a
        .prompt_chars(Text::Filler, prefix.saturating_add(64))
        .map(|_| a.chars_of(Text::Filler, prefix))
    else {
        return Ok(GateOutcome::new(
            GateResult::Inconclusive,
            format!(
                "a {prefix}-token prefix is above the audit's {}-byte request cap",
                super::bounds::MAX_REQUEST_BYTES
            ),
            json!({"prefix_tokens": prefix}),
        ));
    };
    let mut hits = Vec::new();
    let mut misses = Vec::new();
    let mut exchanges: Vec<Exchange> = Vec::new();
    let mut failed = 0;
    for k in 0..a.opts.pairs {
        let p = prompts::filler(chars, &mut rng);
        let q = prompts::filler(chars, &mut rng);
        let suffix = format!(" question {k}");
        let warm = a.complete(0, &a.body(0, &p, 1)).await?;
        let hit_body = a.body(1, &format!("{p}{suffix}"), 1);
        let miss_body = a.body(1, &format!("{q}{suffix}"), 1);
        let hit_first = rng.random::<bool>();
        let (hit, miss) = if hit_first {
            let h = a.complete(1, &hit_body).await?;
            (h, a.complete(1, &miss_body).await?)
        } else {
            let m = a.complete(1, &miss_body).await?;
            (a.complete(1, &hit_body).await?, m)
        };
        // Only whole 200 answers count: a cut body's timing measures the cut.
        if [&warm, &hit, &miss]
            .iter()
            .all(|r| r.status == 200 && r.complete)
        {
            hits.push(hit.first_byte_us as f64);
            misses.push(miss.first_byte_us as f64);
        } else {
            failed += 1;
        }
        exchanges.extend([warm.exchange, hit.exchange, miss.exchange]);
    }
    let alpha = a.opts.alpha;
    let test = mann_whitney_less(&hits, &misses);
    let (mh, mm) = (median(&hits), median(&misses));
    let mut evidence = json!({
        "pairs": a.opts.pairs, "usable_pairs": hits.len(), "failed_pairs": failed,
        "prefix_tokens": prefix, "alpha": alpha, "test": "one-sided Mann-Whitney U (hits faster than misses)",
        "hit_ttft_us": hits, "miss_ttft_us": misses,
        "median_hit_us": mh, "median_miss_us": mm, "median_difference_us": mm - mh,
        "cache_salt": a.opts.cache_salt,
    });
    let Some(t) = test.filter(|_| hits.len() >= 8) else {
        return Ok(GateOutcome::new(
            GateResult::Inconclusive,
            format!(
                "only {} of {} pairs answered 200; at least 8 are needed",
                hits.len(),
                a.opts.pairs
            ),
            evidence,
        )
        .resting_on(
            vec![a.estimate("shared prefix", Text::Filler, chars)],
            exchanges,
        ));
    };
    evidence["u"] = json!(t.u);
    evidence["p_value"] = json!(t.p_value);
    evidence["rank_biserial"] = json!(t.rank_biserial);
    let (result, reason) = if t.p_value < alpha {
        (GateResult::Fail, format!(
            "t1's first token came faster on t0's cached prefix: median {:.0} vs {:.0} us, p = {:.2e} < alpha {alpha}, rank-biserial {:.2}",
            mh, mm, t.p_value, t.rank_biserial
        ))
    } else {
        (GateResult::Pass, format!(
            "no cross-tenant prefix-cache speed-up: median {:.0} vs {:.0} us, p = {:.3} >= alpha {alpha}",
            mh, mm, t.p_value
        ))
    };
    Ok(GateOutcome::new(result, reason, evidence).resting_on(
        vec![a.estimate("shared prefix", Text::Filler, chars)],
        exchanges,
    ))
}
