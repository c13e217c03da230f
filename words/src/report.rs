//! The line `kvw verify` prints per receipt, from the facts the verifier
//! recomputed.

use kvw_evidence::bundle::{IndexEntry, ReceiptFacts, ReceiptLine, ReceiptOk};
use kvw_evidence::predicate::PoisonMode;

use crate::probe::{verdict_line, Verdict};
use crate::Lang;

/// A few words naming a probe run: probe, version, scale, poison mode and
/// fixes, e.g. `incident v2 walkthrough fixes=none`.
pub fn probe_label(e: &IndexEntry) -> String {
    let fixes = if e.fixes.is_empty() {
        "none".to_string()
    } else {
        e.fixes
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut text = format!(
        "{} v{} {} fixes={fixes}",
        e.probe.name, e.probe.version, e.scale
    );
    if e.poison_on_free != PoisonMode::Off {
        text.push_str(&format!(" poison-on-free={}", e.poison_on_free));
    }
    text
}

/// What was run and what it came to, for a verified receipt.
pub fn label_and_outcome(facts: &ReceiptFacts) -> (String, String) {
    match facts {
        ReceiptFacts::Probe(e) => {
            let v = &e.verdict;
            let outcome = verdict_line(
                &Verdict {
                    outcome: v.outcome,
                    http_status: v.http_status,
                    foreign_pages_read: v.foreign_pages_read,
                    tenant: v.tenant.as_deref(),
                    tenants_leaked: &v.tenants_leaked,
                    latency_us: v.latency_us,
                },
                Lang::En,
            );
            (probe_label(e), outcome)
        }
        ReceiptFacts::Other(f) => (crate::kinds::label(f), crate::kinds::outcome(f)),
    }
}

/// One line for one receipt: `ok    FILE  LABEL: OUTCOME`, or `FAIL  FILE: WHY`.
pub fn line(l: &ReceiptLine) -> String {
    match &l.result {
        Ok(ReceiptOk {
            facts,
            reproduced,
            not_rerun,
            ..
        }) => {
            let (label, outcome) = label_and_outcome(facts);
            let mut text = format!("ok    {}  {label}: {outcome}", l.file);
            if *reproduced {
                text.push_str(" [reproduced]");
            }
            if let Some(why) = not_rerun {
                text.push_str(&format!(" [not re-run: {why}]"));
            }
            text
        }
        Err(reason) => format!("FAIL  {}: {reason}", l.file),
    }
}
