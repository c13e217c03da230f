//! Gate `status`: a rejected request never answers 200, and a truncated
//! answer says so.
//!
//! Three requests a server must refuse — a prompt past the context, a
//! negative `max_tokens`, a body that is not JSON — must each get a 4xx
//! (a 200 hides the rejection; a 5xx blames the server for the client's
//! error). A completion cut by `max_tokens` must end with
//! `finish_reason: "length"`. The prompt past the context is past it in the
//! server's own count ([`super::tokens`]); one only assumed to be past it
//! decides nothing.
//!
//! A check whose answer did not arrive (no response, or a body cut by a
//! time limit or the response cap) decides nothing: it is recorded as no
//! answer and, without a failure elsewhere, makes the gate inconclusive.

use hyper::http::Method;
use kvw_evidence::audit::GateResult;
use rand::SeedableRng as _;
use serde_json::json;

use super::tokens::{self, Text};
use super::{prompts, Audit, AuditError, GateOutcome};

/// Tokens of the ordinary prompt cut at `max_tokens` 2.
pub const ORDINARY_TOKENS: u64 = 64;

/// How far past a `context`-token context the prompt aims: a little where
/// `/tokenize` fits it, an eighth more where only a rate sizes it.
pub fn margin(context: u64, tokenize: bool) -> u64 {
    if tokenize {
        64
    } else {
        (context / 8).max(64)
    }
}

pub async fn run(a: &Audit) -> Result<GateOutcome, AuditError> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(a.opts.seed ^ 0x57);
    let mut checks = Vec::new();
    let mut exchanges = Vec::new();
    let mut failures = Vec::new();
    let mut unanswered = Vec::new();
    let mut sizes = Vec::new();
    // 1. A prompt past the context, as the server counts it. Aim well past
    // it where only a calibrated rate sizes the prompt.
    if let Some(context) = a.found.context_len {
        let margin = margin(context, a.calibration.tokenize.is_some());
        let seed = a.opts.seed ^ 0x58;
        let make = |chars: usize| tokens::sample(Text::Filler, chars, seed);
        let past = a
            .send_past(
                "past the context",
                Text::Filler,
                context.saturating_add(margin),
                context,
                &make,
            )
            .await?;
        sizes.extend(past.sizes);
        exchanges.extend(past.exchanges);
        match (past.reply, past.tokens) {
            (None, _) => unanswered.push(format!(
                "a prompt past the {context}-token context would exceed the audit's request cap; not sent"
            )),
            (Some(r), size) => {
                checks.push(json!({"check": "prompt past the context", "status": r.status, "prompt_tokens": size}));
                match (r.status, size) {
                    (400..=499, _) => {}
                    (0, _) => {
                        unanswered.push("the prompt past the context got no answer".to_string())
                    }
                    (s, None) => unanswered.push(format!(
                        "a prompt assumed (--chars-per-token) to be past the {context}-token context answered {s}, but the server counted none of its tokens"
                    )),
                    (s, Some(n)) if n <= context => unanswered.push(format!(
                        "the server counted the prompt meant to be past the context as {n} tokens, within its {context}-token context, and answered {s}"
                    )),
                    (s, Some(n)) => failures.push(format!(
                        "a {n}-token prompt past the {context}-token context answered {s}"
                    )),
                }
            }
        }
    }
    // 2–3. A negative max_tokens, and a body that is not JSON.
    let mut negative = a.body(0, "^status check", 4);
    negative["max_tokens"] = json!(-5);
    let refusable: [(&str, &str, Vec<u8>); 2] = [
        (
            "max_tokens -5",
            "max_tokens -5",
            negative.to_string().into_bytes(),
        ),
        (
            "malformed JSON",
            "a malformed JSON body",
            b"{\"model\": ".to_vec(),
        ),
    ];
    for (check, what, bytes) in refusable {
        let r = a
            .client
            .send_with(
                &a.tenants[0],
                Method::POST,
                "/v1/completions",
                Some(&bytes),
                true,
            )
            .await?;
        a.progress.inc(1);
        checks.push(json!({"check": check, "status": r.status}));
        if r.status == 0 {
            unanswered.push(format!("{what} got no answer"));
        } else if !(400..500).contains(&r.status) {
            failures.push(format!("{what} answered {}", r.status));
        }
        exchanges.push(r.exchange);
    }
    // 4. A truncated answer says so.
    let chars = a.chars_of(Text::Filler, ORDINARY_TOKENS);
    let text = prompts::filler(chars, &mut rng);
    sizes.push(a.estimate(
        "an ordinary prompt cut at max_tokens 2",
        Text::Filler,
        chars,
    ));
    let r = a.complete(0, &a.body(0, &text, 2)).await?;
    let v = r.json().unwrap_or_default();
    let finish = v["choices"][0]["finish_reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let produced = v["usage"]["completion_tokens"].as_u64();
    checks.push(json!({"check": "max_tokens 2", "status": r.status, "finish_reason": finish, "completion_tokens": produced, "complete": r.complete}));
    if r.status == 200 && !r.complete {
        // A body that never ended says no finish_reason at all.
        unanswered.push("the answer cut at max_tokens 2 did not arrive in full".to_string());
    } else if r.status == 0 {
        unanswered.push("the max_tokens 2 request got no answer".to_string());
    } else if r.status != 200 {
        failures.push(format!("an ordinary 64-token prompt answered {}", r.status));
    } else if produced.is_none_or(|p| p >= 2) && finish != "length" {
        failures.push(format!(
            "an answer cut at max_tokens 2 says finish_reason '{finish}', not 'length'"
        ));
    }
    exchanges.push(r.exchange);
    let (result, reason) = if !failures.is_empty() {
        (GateResult::Fail, failures.join("; "))
    } else if !unanswered.is_empty() {
        let silent = super::silence(&exchanges)
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        (
            GateResult::Inconclusive,
            format!("no failure, but {}{silent}", unanswered.join("; ")),
        )
    } else {
        (
            GateResult::Pass,
            "every rejection was a 4xx and the truncated answer said 'length'".to_string(),
        )
    };
    Ok(GateOutcome::new(
        result,
        reason,
        json!({"checks": checks, "failures": failures, "unanswered": unanswered}),
    )
    .resting_on(sizes, exchanges))
}
