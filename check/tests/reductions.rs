//! The reductions of the verdict search ([`kvw_check::symmetry`], the
//! partial-order reduction of arrivals, the quick terminal test) must merge
//! states without changing a verdict: each is compared with the search that
//! does without it, on bounds small enough for both, with and without fixes.

use std::collections::{HashSet, VecDeque};

use kvw_check::handoff_model::prop;
use kvw_check::symmetry::{is_retired, representative};
use kvw_check::{run, run_model, CheckOptions, CheckReport, FaultBudget, Strategy};
use kvw_evidence::model_check::PropertyStatus;
use kvw_evidence::Fix;
use stateright::Model;

fn check(opts: &CheckOptions) -> CheckReport {
    run(opts, &mut |_| {}).expect("valid options")
}

fn statuses(r: &CheckReport) -> Vec<(&'static str, PropertyStatus)> {
    r.properties.iter().map(|p| (p.name, p.status)).collect()
}

const EVERY_FAULT: FaultBudget = FaultBudget {
    aborts: 1,
    late_writes: 1,
    lost_acks: 1,
};

#[test]
fn reduced_and_plain_searches_reach_the_same_verdicts() {
    for fixes in [Fix::ALL.to_vec(), Vec::new(), without_deferred_release()] {
        let plain = CheckOptions {
            fixes: fixes.clone(),
            requests: 2,
            faults: EVERY_FAULT,
            ..CheckOptions::default()
        };
        let reduced = CheckOptions {
            strategy: Strategy::DfsSymmetry,
            threads: 2,
            ..plain.clone()
        };
        let (a, b) = (check(&plain), check(&reduced));
        assert_eq!(statuses(&a), statuses(&b), "fixes {fixes:?}");
    }
    // Without fixes both find the incident; with them both hold.
    let pre = check(&CheckOptions {
        strategy: Strategy::DfsSymmetry,
        requests: 2,
        faults: EVERY_FAULT,
        ..CheckOptions::default()
    });
    assert_eq!(pre.status(prop::ISOLATION), Some(PropertyStatus::Violated));
}

fn without_deferred_release() -> Vec<Fix> {
    Fix::ALL
        .into_iter()
        .filter(|f| *f != Fix::DeferredRelease)
        .collect()
}

/// With two requests no permutation applies (`r0` never moves), so every
/// state merged is the collapse of a retired request.
#[test]
fn retired_requests_collapse() {
    let base = CheckOptions {
        fixes: Fix::ALL.to_vec(),
        requests: 2,
        faults: EVERY_FAULT,
        ..CheckOptions::default()
    };
    let plain = check(&base);
    let reduced = check(&CheckOptions {
        strategy: Strategy::DfsSymmetry,
        ..base.clone()
    });
    assert!(plain.complete && reduced.complete);
    // Every fault includes a write later than the release timeout, so
    // no-write-after-reassignment fails here; both searches must agree.
    assert_eq!(plain.properties, reduced.properties);
    assert!(
        reduced.unique_states < plain.unique_states,
        "nothing merged: {} vs {}",
        reduced.unique_states,
        plain.unique_states
    );
    // A representative keeps everything a property reads and every action.
    let m = base.model().unwrap();
    for s in reachable(&m) {
        let rep = representative(&s);
        for p in m.properties() {
            assert_eq!((p.condition)(&m, &s), (p.condition)(&m, &rep), "{}", p.name);
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        m.actions(&s, &mut a);
        m.actions(&rep, &mut b);
        assert_eq!(a, b);
        for r in 0..s.reqs.len() {
            if is_retired(&s, r as u8) {
                assert!(rep.reqs[r].preq.is_none() && rep.reqs[r].dreq.is_none());
                assert_eq!(rep.reqs[r].answers, s.reqs[r].answers);
            }
        }
    }
}

/// Every state reachable at a small bound, by a plain search.
fn reachable(m: &kvw_check::PdModel) -> Vec<kvw_check::State> {
    let mut seen = HashSet::new();
    let mut queue: VecDeque<_> = m.init_states().into();
    let mut out = Vec::new();
    let mut actions = Vec::new();
    while let Some(s) = queue.pop_front() {
        if !seen.insert(s.clone()) {
            continue;
        }
        m.actions(&s, &mut actions);
        for a in actions.drain(..) {
            if let Some(n) = m.next_state(&s, a) {
                queue.push_back(n);
            }
        }
        out.push(s);
    }
    out
}

#[test]
fn the_quick_terminal_test_agrees_with_the_action_list() {
    for fixes in [Fix::ALL.to_vec(), Vec::new()] {
        let m = CheckOptions {
            fixes,
            requests: 2,
            faults: FaultBudget {
                aborts: 1,
                late_writes: 1,
                lost_acks: 0,
            },
            ..CheckOptions::default()
        }
        .model()
        .unwrap();
        let states = reachable(&m);
        assert!(states.len() > 100);
        let mut terminal = 0;
        for s in &states {
            let mut a = Vec::new();
            m.actions(s, &mut a);
            assert_eq!(m.is_terminal(s), a.is_empty());
            terminal += usize::from(a.is_empty());
        }
        assert!(terminal > 0, "some execution ends");
    }
}

/// `retire-aborted-prefill-result` alone closes the incident's path also
/// with three requests, where request symmetry merges states too.
#[test]
fn the_fix_alone_closes_the_path_with_three_requests() {
    let o = CheckOptions {
        fixes: vec![Fix::RetireAbortedPrefillResult],
        requests: 3,
        faults: FaultBudget::default(),
        strategy: Strategy::DfsSymmetry,
        threads: 2,
        ..CheckOptions::default()
    };
    let fixed = check(&o);
    assert!(fixed.complete);
    assert_eq!(fixed.status(prop::ISOLATION), Some(PropertyStatus::Holds));
    assert_eq!(
        fixed.status(prop::REJECTED_NEVER_200),
        Some(PropertyStatus::Holds)
    );
    let pre = run_model(
        &CheckOptions {
            fixes: Vec::new(),
            ..o.clone()
        },
        CheckOptions {
            fixes: Vec::new(),
            ..o
        }
        .model()
        .unwrap(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(pre.status(prop::ISOLATION), Some(PropertyStatus::Violated));
    let (name, path) = pre.counterexample.expect("a counterexample");
    assert_eq!(name, prop::ISOLATION);
    let last = path.last_state();
    assert_eq!(last.reqs[0].room.posted, 1, "the short handoff");
    assert_eq!(last.reqs[0].answers, vec![200]);
}

/// Decode's `abort_request` of a running request sets `to_finish` and
/// leaves its computed input as it is (upstream assigns `FINISH_ABORT`;
/// `set_finish_with_abort`, which swaps in a one-token placeholder, is the
/// admission path's), checked on every reachable state with a client abort.
#[test]
fn a_running_decode_request_is_aborted_through_to_finish_with_its_input_kept() {
    let m = CheckOptions {
        fixes: Vec::new(),
        requests: 2,
        faults: FaultBudget {
            aborts: 1,
            late_writes: 0,
            lost_acks: 0,
        },
        ..CheckOptions::default()
    }
    .model()
    .unwrap();
    let mut seen = 0;
    for s in reachable(&m) {
        for r in &s.reqs {
            let Some(req) = r.dreq.as_ref() else { continue };
            let aborted = matches!(
                &req.to_finish,
                Some(kvw_engine::req::FinishReason::Abort { message, .. })
                    if message == "Aborted by AbortReq."
            );
            if aborted && r.dstage == kvw_check::handoff_model::DStage::Running {
                seen += 1;
                assert!(
                    req.origin_input_ids.len() > 1,
                    "the running request keeps its input"
                );
            }
        }
    }
    assert!(
        seen > 0,
        "a running decode request was aborted in some state"
    );
}
