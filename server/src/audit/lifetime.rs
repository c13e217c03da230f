//! Gate `lifetime`: a tenant walks away from its requests mid-prefill and
//! mid-stream while another tenant's requests run; every answer must carry
//! only its own tenant's canary.
//!
//! A request whose client goes away is aborted inside the server, and its
//! KV pages are given back while writes into them may still be in flight:
//! SGLang #24527 (decode gives up on a transfer, its pages are reused, a
//! late write lands in the next tenant's page), closed by deferred release
//! (#35049). From outside: tenant `t0` sends canary documents, short and
//! long, and drops the connection part-way (after half the latency of one
//! of its answered requests, or, streamed, after the first bytes), while
//! `t1` has a request running and sends another right after each drop.
//! Every answer, `t0`'s answered ones included, is searched for the other
//! tenant's canary; a hit fails the gate and is quoted. Without a leak, a
//! `t1` answer that did not arrive whole makes the gate inconclusive.
//!
//! What the gate can see: a late write shows only where the next tenant's
//! answer reads it, and only a whole canary (18 characters) is searched
//! for, so a fault whose foreign bytes are shorter than a canary, or land
//! where no answer reads, escapes it. A server whose stream starts only
//! once the answer is whole (`kvw serve --openai`) is walked away from
//! before its first byte, mid-request.

use std::time::Duration;

use futures_util::future::join;
use kvw_evidence::audit::{Exchange, GateResult};
use rand::SeedableRng as _;
use serde_json::json;

use super::client::{Abandon, Reply};
use super::tokens::Text;
use super::{isolation, prompts, Audit, AuditError, GateOutcome};

/// Tokens of the short documents `t0` walks away from.
pub const SHORT_TOKENS: u64 = 48;

/// Tokens of `t1`'s documents.
pub const VICTIM_TOKENS: u64 = 256;

/// `t0`'s documents per round: short and long, each walked away from
/// mid-request and mid-stream.
pub const TRIALS: u64 = 4;

/// Requests per round: per trial `t1`'s running request, `t0`'s abandoned
/// one and `t1`'s next; plus one answered `t0` request that times the
/// walk-away.
pub fn requests_per_round() -> u64 {
    1 + 3 * TRIALS
}

/// `t0`'s long document: the isolation gate's ordinary length.
pub fn long_tokens(a: &Audit) -> u64 {
    isolation::lengths(a).0
}

struct Seen {
    answered: bool,
    tenant: usize,
    exchange: Exchange,
}

pub async fn run(a: &Audit) -> Result<GateOutcome, AuditError> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(a.opts.seed ^ 0x11fe);
    let canaries: Vec<String> = a.tenants[..2]
        .iter()
        .map(|t| prompts::canary(&t.label, &mut rng))
        .collect();
    let long = long_tokens(a);
    let doc = |t: usize, tokens: u64, stream: bool| {
        let text = prompts::canary_document(&canaries[t], a.chars_of(Text::Canary, tokens));
        let mut b = a.body(t, &text, a.opts.max_tokens);
        if stream {
            b["stream"] = json!(true);
        }
        b
    };
    let mut seen: Vec<Seen> = Vec::new();
    let mut leaks = Vec::new();
    let mut abandoned = 0u64;
    let mut take = |t: usize, r: Reply, counts: bool| {
        let k = seen.len();
        let other = 1 - t;
        if r.body.contains(canaries[other].as_str()) {
            leaks.push(json!({
                "exchange": k, "receiver": a.tenants[t].label, "owner": a.tenants[other].label,
                "canary": canaries[other], "status": r.status, "complete": r.complete,
            }));
        }
        seen.push(Seen {
            answered: r.answered() || !counts,
            tenant: t,
            exchange: r.exchange,
        });
    };
    for _ in 0..a.opts.rounds {
        // One answered request of t0 times the walk-away: half its latency.
        let timed = a.complete(0, &doc(0, long, false)).await?;
        let half = Duration::from_micros(timed.total_us / 2)
            .clamp(Duration::from_millis(20), a.opts.limits.request_timeout / 2);
        take(0, timed, true);
        for trial in 0..TRIALS {
            let tokens = if trial % 2 == 0 { SHORT_TOKENS } else { long };
            let (how, stream) = if trial < 2 {
                (Abandon::After(half), false)
            } else {
                (Abandon::FirstBytes(half), true)
            };
            let running = doc(1, VICTIM_TOKENS, false);
            let gone = doc(0, tokens, stream);
            let next = doc(1, VICTIM_TOKENS, false);
            let (r1, (r0, r2)) = join(a.complete(1, &running), async {
                let r0 = a
                    .client
                    .abandon(&a.tenants[0], "/v1/completions", &gone, how)
                    .await;
                a.progress.inc(1);
                // A moment for the server to hear the connection close.
                tokio::time::sleep((half / 10).max(Duration::from_millis(5))).await;
                let r2 = a.complete(1, &next).await;
                (r0, r2)
            })
            .await;
            abandoned += 1;
            // The abandoned request proves nothing by arriving or not.
            take(0, r0?, false);
            take(1, r1?, true);
            take(1, r2?, true);
        }
    }
    let unanswered = super::unanswered(seen.iter().map(|s| s.answered));
    let t1_answers = seen.iter().filter(|s| s.tenant == 1).count();
    let exchanges: Vec<Exchange> = seen.into_iter().map(|s| s.exchange).collect();
    let evidence = json!({
        "rounds": a.opts.rounds, "requests": exchanges.len(), "abandoned": abandoned,
        "short_prompt_tokens": SHORT_TOKENS, "long_prompt_tokens": long,
        "victim_prompt_tokens": VICTIM_TOKENS, "canaries": canaries,
        "leaks": leaks, "unanswered": unanswered,
    });
    let (result, reason) = match leaks.first() {
        Some(l) => (
            GateResult::Fail,
            format!(
                "{} after {} walked away from requests; {} leak(s) in {} requests",
                isolation::received(l),
                a.tenants[0].label,
                leaks.len(),
                exchanges.len()
            ),
        ),
        None if !unanswered.is_empty() => (
            GateResult::Inconclusive,
            format!(
                "no canary crossed tenants in what arrived, but {} answer(s) did not arrive in full (first: exchange {}, {} {}: {})",
                unanswered.len(),
                unanswered[0],
                exchanges[unanswered[0]].tenant,
                exchanges[unanswered[0]].path,
                exchanges[unanswered[0]].response.chars().take(120).collect::<String>()
            ),
        ),
        None => (
            GateResult::Pass,
            format!(
                "no canary crossed tenants: {abandoned} request(s) of {} abandoned mid-request and mid-stream, {t1_answers} answers of {} searched",
                a.tenants[0].label, a.tenants[1].label
            ),
        ),
    };
    Ok(GateOutcome::new(result, reason, evidence).resting_on(
        [
            ("short canary document walked away from", SHORT_TOKENS),
            ("long canary document walked away from", long),
            ("other tenant's canary document", VICTIM_TOKENS),
        ]
        .map(|(what, t)| a.estimate(what, Text::Canary, a.chars_of(Text::Canary, t)))
        .to_vec(),
        exchanges,
    ))
}
