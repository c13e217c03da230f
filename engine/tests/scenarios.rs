//! Every scenario holds with every fix on, fails or is not exercised as its
//! record says with none, and fails when its guard is removed — all in the
//! same test, so a scenario that stopped testing anything fails here.

use kvw_engine::scenarios::{all, fix_names, Record, Removed, Setup, Status};
use kvw_evidence::Fix;
use kvw_words::scenario::{guard_rule, why};
use kvw_words::Lang;

/// A guard-removed run, in words.
fn without(r: &Removed) -> String {
    match r {
        Removed::Fixes(fixes) => format!("without {}", fix_names(fixes)),
        Removed::Rule(rule) => format!("without the rule: {}", guard_rule(*rule, Lang::En)),
    }
}

#[test]
fn every_scenario_holds_with_all_fixes_and_fails_without_its_guard() {
    let mut problems = Vec::new();
    for s in all() {
        let on = s.judge(&Setup::new(&Fix::ALL));
        if on.status != Status::Pass {
            problems.push(format!(
                "{}: with all fixes {:?}: {}",
                s.name,
                on.status,
                why(&on.why, Lang::En)
            ));
        }
        let none = s.judge(&Setup::new(&[]));
        if !none.as_recorded() {
            problems.push(format!(
                "{}: with no fixes {:?}, record says {:?}: {}",
                s.name,
                none.status,
                s.record,
                why(&none.why, Lang::En)
            ));
        }
        let removals = s.removals();
        if removals.is_empty() && s.name != "pool_at_least_context_takes_no_reject_path" {
            problems.push(format!("{}: no guard to remove", s.name));
        }
        for (what, setup) in removals {
            let removed = (s.run)(&setup);
            if removed.verdict.is_ok() {
                problems.push(format!("{}: still holds {}", s.name, without(&what)));
            }
        }
        eprintln!("{:<90} all={:?} none={:?}", s.name, on.status, none.status);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn none_fails_exactly_the_recorded_scenarios() {
    let failing: Vec<_> = all()
        .into_iter()
        .filter(|s| s.judge(&Setup::new(&[])).status == Status::Fail)
        .map(|s| s.name)
        .collect();
    // The recorded failures, and the cases the record did not observe
    // before their fix (the engine predicts they fail too).
    let predicted: Vec<_> = all()
        .into_iter()
        .filter(|s| s.record != Record::HoldsVacuously && !s.exercised(&[]))
        .map(|s| s.name)
        .collect();
    assert_eq!(failing, predicted);
    assert!(!failing.is_empty());
}

/// Of the cleanup cases, the record observed only two effects before
/// PR #36988; every other one says it was not observed pre-fix, and its
/// receipt carries the reason.
#[test]
fn only_the_two_observed_cleanup_effects_are_recorded_as_failing_pre_fix() {
    use kvw_engine::scenarios::cleanup;
    use kvw_evidence::judged::Expected;
    let cases = cleanup::scenarios();
    assert_eq!(cases.len(), 11);
    let recorded: Vec<_> = cases
        .iter()
        .filter(|s| s.record == Record::Fails)
        .map(|s| s.name)
        .collect();
    assert_eq!(recorded, cleanup::OBSERVED_PRE_FIX);
    for s in cases.iter().filter(|s| s.record != Record::Fails) {
        assert_eq!(s.record, Record::NotObservedPreFix, "{}", s.name);
        let none = s.judge(&Setup::new(&[]));
        assert!(
            matches!(&none.expected, Expected::NotObservedWithout { reason, .. }
                if reason.contains("sampling-mask tests postdate")),
            "{}: {:?}",
            s.name,
            none.expected
        );
    }
}

#[test]
fn every_scenario_has_its_words_in_both_languages() {
    use kvw_words::scenario::{outcome, scenario_text};
    for s in all() {
        let t = scenario_text(s.name).unwrap_or_else(|| panic!("{}: no words", s.name));
        for (en, it) in [
            (t.description(Lang::En), t.description(Lang::It)),
            (t.closed_by(Lang::En), t.closed_by(Lang::It)),
        ] {
            assert!(
                !en.to_string().is_empty() && !it.to_string().is_empty(),
                "{}",
                s.name
            );
        }
        assert_ne!(
            t.description(Lang::En).to_string(),
            t.description(Lang::It).to_string(),
            "{}",
            s.name
        );
        let expects = (s.expects)();
        assert_ne!(
            outcome(&expects, Lang::En).to_string(),
            outcome(&expects, Lang::It).to_string(),
            "{}",
            s.name
        );
    }
}

#[test]
fn a_held_run_observes_what_it_expected_and_a_broken_one_says_why() {
    use kvw_evidence::judged::{Expected, Observed, Why};
    for s in all() {
        let on = s.judge(&Setup::new(&Fix::ALL));
        let Expected::Holds { outcome } = &on.expected else {
            panic!("{}: with all fixes the guard is on", s.name)
        };
        let Observed::Held { outcome: seen } = &on.observed else {
            panic!("{}: holds with all fixes", s.name)
        };
        // Every fact the expected outcome pins (all but those it leaves
        // open as null) is the one the run showed.
        let (want, got) = (
            serde_json::to_value(outcome).unwrap(),
            serde_json::to_value(seen).unwrap(),
        );
        let (want, got) = (want.as_object().unwrap(), got.as_object().unwrap());
        for (k, v) in want {
            assert!(
                v.is_null() || got.get(k) == Some(v),
                "{}: expected {k} = {v}, observed {:?}",
                s.name,
                got.get(k)
            );
        }
        assert!(matches!(on.why, Why::GuardedBy { .. }), "{}", s.name);
        let none = s.judge(&Setup::new(&[]));
        if none.status == Status::Fail {
            assert_eq!(none.observed, Observed::AssertionFails);
            assert!(
                matches!(&none.why, Why::Broke { guard_off, .. } if !guard_off.is_empty()),
                "{}: {:?}",
                s.name,
                none.why
            );
        }
    }
}

/// The two in-flight chunk cases and their rule rest on a model
/// assumption (upstream's `inflight_middle_chunks` counts overlapped
/// middle-chunk results, PR #36926), and what they sign says so.
#[test]
fn the_inflight_chunk_cases_sign_their_model_assumption() {
    use kvw_engine::scenarios::{cleanup, receipts};
    for s in all() {
        let info = receipts::info(&s);
        if cleanup::INFLIGHT_CHUNK_CASES.contains(&s.name) {
            let why = info.model_assumption.expect("labelled");
            assert!(
                why.starts_with("model-assumption") && why.contains("#36926"),
                "{why}"
            );
        } else {
            assert!(info.model_assumption.is_none(), "{}", s.name);
        }
    }
}
