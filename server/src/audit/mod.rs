//! `kvw audit`: black-box isolation gates against any OpenAI-compatible
//! endpoint, one module per gate.
//!
//! The audit discovers what it can ([`discover`]), says what it will send
//! ([`plan`]), calibrates its prompt sizes against the server's own token
//! counts ([`tokens`]), then runs [`version`], [`capacity`], [`admission`],
//! [`isolation`], [`lifetime`], [`status`] and [`prefix_cache`] in that order. Each gate
//! returns a [`GateReport`] whose predicate ([`kvw_evidence::audit`]) quotes
//! every exchange it relied on; the caller signs and prints them.

pub mod admission;
pub mod bounds;
pub mod capacity;
pub mod client;
pub mod discover;
pub mod isolation;
pub mod lifetime;
pub mod plan;
pub mod prefix_cache;
pub mod prompts;
pub mod stats;
pub mod status;
pub mod tls;
pub mod tokens;
pub mod version;

use std::time::Duration;

use kvw_evidence::audit::{AuditPredicate, Exchange, GateResult, PromptSize};

pub use client::{Client, Limits, Tenant};
pub use discover::Discovered;

/// An error that stops the audit (exit 2): unreachable, not compatible, limits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuditError(pub String);

/// What the user chose.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    pub endpoint: String,
    pub keys: Vec<String>,
    /// Model name; discovered from `/v1/models` when `None`.
    pub model: Option<String>,
    /// Context length in tokens when the server does not say.
    pub context_len: Option<u64>,
    /// KV pool in tokens when the server does not say.
    pub pool_tokens: Option<u64>,
    /// Characters per token assumed when the server counts no tokens.
    pub chars_per_token: f64,
    /// `max_tokens` of the audit's completions.
    pub max_tokens: u32,
    pub rounds: u32,
    /// Hit/miss pairs of the prefix-cache gate.
    pub pairs: u32,
    /// Prefix length of the prefix-cache gate, in tokens.
    pub prefix_tokens: Option<u64>,
    /// False-positive rate of the prefix-cache test.
    pub alpha: f64,
    /// Send a per-tenant `cache_salt` with every request.
    pub cache_salt: bool,
    pub gates: Vec<String>,
    /// Longest a refusal may take (`--refusal-bound`).
    pub refusal_bound: Duration,
    /// PEM certificates an https endpoint's certificate must chain to
    /// (instead of the public roots).
    pub cacert: Option<std::path::PathBuf>,
    pub limits: Limits,
    pub seed: u64,
}

impl AuditOptions {
    /// Defaults for `endpoint` and `keys`.
    pub fn new(endpoint: &str, keys: Vec<String>) -> Self {
        AuditOptions {
            endpoint: endpoint.to_string(),
            keys,
            model: None,
            context_len: None,
            pool_tokens: None,
            chars_per_token: 1.0,
            max_tokens: 32,
            rounds: 2,
            pairs: 12,
            prefix_tokens: None,
            alpha: 0.01,
            cache_salt: false,
            gates: kvw_evidence::audit::GATES
                .iter()
                .map(|g| g.to_string())
                .collect(),
            refusal_bound: admission::DEFAULT_REFUSAL_BOUND,
            cacert: None,
            limits: Limits {
                max_requests: 1000,
                max_time: Duration::from_secs(600),
                concurrency: 8,
                request_timeout: Duration::from_secs(60),
            },
            seed: 2026,
        }
    }
}

/// One gate's outcome.
#[derive(Debug, Clone)]
pub struct GateReport {
    pub predicate: AuditPredicate,
}

/// What a gate builds its report from.
pub struct GateOutcome {
    pub result: GateResult,
    pub reason: String,
    pub evidence: serde_json::Value,
    /// Sizes of the prompts the gate relied on.
    pub prompts: Vec<PromptSize>,
    pub exchanges: Vec<Exchange>,
}

impl GateOutcome {
    /// A verdict reached before any prompt was sent.
    pub fn new(result: GateResult, reason: String, evidence: serde_json::Value) -> Self {
        GateOutcome {
            result,
            reason,
            evidence,
            prompts: vec![],
            exchanges: vec![],
        }
    }

    /// The same verdict, resting on these prompts and exchanges.
    pub fn resting_on(self, prompts: Vec<PromptSize>, exchanges: Vec<Exchange>) -> Self {
        GateOutcome {
            prompts,
            exchanges,
            ..self
        }
    }
}

/// Everything the gates share.
pub struct Audit {
    pub client: Client,
    pub tenants: Vec<Tenant>,
    pub found: Discovered,
    pub calibration: tokens::Calibration,
    pub opts: AuditOptions,
    pub progress: indicatif::ProgressBar,
}

impl Audit {
    /// Completion request body for `prompt` as `tenant`.
    pub fn body(&self, tenant: usize, prompt: &str, max_tokens: u32) -> serde_json::Value {
        let mut b = serde_json::json!({
            "model": self.found.model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0,
        });
        if self.opts.cache_salt {
            b["cache_salt"] = format!(
                "kvw-audit-salt-{}-{}",
                self.tenants[tenant].label, self.opts.seed
            )
            .into();
        }
        b
    }

    /// POST a completion and count it on the progress bar.
    pub async fn complete(
        &self,
        tenant: usize,
        body: &serde_json::Value,
    ) -> Result<client::Reply, AuditError> {
        let r = self
            .client
            .post(&self.tenants[tenant], "/v1/completions", body)
            .await;
        self.progress.inc(1);
        r
    }

    /// Characters of a `tokens`-token prompt of `text`, or `None` when it
    /// would not fit the audit's request cap ([`bounds::MAX_PROMPT_CHARS`]).
    pub fn prompt_chars(&self, text: tokens::Text, tokens: u64) -> Option<usize> {
        Some(self.chars_of(text, tokens)).filter(|&c| c <= bounds::MAX_PROMPT_CHARS)
    }

    /// The most tokens one prompt of `text` may have.
    pub fn max_prompt_tokens(&self, text: tokens::Text) -> u64 {
        (bounds::MAX_PROMPT_CHARS as f64 / self.calibration.rate(text)).floor() as u64
    }
}

/// The first exchange that got no response, in words: which request, after
/// how many answered ones and how long, and what the client saw. A server
/// that dies or stops answering mid-audit is named here, never waited on
/// past the request timeout.
pub fn silence(exchanges: &[Exchange]) -> Option<String> {
    let k = exchanges.iter().position(|e| e.status == 0)?;
    let e = &exchanges[k];
    let answered = exchanges[..k].iter().filter(|e| e.status != 0).count();
    let silent = exchanges.iter().filter(|e| e.status == 0).count();
    let what = format!(
        "exchange {k} ({} {} {}, after {answered} answered exchange(s)) got no response in {} ms: {}",
        e.tenant,
        e.method,
        e.path,
        e.total_us / 1000,
        e.response
    );
    Some(if exchanges[k + 1..].iter().any(|e| e.status != 0) {
        format!(
            "{what}; {silent} of {} got none, later ones were answered",
            exchanges.len()
        )
    } else {
        format!(
            "the server stopped answering at {what}; none of the {} after it was answered",
            exchanges.len() - k - 1
        )
    })
}

/// The positions of the replies that were not answered, in order.
pub fn unanswered(answered: impl IntoIterator<Item = bool>) -> Vec<usize> {
    answered
        .into_iter()
        .enumerate()
        .filter(|(_, a)| !a)
        .map(|(k, _)| k)
        .collect()
}

/// Number exchanges in order.
pub fn numbered(mut ex: Vec<Exchange>) -> Vec<Exchange> {
    for (i, e) in ex.iter_mut().enumerate() {
        e.index = i as u32;
    }
    ex
}

/// The audit after discovery, before any prompt is sent.
pub struct Discovery {
    pub client: Client,
    pub tenants: Vec<Tenant>,
    pub found: Discovered,
    pub opts: AuditOptions,
}

/// Check the options and discover what the endpoint says of itself (GET
/// requests only, no prompt).
pub async fn discover(opts: AuditOptions) -> Result<Discovery, AuditError> {
    if opts.keys.len() < 2 {
        return Err(AuditError(
            "the audit needs at least two --key values (two tenants)".into(),
        ));
    }
    if opts.keys.len() > bounds::MAX_TENANTS {
        return Err(AuditError(format!(
            "the audit takes at most {} --key values",
            bounds::MAX_TENANTS
        )));
    }
    for (flag, value) in [
        ("--context-len", opts.context_len),
        ("--pool-tokens", opts.pool_tokens),
        ("--prefix-tokens", opts.prefix_tokens),
    ] {
        if let Some(v) = value {
            bounds::believable(v, flag).map_err(AuditError)?;
        }
    }
    for g in &opts.gates {
        if !kvw_evidence::audit::GATES.contains(&g.as_str()) {
            return Err(AuditError(format!(
                "unknown gate '{g}' ({})",
                kvw_evidence::audit::GATES.join(", ")
            )));
        }
    }
    let tenants: Vec<Tenant> = opts
        .keys
        .iter()
        .enumerate()
        .map(|(i, k)| Tenant {
            label: format!("t{i}"),
            key: k.clone(),
        })
        .collect();
    let mut client =
        Client::with_roots(&opts.endpoint, opts.limits.clone(), opts.cacert.as_deref())?;
    client.hide_keys(&tenants);
    let found = discover::discover(&client, &tenants, &opts).await?;
    client.tolerate_resets();
    Ok(Discovery {
        client,
        tenants,
        found,
        opts,
    })
}

impl Discovery {
    /// What the audit will send, estimated before calibration.
    pub fn plan(&self) -> plan::Plan {
        plan::plan(&plan::Facts {
            opts: &self.opts,
            found: &self.found,
            tenants: self.tenants.len() as u64,
            calibration: None,
        })
    }

    /// Calibrate prompt sizes against the server's own counts.
    pub async fn calibrate(self, progress: indicatif::ProgressBar) -> Result<Audit, AuditError> {
        let calibration = tokens::calibrate(
            &self.client,
            &self.tenants[0],
            &self.found.model,
            self.found.context_len,
            &self.opts,
        )
        .await?;
        tracing::info!(how = %calibration.how, "prompt sizes calibrated");
        Ok(Audit {
            client: self.client,
            tenants: self.tenants,
            found: self.found,
            calibration,
            opts: self.opts,
            progress,
        })
    }
}

impl Audit {
    /// What the gates will send, in the server's tokens where it counts them.
    pub fn plan(&self) -> plan::Plan {
        plan::plan(&plan::Facts {
            opts: &self.opts,
            found: &self.found,
            tenants: self.tenants.len() as u64,
            calibration: Some(&self.calibration),
        })
    }

    /// Run every chosen gate.
    pub async fn run_gates(&self) -> Result<Vec<GateReport>, AuditError> {
        self.progress.set_length(estimate(self));
        let mut reports = Vec::new();
        for gate in self.opts.gates.clone() {
            self.progress.set_message(gate.clone());
            let outcome = match gate.as_str() {
                "version" => version::run(self).await?,
                "capacity" => capacity::run(self).await?,
                "admission" => admission::run(self).await?,
                "isolation" => isolation::run(self).await?,
                "lifetime" => lifetime::run(self).await?,
                "status" => status::run(self).await?,
                _ => prefix_cache::run(self).await?,
            };
            tracing::info!(gate, result = ?outcome.result, "gate done");
            reports.push(GateReport {
                predicate: AuditPredicate {
                    gate,
                    result: outcome.result,
                    endpoint: self.opts.endpoint.clone(),
                    auditor_version: env!("CARGO_PKG_VERSION").to_string(),
                    reason: outcome.reason,
                    evidence: outcome.evidence,
                    prompts: outcome.prompts,
                    exchanges: numbered(outcome.exchanges),
                },
            });
        }
        self.progress.finish_and_clear();
        Ok(reports)
    }
}

/// Run the whole audit: discover, calibrate, then every chosen gate.
pub async fn run(
    opts: AuditOptions,
    progress: indicatif::ProgressBar,
) -> Result<Vec<GateReport>, AuditError> {
    discover(opts)
        .await?
        .calibrate(progress)
        .await?
        .run_gates()
        .await
}

/// Requests the chosen gates will send, for the progress bar.
fn estimate(a: &Audit) -> u64 {
    let n = a.tenants.len() as u64;
    a.opts
        .gates
        .iter()
        .map(|g| match g.as_str() {
            "version" => version::REQUESTS,
            "capacity" | "admission" => 1,
            "isolation" => {
                let (normal, long) = isolation::lengths(a);
                let w = isolation::warmers(normal, long);
                a.opts.rounds as u64 * ((w + 1) * n * (n - 1) + 2 * n)
            }
            "lifetime" => a.opts.rounds as u64 * lifetime::requests_per_round(),
            "status" => 4,
            _ => 3 * a.opts.pairs as u64,
        })
        .sum()
}
