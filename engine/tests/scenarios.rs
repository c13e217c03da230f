//! Every scenario holds with every fix on, fails or is not exercised as its
//! record says with none, and fails when its guard is removed — all in the
//! same test, so a scenario that stopped testing anything fails here.

use kvw_engine::scenarios::{all, Record, Setup, Status};
use kvw_evidence::Fix;

#[test]
fn every_scenario_holds_with_all_fixes_and_fails_without_its_guard() {
    let mut problems = Vec::new();
    for s in all() {
        let on = s.judge(&Setup::new(&Fix::ALL));
        if on.status != Status::Pass {
            problems.push(format!(
                "{}: with all fixes {:?}: {}",
                s.name, on.status, on.why
            ));
        }
        let none = s.judge(&Setup::new(&[]));
        if !none.as_recorded() {
            problems.push(format!(
                "{}: with no fixes {:?}, record says {:?}: {}",
                s.name, none.status, s.record, none.why
            ));
        }
        let removals = s.removals();
        if removals.is_empty() && s.name != "pool_at_least_context_takes_no_reject_path" {
            problems.push(format!("{}: no guard to remove", s.name));
        }
        for (what, setup) in removals {
            let removed = (s.run)(&setup);
            if removed.verdict.is_ok() {
                problems.push(format!("{}: still holds {what}", s.name));
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
    let recorded: Vec<_> = all()
        .into_iter()
        .filter(|s| s.record == Record::Fails && !s.exercised(&[]))
        .map(|s| s.name)
        .collect();
    assert_eq!(failing, recorded);
    assert!(!failing.is_empty());
}
