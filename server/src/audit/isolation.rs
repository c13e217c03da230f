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
//!
//! What arrived of a body is searched too (a server that sends part of an
//! answer and stalls may have sent the leak in that part). An answer that
//! did not arrive whole proves nothing: without a leak, any such answer
//! makes the gate inconclusive, never a pass. Each reply is searched as it
//! comes and only its shortened exchange is kept, so the gate's memory does
//! not grow with the bodies a server sends.

use futures_util::future::join_all;
use kvw_evidence::audit::{Exchange, GateResult};
use rand::SeedableRng as _;
use serde_json::json;

use super::client::Reply;
use super::tokens::Text;
use super::{capacity, prompts, Audit, AuditError, Discovered, GateOutcome};

/// Ordinary and long prompt lengths, in tokens.
/// The long prompt is cut to the audit's request cap.
pub fn lengths(a: &Audit) -> (u64, u64) {
    lengths_for(
        &a.found,
        a.opts.max_tokens,
        a.max_prompt_tokens(Text::Canary),
    )
}

/// [`lengths`] from what discovery found, with the long prompt at most
/// `max_canary` tokens.
pub fn lengths_for(f: &Discovered, max_tokens: u32, max_canary: u64) -> (u64, u64) {
    let context = f.context_len.unwrap_or(2048);
    let normal = f.pool_tokens.unwrap_or(context).min(context) / 2;
    let normal = normal.clamp(32, 2048);
    let long = f
        .pool_tokens
        .and_then(|p| capacity::over_pool_tokens(p, context, max_tokens))
        .unwrap_or(normal)
        .min(max_canary);
    (normal, long)
}

/// What the gate keeps of one reply.
struct Seen {
    status: u16,
    answered: bool,
    exchange: Exchange,
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
        let text = prompts::canary_document(&canaries[t], a.chars_of(Text::Canary, tokens));
        a.body(t, &text, a.opts.max_tokens)
    };
    let n = a.tenants.len();
    let warmers = warmers(normal, long);
    let mut seen: Vec<Seen> = Vec::new();
    let mut leaks = Vec::new();
    // Search a reply for every other tenant's canary, then keep only its
    // shortened exchange.
    let mut take = |t: usize, r: Reply| {
        let k = seen.len();
        for (owner, c) in canaries.iter().enumerate() {
            if owner != t && r.body.contains(c.as_str()) {
                leaks.push(json!({
                    "exchange": k, "receiver": a.tenants[t].label, "owner": a.tenants[owner].label,
                    "canary": c, "status": r.status, "complete": r.complete,
                    "answer": excerpt(&r.body, c),
                }));
            }
        }
        seen.push(Seen {
            status: r.status,
            answered: r.answered(),
            exchange: r.exchange,
        });
    };
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
                    take(j, r?);
                }
                take(i, a.complete(i, &doc(i, long)).await?);
            }
        }
        let batch = (0..n).flat_map(|t| [(t, normal), (t, long)]);
        let sent = join_all(batch.map(|(t, len)| {
            let body = doc(t, len);
            async move { (t, a.complete(t, &body).await) }
        }))
        .await;
        for (t, r) in sent {
            take(t, r?);
        }
    }
    let ok = seen.iter().filter(|s| s.status == 200).count();
    let unanswered = super::unanswered(seen.iter().map(|s| s.answered));
    let exchanges: Vec<Exchange> = seen.into_iter().map(|s| s.exchange).collect();
    let evidence = json!({
        "tenants": n, "warmers": warmers, "rounds": a.opts.rounds, "requests": exchanges.len(), "answered_200": ok,
        "normal_prompt_tokens": normal, "long_prompt_tokens": long,
        "canaries": canaries, "leaks": leaks, "unanswered": unanswered,
    });
    let (result, reason) = match leaks.first() {
        Some(l) => (
            GateResult::Fail,
            format!(
                "{}; {} leak(s) in {} requests",
                received(l),
                leaks.len(),
                exchanges.len()
            ),
        ),
        None if !unanswered.is_empty() => (
            GateResult::Inconclusive,
            match super::silence(&exchanges) {
                Some(silent) => format!(
                    "no canary crossed tenants in what arrived, but {silent}"
                ),
                None => format!(
                    "no canary crossed tenants in what arrived, but {} of {} answers did not arrive in full (first: exchange {})",
                    unanswered.len(),
                    exchanges.len(),
                    unanswered[0]
                ),
            },
        ),
        None if ok == 0 => (
            GateResult::Inconclusive,
            format!(
                "none of {} requests answered 200 ({}), so no answer could carry another tenant's canary",
                exchanges.len(),
                statuses(&exchanges)
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
    Ok(GateOutcome::new(result, reason, evidence).resting_on(
        [
            ("ordinary canary document", normal),
            ("long canary document", long),
        ]
        .map(|(what, t)| a.estimate(what, Text::Canary, a.chars_of(Text::Canary, t)))
        .to_vec(),
        exchanges,
    ))
}

/// "12 x 503, 4 x 500": how the answers were spread over statuses.
fn statuses(exchanges: &[Exchange]) -> String {
    let mut count = std::collections::BTreeMap::<u16, usize>::new();
    for e in exchanges {
        *count.entry(e.status).or_default() += 1;
    }
    count
        .iter()
        .rev()
        .map(|(s, n)| format!("{n} x {s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Up to 80 characters either side of the first `canary` in `body`.
/// "tenant B received tenant A's canary C (exchange N)": one leak, as the
/// gates that find leaks name it.
pub fn received(leak: &serde_json::Value) -> String {
    format!(
        "tenant {} received tenant {}'s canary {} (exchange {})",
        leak["receiver"].as_str().unwrap_or_default(),
        leak["owner"].as_str().unwrap_or_default(),
        leak["canary"].as_str().unwrap_or_default(),
        leak["exchange"],
    )
}

fn excerpt(body: &str, canary: &str) -> String {
    let Some(at) = body.find(canary) else {
        return String::new();
    };
    let start = body.floor_char_boundary(at.saturating_sub(80));
    let end = body.ceil_char_boundary((at + canary.len() + 80).min(body.len()));
    body[start..end].to_string()
}
