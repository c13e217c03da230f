//! Prompt sizes in the server's own tokens.
//!
//! A gate that says "a prompt past the context answered 200" must know the
//! prompt was past the context *as the server counts it*: one token per
//! character is a third of the truth for a BPE tokenizer, and an audit that
//! accuses a healthy server is worse than none. So before any gate the
//! audit calibrates on a sample of its own text: the server's
//! `POST /tokenize` (vLLM and SGLang `{"model","prompt"}` → `count` or
//! `tokens`; llama.cpp `{"content"}` → `tokens`) or, without one, the
//! `usage.prompt_tokens` of a completion. A prompt that decides a gate is
//! then counted itself where the server can ([`Audit::sized`] scales it
//! until `/tokenize` puts it where the gate needs it, within
//! [`bounds::MAX_FIT_STEPS`]), and a 200 answer's own `usage.prompt_tokens`
//! overrides any estimate ([`Audit::send_past`]). `--chars-per-token` is
//! the last fallback and is recorded as an assumption; no gate fails on it.

use hyper::http::Method;
use kvw_evidence::audit::{Exchange, PromptSize, SizeSource};
use rand::SeedableRng as _;
use serde_json::json;

use super::client::Reply;
use super::{bounds, prompts, Audit, AuditError, AuditOptions, Client, Tenant};

/// The audit's two kinds of text, which tokenize differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Text {
    /// Seeded random words ([`prompts::filler`]).
    Filler,
    /// A canary document ([`prompts::canary_document`]).
    Canary,
}

/// Characters of each calibration sample (less for a small context).
pub const SAMPLE_CHARS: usize = 512;

/// The request shape of a server's tokenizer endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// vLLM and SGLang: `{"model", "prompt"}` → `count` or `tokens`.
    Prompt,
    /// llama.cpp: `{"content"}` → `tokens`.
    Content,
}

/// What the calibration found.
#[derive(Debug, Clone)]
pub struct Calibration {
    /// The tokenizer endpoint that counts prompts, if the server has one.
    pub tokenize: Option<Shape>,
    /// Characters per token of filler and of canary text.
    pub filler_rate: f64,
    pub canary_rate: f64,
    /// `Calibrated` when the server counted the samples, else `Assumed`.
    pub source: SizeSource,
    /// How the rates were found, in words.
    pub how: String,
}

impl Calibration {
    pub fn rate(&self, text: Text) -> f64 {
        match text {
            Text::Filler => self.filler_rate,
            Text::Canary => self.canary_rate,
        }
    }
}

/// A prompt and its size.
pub struct Sized {
    pub text: String,
    pub size: PromptSize,
}

/// What [`Audit::send_past`] sent and learned.
pub struct Past {
    /// The last answer; `None` when the prompt would not fit the request cap.
    pub reply: Option<Reply>,
    /// Its size in tokens where the server counted it (directly or by a
    /// calibrated rate); `None` when only assumed.
    pub tokens: Option<u64>,
    pub sizes: Vec<PromptSize>,
    pub exchanges: Vec<Exchange>,
}

/// The calibration sample of `text`, exactly `chars` characters.
pub fn sample(text: Text, chars: usize, seed: u64) -> String {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x70);
    match text {
        Text::Filler => prompts::filler(chars, &mut rng),
        Text::Canary => {
            let c = prompts::canary("t0", &mut rng);
            prompts::canary_document(&c, chars)
        }
    }
}

/// The token count a tokenizer answer gives.
fn tokenize_count(v: &serde_json::Value) -> Option<u64> {
    v["count"]
        .as_u64()
        .or_else(|| v["tokens"].as_array().map(|t| t.len() as u64))
}

/// Count `prompt` with the server's tokenizer endpoint.
pub async fn tokenize(
    client: &Client,
    tenant: &Tenant,
    model: &str,
    shape: Shape,
    prompt: &str,
) -> Result<Option<u64>, AuditError> {
    let body = match shape {
        Shape::Prompt => json!({"model": model, "prompt": prompt}),
        Shape::Content => json!({"content": prompt, "add_special": true}),
    };
    let bytes = body.to_string().into_bytes();
    let r = client
        .send(tenant, Method::POST, "/tokenize", Some(&bytes))
        .await?;
    Ok(r.json()
        .filter(|_| r.status == 200)
        .as_ref()
        .and_then(tokenize_count)
        .and_then(|n| bounds::believable(n, "POST /tokenize").ok()))
}

/// `usage.prompt_tokens` of a completion answer.
pub fn usage(r: &Reply) -> Option<u64> {
    r.json()
        .filter(|_| r.status == 200)
        .and_then(|v| v["usage"]["prompt_tokens"].as_u64())
        .filter(|&n| n > 0 && n <= bounds::MAX_TOKENS)
}

/// Calibrate the audit's text against the server's own counts.
pub async fn calibrate(
    client: &Client,
    tenant: &Tenant,
    model: &str,
    context: Option<u64>,
    opts: &AuditOptions,
) -> Result<Calibration, AuditError> {
    // A sample the context surely holds even at one token per character.
    let chars = super::plan::calibration_chars(context);
    let samples = [Text::Filler, Text::Canary].map(|t| sample(t, chars, opts.seed));
    for shape in [Shape::Prompt, Shape::Content] {
        let mut counts = Vec::new();
        for s in &samples {
            match tokenize(client, tenant, model, shape, s).await? {
                Some(n) => counts.push(n),
                None => break,
            }
        }
        if let [f, c] = counts[..] {
            return Ok(rates(
                chars,
                f,
                c,
                Some(shape),
                format!("POST /tokenize ({shape:?} shape)"),
            ));
        }
    }
    let mut counts = Vec::new();
    for s in &samples {
        let body = json!({"model": model, "prompt": s, "max_tokens": 1, "temperature": 0});
        let r = client.post(tenant, "/v1/completions", &body).await?;
        match usage(&r) {
            Some(n) => counts.push(n),
            None => break,
        }
    }
    if let [f, c] = counts[..] {
        return Ok(rates(
            chars,
            f,
            c,
            None,
            "usage.prompt_tokens of a completion".into(),
        ));
    }
    let r = opts.chars_per_token;
    Ok(Calibration {
        tokenize: None,
        filler_rate: r,
        canary_rate: r,
        source: SizeSource::Assumed,
        how: format!(
            "assumed {r} characters per token (--chars-per-token): the server has no /tokenize and reports no usage.prompt_tokens"
        ),
    })
}

fn rates(
    chars: usize,
    filler: u64,
    canary: u64,
    tokenize: Option<Shape>,
    by: String,
) -> Calibration {
    Calibration {
        tokenize,
        filler_rate: chars as f64 / filler as f64,
        canary_rate: chars as f64 / canary as f64,
        source: SizeSource::Calibrated,
        how: format!(
            "{chars}-character samples counted by {by}: filler {filler} tokens, canary text {canary} tokens"
        ),
    }
}

impl Audit {
    /// Characters of a `tokens`-token `text` at the calibrated rate.
    pub fn chars_of(&self, text: Text, tokens: u64) -> usize {
        chars_at(tokens, self.calibration.rate(text))
    }

    /// The size record of a prompt sized by the calibrated rate.
    pub fn estimate(&self, purpose: &str, text: Text, chars: usize) -> PromptSize {
        let c = &self.calibration;
        PromptSize {
            purpose: purpose.into(),
            chars: chars as u64,
            tokens: (chars as f64 / c.rate(text)).round() as u64,
            measured_by: c.source,
            how: c.how.clone(),
        }
    }

    /// A prompt of about `target` tokens made by `make(chars)`: counted by
    /// the server's `/tokenize` and rescaled until it is within a few
    /// tokens of `target` (at most [`bounds::MAX_FIT_STEPS`] counts), else
    /// sized by the calibrated rate. `None` when it would not fit the
    /// audit's request cap.
    pub async fn sized(
        &self,
        purpose: &str,
        text: Text,
        target: u64,
        rate: f64,
        make: &dyn Fn(usize) -> String,
    ) -> Result<Option<Sized>, AuditError> {
        let mut chars = chars_at(target, rate);
        let by_rate = |chars: usize| {
            (chars <= bounds::MAX_PROMPT_CHARS).then(|| Sized {
                text: make(chars),
                size: PromptSize {
                    tokens: target,
                    ..self.estimate(purpose, text, chars)
                },
            })
        };
        let Some(shape) = self.calibration.tokenize else {
            return Ok(by_rate(chars));
        };
        let first = chars;
        let slack = (target / 64).max(4);
        let mut best = None;
        for _ in 0..bounds::MAX_FIT_STEPS {
            if chars > bounds::MAX_PROMPT_CHARS {
                break;
            }
            let prompt = make(chars);
            let t = &self.tenants[0];
            let Some(n) = tokenize(&self.client, t, &self.found.model, shape, &prompt).await?
            else {
                break;
            };
            let size = PromptSize {
                purpose: purpose.into(),
                chars: chars as u64,
                tokens: n,
                measured_by: SizeSource::Tokenize,
                how: format!("POST /tokenize counted this prompt ({shape:?} shape)"),
            };
            best = Some(Sized { text: prompt, size });
            if n.abs_diff(target) <= slack {
                break;
            }
            chars = ((chars as f64) * target as f64 / n as f64).ceil() as usize;
        }
        // A tokenizer that stopped answering leaves the calibrated rate.
        Ok(best.or_else(|| by_rate(first)))
    }

    /// Send, as tenant 0, a prompt meant to be past `limit` tokens (aiming
    /// at `target`). A 200 answer whose `usage.prompt_tokens` shows it was
    /// not past `limit` is rescaled by that count and sent again (three
    /// tries at most), so what the gate decides on is the server's count.
    pub async fn send_past(
        &self,
        purpose: &str,
        text: Text,
        target: u64,
        limit: u64,
        make: &dyn Fn(usize) -> String,
    ) -> Result<Past, AuditError> {
        let mut rate = self.calibration.rate(text);
        let mut past = Past {
            reply: None,
            tokens: None,
            sizes: vec![],
            exchanges: vec![],
        };
        for _ in 0..3 {
            let Some(s) = self.sized(purpose, text, target, rate, make).await? else {
                return Ok(past);
            };
            let r = self
                .complete(0, &self.body(0, &s.text, self.opts.max_tokens))
                .await?;
            let counted = usage(&r);
            past.tokens = match s.size.measured_by {
                SizeSource::Assumed => counted,
                _ => counted.or(Some(s.size.tokens)),
            };
            past.sizes.push(s.size.clone());
            if let Some(n) = counted {
                past.sizes.push(PromptSize {
                    tokens: n,
                    measured_by: SizeSource::Usage,
                    how: format!(
                        "usage.prompt_tokens of the answer (exchange {})",
                        past.exchanges.len()
                    ),
                    ..s.size
                });
            }
            past.exchanges.push(r.exchange.clone());
            past.reply = Some(r);
            match counted {
                Some(n) if n <= limit => rate = s.text.chars().count() as f64 / n as f64,
                _ => break,
            }
        }
        Ok(past)
    }
}

/// Characters of `tokens` tokens at `rate` characters per token.
fn chars_at(tokens: u64, rate: f64) -> usize {
    (tokens as f64 * rate).ceil().min(usize::MAX as f64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_answers_of_every_shape_give_a_count() {
        assert_eq!(tokenize_count(&json!({"count": 7, "tokens": [1]})), Some(7));
        assert_eq!(tokenize_count(&json!({"tokens": [1, 2, 3]})), Some(3));
        assert_eq!(tokenize_count(&json!({"error": "no"})), None);
        assert_eq!(chars_at(10, 3.2), 32);
        assert_eq!(chars_at(u64::MAX, 16.0), usize::MAX);
    }
}
