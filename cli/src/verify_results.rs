//! `kvw verify --reproduce` for scenario, gates, fuzz, model-check and
//! audit receipts.
//!
//! The envelope, signature, subject digest, the kind's own check and its
//! summary line are `kvw_evidence`'s ([`kvw_evidence::bundle::others`]);
//! this re-runs the result — the scenario under its recorded fixes, every
//! gate, or every run a fuzz receipt counts, from its seed — and compares
//! the whole predicate but the engine version and commit. A fuzz receipt
//! is sized against the [`ReproduceBudget`] first and refused when over
//! it. A model check or an audit is not re-run here, and the line says so.
//! The same re-run serves a lone receipt and every receipt of a bundle.

use kvw_engine::scenarios::receipts;
use kvw_evidence::audit::AUDIT_PREDICATE_TYPE;
use kvw_evidence::bundle::Rerun;
use kvw_evidence::model_check::{ModelCheckPredicate, MODEL_CHECK_PREDICATE_TYPE};
use kvw_evidence::scenario::{
    reproducible_sha256, FuzzPredicate, GatesPredicate, ScenarioPredicate, FUZZ_PREDICATE_TYPE,
    GATES_PREDICATE_TYPE, SCENARIO_PREDICATE_TYPE,
};
use kvw_evidence::VerifiedStatement;

use crate::budget::ReproduceBudget;

/// Re-run a receipt of another kind and compare.
pub fn reproduce(statement: &VerifiedStatement, budget: &ReproduceBudget) -> Result<Rerun, String> {
    match statement.predicate_type.as_str() {
        SCENARIO_PREDICATE_TYPE => {
            let p: ScenarioPredicate = statement.parse().map_err(|e| e.to_string())?;
            let again = receipts::run_named(&p.scenario.name, &p.fixes)
                .ok_or_else(|| format!("no scenario named {:?} in this engine", p.scenario.name))?;
            same(&p, &receipts::scenario_predicate(&again))?;
        }
        GATES_PREDICATE_TYPE => {
            let p: GatesPredicate = statement.parse().map_err(|e| e.to_string())?;
            same(&p, &receipts::gates(&p.fixes))?;
        }
        FUZZ_PREDICATE_TYPE => {
            let p: FuzzPredicate = statement.parse().map_err(|e| e.to_string())?;
            budget
                .check_fuzz(&p)
                .map_err(|why| format!("not re-run: {why}"))?;
            let again =
                kvw_engine::fuzz_campaign::campaign(p.runs, p.seed, &p.fixes, &|| {}).predicate;
            same(&p, &again)?;
        }
        MODEL_CHECK_PREDICATE_TYPE => {
            let p: ModelCheckPredicate = statement.parse().map_err(|e| e.to_string())?;
            let m = &p.model;
            return Ok(Rerun::NotRerun(format!(
                "a model check; re-check it with kvw check --fixes {} --requests {} --tenants {} \
                 --pages {} and its faults ({} abort(s), {} late write(s), {} lost ack(s))",
                m.fix_set(),
                m.requests,
                m.tenants,
                m.decode_pages,
                m.faults.aborts,
                m.faults.late_writes,
                m.faults.lost_acks
            )));
        }
        AUDIT_PREDICATE_TYPE => {
            return Ok(Rerun::NotRerun(
                "an audit of a remote endpoint; run kvw audit against it again".into(),
            ))
        }
        kvw_evidence::upstream_run::UPSTREAM_RUN_PREDICATE_TYPE => {
            return crate::upstream::reproduce(statement)
        }
        other => return Err(format!("unknown predicate type {other:?}")),
    }
    Ok(Rerun::Reproduced)
}

/// The receipt and its re-run agree on everything but `engine`.
fn same<P: serde::Serialize>(receipt: &P, again: &P) -> Result<(), String> {
    let (a, b) = (reproducible_sha256(receipt), reproducible_sha256(again));
    if a != b {
        return Err(format!(
            "re-run does not reproduce the receipt (differs in: {}; digest {b}, receipt {a})",
            differing(receipt, again)
        ));
    }
    Ok(())
}

/// The fields (one level into objects) in which two predicates differ.
fn differing<P: serde::Serialize>(a: &P, b: &P) -> String {
    let (Ok(a), Ok(b)) = (serde_json::to_value(a), serde_json::to_value(b)) else {
        return "unknown".into();
    };
    let mut out = Vec::new();
    diff("", &a, &b, 2, &mut out);
    out.retain(|f| f != "engine" && !f.starts_with("engine."));
    if out.is_empty() {
        "unknown".into()
    } else {
        out.join(", ")
    }
}

fn diff(at: &str, a: &serde_json::Value, b: &serde_json::Value, depth: u32, out: &mut Vec<String>) {
    use serde_json::Value;
    if a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) if depth > 0 => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let name = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                let null = Value::Null;
                diff(
                    &name,
                    x.get(k).unwrap_or(&null),
                    y.get(k).unwrap_or(&null),
                    depth - 1,
                    out,
                );
            }
        }
        _ => out.push(at.to_string()),
    }
}
