//! What a receipt of another kind (model check, scenario, gates, fuzz,
//! audit) is and what it came to, in a few words, from its facts.

use kvw_evidence::audit::GateResult;
use kvw_evidence::kinds::{status_name, OtherFacts};
use kvw_evidence::predicate::Fix;

use crate::Lang;

/// The switches as `a,b`, `none`, or `all` when every switch is on.
fn fixes(fixes: &[Fix]) -> String {
    kvw_evidence::FixSet::new(fixes).to_string()
}

/// The English noun these labels count requests with.
const REQUEST: [&str; 2] = ["request", "requests"];

/// What was run, in a few words.
pub fn label(f: &OtherFacts) -> String {
    match f {
        OtherFacts::ModelCheck {
            requests,
            tenants,
            decode_pages,
            fixes: on,
            ..
        } => format!(
            "model check, {}, {}, {decode_pages} decode pages, fixes={}",
            Lang::En.count(u64::from(*requests), REQUEST, REQUEST),
            Lang::En.count(
                u64::from(*tenants),
                ["tenant", "tenants"],
                ["tenant", "tenant"]
            ),
            fixes(on)
        ),
        OtherFacts::Scenario {
            scenario,
            fixes: on,
            ..
        } => format!("scenario {scenario} fixes={}", fixes(on)),
        OtherFacts::Gates { fixes: on, .. } => format!("gates fixes={}", fixes(on)),
        OtherFacts::Fuzz {
            fixes: on,
            seed,
            runs,
            ..
        } => format!("fuzz fixes={} seed={seed} runs={runs}", fixes(on)),
        OtherFacts::Audit {
            gate,
            endpoint,
            exchanges,
            ..
        } => format!("audit {gate} of {endpoint} ({exchanges} exchanges)"),
        OtherFacts::UpstreamRun { case, release, .. } => {
            format!("upstream run {case} on SGLang {release}")
        }
    }
}

/// What it came to, in one line (English).
pub fn outcome(f: &OtherFacts) -> String {
    match f {
        OtherFacts::ModelCheck {
            all_hold,
            violated,
            unique_states,
            max_depth,
            complete,
            ..
        } => {
            let verdict = if *all_hold {
                "every property holds".to_string()
            } else if violated.is_empty() {
                "not every property was decided or witnessed".to_string()
            } else {
                format!("violated: {}", violated.join(", "))
            };
            format!(
                "{verdict} ({unique_states} unique states, depth {max_depth}{})",
                if *complete {
                    ""
                } else {
                    ", search stopped early"
                }
            )
        }
        OtherFacts::Scenario { status, why, .. } => format!(
            "{}: {}",
            status_name(*status),
            crate::scenario::why(why, Lang::En)
        ),
        OtherFacts::Gates {
            rows,
            pass,
            fail,
            not_exercised,
            ..
        } => format!("{pass} of {rows} rows pass, {fail} fail, {not_exercised} not exercised"),
        OtherFacts::Fuzz {
            violating_runs,
            shrunk,
            ..
        } => match shrunk {
            Some(c) => format!(
                "{}; shrunk to {}: {}",
                Lang::En.count(*violating_runs, ["violating run", "violating runs"], ["", ""]),
                Lang::En.count(c.requests, REQUEST, REQUEST),
                c.invariant
            ),
            None => "no invariant broken".into(),
        },
        OtherFacts::Audit { result, reason, .. } => {
            let result = match result {
                GateResult::Pass => "pass",
                GateResult::Fail => "fail",
                GateResult::Inconclusive => "inconclusive",
            };
            format!("{result}: {reason}")
        }
        OtherFacts::UpstreamRun {
            agree,
            explained,
            differ,
            not_applicable,
            ..
        } => format!(
            "{agree} agree, {explained} differ with the reason given, {differ} differ unexplained, {not_applicable} n.a."
        ),
    }
}
