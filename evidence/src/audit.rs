//! The audit predicate: what one black-box gate of `kvw audit` found.
//!
//! A probe receipt records a run of our engine. An audit receipt records a
//! gate run against somebody's OpenAI-compatible endpoint: the gate, its
//! result, the measured facts it decided on (p-value, leaked canary, the
//! status a rejected prompt got) and every request and response it relied
//! on, with API keys replaced by tenant labels. It travels in the same
//! DSSE/in-toto envelope as every receipt, under [`AUDIT_PREDICATE_TYPE`];
//! the committed JSON Schema is `evidence/schema/audit-predicate.v2.schema.json`.
//!
//! Version 2 adds [`AuditPredicate::prompts`]: the size of every prompt a
//! gate relies on, in the server's own tokens, and how it was counted.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `predicateType` of an audit receipt.
pub const AUDIT_PREDICATE_TYPE: &str = "https://kvwitness.dev/attestation/audit/v2";

/// Path of the committed schema, relative to the crate root.
pub const AUDIT_SCHEMA_PATH: &str = "schema/audit-predicate.v2.schema.json";

/// The gates `kvw audit` runs.
pub const GATES: [&str; 7] = [
    "version",
    "capacity",
    "admission",
    "isolation",
    "lifetime",
    "status",
    "prefix-cache",
];

/// A gate's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GateResult {
    Pass,
    Fail,
    /// The gate could not decide (e.g. the pool size is unknown).
    Inconclusive,
}

/// Everything one gate established.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditPredicate {
    /// One of [`GATES`].
    pub gate: String,
    pub result: GateResult,
    /// The endpoint's base URL as given.
    pub endpoint: String,
    /// `kvw` version that ran the gate.
    pub auditor_version: String,
    /// One sentence saying why the gate decided as it did.
    pub reason: String,
    /// Gate-specific measured facts (p-value, effect size, leaked canaries...).
    pub evidence: serde_json::Value,
    /// The size of every prompt the gate relied on, and how it was counted.
    pub prompts: Vec<PromptSize>,
    /// Every exchange the gate relied on, in the order they were sent.
    pub exchanges: Vec<Exchange>,
}

/// How a prompt's size in tokens was established.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SizeSource {
    /// The server's tokenizer endpoint (`POST /tokenize`) counted this prompt.
    Tokenize,
    /// The server's `usage.prompt_tokens` in its answer to this prompt.
    Usage,
    /// Scaled from a calibration sample the server counted itself.
    Calibrated,
    /// `--chars-per-token`: an assumption, no count of the server's.
    Assumed,
}

/// One prompt a gate sent, sized in the server's tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptSize {
    /// What the prompt is for ("past the context", "beyond the pool", ...).
    pub purpose: String,
    pub chars: u64,
    /// Its size in tokens, as [`PromptSize::measured_by`] says.
    pub tokens: u64,
    pub measured_by: SizeSource,
    /// The count behind it, in words (endpoint and field, or the sample).
    pub how: String,
}

/// One request and its response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Exchange {
    /// 0-based position in `exchanges`.
    pub index: u32,
    /// Tenant label (`t0`, `t1`, ...); the key itself is never recorded.
    pub tenant: String,
    pub method: String,
    pub path: String,
    /// Request body; long bodies keep their first and last characters.
    pub request: String,
    /// SHA-256 of the full request body, hex.
    pub request_sha256: String,
    pub request_bytes: u64,
    /// HTTP status; 0 when no response came (timeout, reset).
    pub status: u16,
    /// Response body (SSE streams as received), shortened like `request`.
    pub response: String,
    pub response_bytes: u64,
    /// Microseconds from sending to the first response byte.
    pub first_byte_us: u64,
    /// Microseconds from sending to the end of the response.
    pub total_us: u64,
}

impl crate::receipt::PredicateKind for AuditPredicate {
    const PREDICATE_TYPE: &'static str = AUDIT_PREDICATE_TYPE;
    const WHAT: &'static str = "audit predicate";
    fn check(&self) -> Result<(), crate::EvidenceError> {
        if !GATES.contains(&self.gate.as_str()) {
            return Err(crate::EvidenceError::Steps(format!(
                "unknown audit gate '{}'",
                self.gate
            )));
        }
        if let Some(e) = self
            .exchanges
            .iter()
            .enumerate()
            .find(|(i, e)| e.index as usize != *i)
        {
            return Err(crate::EvidenceError::Steps(format!(
                "audit exchange {} is out of order",
                e.1.index
            )));
        }
        consistent(self).map_err(|why| {
            crate::EvidenceError::Steps(format!(
                "audit {} receipt is inconsistent: {why}",
                self.gate
            ))
        })
    }
}

/// A gate's result must follow from its own evidence: a receipt that says
/// `pass` while listing a leak, a failed check or a significant p-value (or
/// `fail` with none) is refused, however well signed.
fn consistent(p: &AuditPredicate) -> Result<(), String> {
    let ev = &p.evidence;
    let list = |field: &str| -> Result<usize, String> {
        match ev.get(field) {
            None => Ok(0),
            Some(serde_json::Value::Array(a)) => Ok(a.len()),
            Some(_) => Err(format!("evidence '{field}' is not a list")),
        }
    };
    let result = p.result;
    match p.gate.as_str() {
        "version" => {
            // A declared version is never held against a server.
            if result == GateResult::Fail {
                return Err("result fail, which the version gate never gives".into());
            }
            let declared = ev.get("version").is_some_and(serde_json::Value::is_string);
            if result == GateResult::Pass && !declared {
                return Err("result pass with no declared version in its evidence".into());
            }
        }
        "admission" => {
            let status = ev.get("status").and_then(serde_json::Value::as_u64);
            let took = ev.get("refusal_us").and_then(serde_json::Value::as_u64);
            let bound = ev.get("bound_us").and_then(serde_json::Value::as_u64);
            let prompt = status.is_some_and(|s| (400..500).contains(&s))
                && matches!((took, bound), (Some(t), Some(b)) if t <= b);
            if result == GateResult::Pass && !prompt {
                return Err(format!(
                    "result pass without a 4xx within its bound (status {status:?}, {took:?} us, bound {bound:?} us)"
                ));
            }
            if result == GateResult::Fail && (prompt || status.is_none()) {
                return Err("result fail without a late, missing or non-4xx refusal".into());
            }
        }
        "isolation" | "lifetime" => {
            let leaks = list("leaks")?;
            if result == GateResult::Pass && (leaks > 0 || list("unanswered")? > 0) {
                return Err(format!(
                    "result pass with {leaks} leak(s) and {} unanswered request(s) in its evidence",
                    list("unanswered")?
                ));
            }
            if result == GateResult::Fail && leaks == 0 {
                return Err("result fail with no leak in its evidence".into());
            }
            if let Some(n) = ev.get("requests") {
                if n.as_u64() != Some(p.exchanges.len() as u64) {
                    return Err(format!(
                        "evidence counts {n} requests but {} exchanges are recorded",
                        p.exchanges.len()
                    ));
                }
            }
        }
        "status" => {
            let failures = list("failures")?;
            if result == GateResult::Pass && (failures > 0 || list("unanswered")? > 0) {
                return Err(format!("result pass with {failures} failed check(s)"));
            }
            if result == GateResult::Fail && failures == 0 {
                return Err("result fail with no failed check".into());
            }
        }
        "capacity" => {
            let assumed = p
                .prompts
                .iter()
                .all(|s| s.measured_by == SizeSource::Assumed);
            if result == GateResult::Fail && assumed {
                return Err("result fail on a prompt size that was only assumed".into());
            }
            let status = ev.get("status").and_then(serde_json::Value::as_u64);
            if result == GateResult::Pass && status.is_some_and(|s| !(400..500).contains(&s)) {
                return Err(format!(
                    "result pass although the over-pool prompt answered {}",
                    status.unwrap_or_default()
                ));
            }
        }
        _ => {
            let p_value = ev.get("p_value").and_then(serde_json::Value::as_f64);
            let alpha = ev.get("alpha").and_then(serde_json::Value::as_f64);
            if result == GateResult::Inconclusive {
                return Ok(());
            }
            let (Some(pv), Some(a)) = (p_value, alpha) else {
                return Err("a decided result without its p-value and alpha".into());
            };
            // NaN is neither below alpha nor at or above it.
            let below = pv.partial_cmp(&a) == Some(std::cmp::Ordering::Less);
            let at_or_above = matches!(
                pv.partial_cmp(&a),
                Some(std::cmp::Ordering::Equal | std::cmp::Ordering::Greater)
            );
            if result == GateResult::Pass && !at_or_above {
                return Err(format!("result pass with p = {pv} below alpha {a}"));
            }
            if result == GateResult::Fail && !below {
                return Err(format!("result fail with p = {pv} not below alpha {a}"));
            }
        }
    }
    Ok(())
}

/// The audit predicate's JSON Schema as pretty JSON with a trailing newline.
pub fn audit_predicate_schema() -> String {
    let mut schema = schemars::schema_for!(AuditPredicate);
    schema.insert(
        "$id".into(),
        format!("{AUDIT_PREDICATE_TYPE}/schema.json").into(),
    );
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::{sign_statement, verify_statement};
    use crate::Signer;

    fn predicate(gate: &str) -> AuditPredicate {
        AuditPredicate {
            gate: gate.into(),
            result: GateResult::Fail,
            endpoint: "http://127.0.0.1:1".into(),
            auditor_version: "0".into(),
            reason: "t1 got t0's canary".into(),
            evidence: serde_json::json!({"leaks": [{"canary": "CANARY-t0-1"}]}),
            prompts: vec![],
            exchanges: vec![],
        }
    }

    #[test]
    fn audit_receipts_sign_and_verify_and_unknown_gates_are_refused() {
        let signer = Signer::from_seed(&[7; 32]);
        let env =
            sign_statement("isolation.receipt.json", &predicate("isolation"), &signer).unwrap();
        let bytes = serde_json::to_vec(&env).unwrap();
        let v = verify_statement(&bytes, &signer.public()).unwrap();
        assert_eq!(v.parse::<AuditPredicate>().unwrap(), predicate("isolation"));
        assert!(sign_statement("x.receipt.json", &predicate("bogus"), &signer).is_err());
    }

    #[test]
    fn a_result_that_contradicts_its_evidence_is_refused() {
        use crate::receipt::PredicateKind as _;
        let parse = |p: &AuditPredicate| p.check();
        let mut pass_with_leak = predicate("isolation");
        pass_with_leak.result = GateResult::Pass;
        let err = parse(&pass_with_leak).unwrap_err().to_string();
        assert!(err.contains("result pass with 1 leak"), "{err}");
        let mut fail_without = predicate("isolation");
        fail_without.evidence = serde_json::json!({"leaks": []});
        assert!(parse(&fail_without).is_err());
        let mut status = predicate("status");
        status.result = GateResult::Pass;
        status.evidence = serde_json::json!({"failures": ["max_tokens -5 answered 200"]});
        assert!(parse(&status).is_err());
        let mut timing = predicate("prefix-cache");
        timing.result = GateResult::Pass;
        timing.evidence = serde_json::json!({"p_value": 0.001, "alpha": 0.01});
        assert!(parse(&timing).is_err());
        timing.evidence = serde_json::json!({"p_value": 0.5, "alpha": 0.01});
        assert!(parse(&timing).is_ok());
        assert!(parse(&predicate("isolation")).is_ok());
        let mut capacity = predicate("capacity");
        capacity.evidence = serde_json::json!({"status": 200});
        capacity.prompts = vec![PromptSize {
            purpose: "beyond the pool".into(),
            chars: 6000,
            tokens: 6000,
            measured_by: SizeSource::Assumed,
            how: "assumed".into(),
        }];
        assert!(parse(&capacity)
            .unwrap_err()
            .to_string()
            .contains("assumed"));
        capacity.prompts[0].measured_by = SizeSource::Usage;
        assert!(parse(&capacity).is_ok());
    }

    #[test]
    fn committed_schema_matches_the_types() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(AUDIT_SCHEMA_PATH);
        let want = audit_predicate_schema();
        if std::env::var_os("KVW_UPDATE_SCHEMA").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(have, want, "regenerate with KVW_UPDATE_SCHEMA=1");
    }
}
