//! The verdicts the model checker must reach, each paired with the
//! configuration that must fail, so no test passes because the model
//! stopped exploring the failing path.

use kvw_check::handoff_model::{prop, Action, PdModel, Violation, Writer};
use kvw_check::{run, run_model, CheckOptions, CheckReport, FaultBudget, Strategy};
use kvw_engine::policy::{self, Door};
use kvw_engine::req::Req;
use kvw_evidence::model_check::PropertyStatus;
use kvw_evidence::Fix;
use stateright::Model;

fn check(opts: &CheckOptions) -> CheckReport {
    run(opts, &mut |_| {}).expect("valid options")
}

fn opts(fixes: &[Fix], requests: u32, faults: FaultBudget) -> CheckOptions {
    CheckOptions {
        fixes: fixes.to_vec(),
        requests,
        faults,
        ..CheckOptions::default()
    }
}

fn all_faults() -> FaultBudget {
    FaultBudget {
        aborts: 1,
        late_writes: 1,
        lost_acks: 1,
    }
}

fn without(f: Fix) -> Vec<Fix> {
    Fix::ALL.into_iter().filter(|x| *x != f).collect()
}

#[test]
fn no_fixes_finds_the_incident() {
    let r = check(&opts(&[], 2, FaultBudget::default()));
    assert_eq!(r.status(prop::ISOLATION), Some(PropertyStatus::Violated));
    assert_eq!(
        r.status(prop::REJECTED_NEVER_200),
        Some(PropertyStatus::Violated)
    );
    let (name, path) = r.counterexample.clone().expect("a counterexample");
    assert_eq!(name, prop::ISOLATION);
    let steps = path.clone().into_vec();
    let actions: Vec<Action> = steps.iter().filter_map(|(_, a)| *a).collect();
    // The incident's shape: the rejected request r0 is admitted at prefill,
    // sends a short handoff, and decode accepts it and reads its pages.
    for a in [
        Action::PrefillForward(0),
        Action::DecodePoll(0),
        Action::DecodeStep(0),
    ] {
        assert!(actions.contains(&a), "{a:?} missing from {actions:?}");
    }
    let last = path.last_state();
    let r0 = &last.reqs[0];
    assert_eq!(r0.room.posted, 1, "only the placeholder's page was sent");
    assert_eq!(r0.room.dst.as_ref().map(Vec::len), Some(3));
    assert_eq!(r0.answers, vec![200]);
    assert!(last.violations.iter().any(|v| matches!(
        v,
        Violation::ForeignRead {
            reader: 0,
            writer: Some(Writer::Earlier(_)),
            ..
        }
    )));
    // BFS: the path is the shortest one. Apart from the arrivals, taken
    // first by the partial-order reduction, only r0 acts: prealloc,
    // handshake, forward+send, land, poll, step.
    let own: Vec<&Action> = actions
        .iter()
        .filter(|a| !matches!(a, Action::DecodeRecv(_) | Action::PrefillRecv(_)))
        .collect();
    assert!(own.iter().all(|a| a.req() == 0), "{actions:?}");
    assert_eq!(own.len(), 6, "{actions:?}");
}

/// The faults every fix withstands: aborts and lost acks. A late write is
/// the one fault they do not (see
/// [`a_write_later_than_the_release_timeout_is_found_with_every_fix`]).
fn holding_faults() -> FaultBudget {
    FaultBudget {
        aborts: 1,
        late_writes: 0,
        lost_acks: 1,
    }
}

#[test]
fn all_fixes_hold_for_two_requests_with_aborts_and_lost_acks() {
    let o = CheckOptions {
        strategy: Strategy::DfsSymmetry,
        threads: 2,
        ..opts(&Fix::ALL, 2, holding_faults())
    };
    let r = check(&o);
    assert!(r.complete);
    assert!(r.all_hold(), "{:?}", r.properties);
    let pre = check(&CheckOptions {
        fixes: Vec::new(),
        ..o
    });
    assert_eq!(pre.status(prop::ISOLATION), Some(PropertyStatus::Violated));
}

/// Deferred release gives decode's pages back at its release timeout with
/// or without the drain ack (SGLang PR #35049; #38961 calls it a
/// use-after-free window): a write still on the wire then lands in the
/// pages' next owner, with every fix on.
#[test]
fn a_write_later_than_the_release_timeout_is_found_with_every_fix() {
    let r = check(&opts(&Fix::ALL, 2, all_faults()));
    assert_eq!(
        r.status(prop::NO_WRITE_AFTER_REASSIGN),
        Some(PropertyStatus::Violated)
    );
    assert_eq!(r.status(prop::ISOLATION), Some(PropertyStatus::Holds));
    let (name, path) = r.counterexample.clone().expect("counterexample");
    assert_eq!(name, prop::NO_WRITE_AFTER_REASSIGN);
    let actions = path.into_actions();
    let timeout = actions
        .iter()
        .position(|a| matches!(a, Action::ReleaseTimeout(_)))
        .expect("the pages went back at the release timeout");
    let writer = actions[timeout].req();
    assert!(
        actions[timeout..]
            .iter()
            .any(|a| matches!(a, Action::Land(w) if w.req == writer)),
        "{actions:?}"
    );
    // Without the late write, nothing is on the wire at the timeout.
    let held = check(&opts(&Fix::ALL, 2, holding_faults()));
    assert_eq!(
        held.status(prop::NO_WRITE_AFTER_REASSIGN),
        Some(PropertyStatus::Holds)
    );
}

#[test]
fn all_fixes_hold_for_three_requests_with_aborts() {
    let faults = FaultBudget {
        aborts: 1,
        ..FaultBudget::default()
    };
    let o = CheckOptions {
        strategy: Strategy::DfsSymmetry,
        threads: 2,
        ..opts(&Fix::ALL, 3, faults)
    };
    let r = check(&o);
    assert!(r.complete);
    assert!(r.all_hold(), "{:?}", r.properties);
    // The same faults without fixes fail already with two requests.
    let pre = check(&CheckOptions {
        fixes: Vec::new(),
        requests: 2,
        ..o
    });
    assert_eq!(pre.status(prop::ISOLATION), Some(PropertyStatus::Violated));
}

#[test]
fn retire_aborted_prefill_result_alone_closes_the_incident_path() {
    let fixed = check(&opts(
        &[Fix::RetireAbortedPrefillResult],
        2,
        FaultBudget::default(),
    ));
    assert_eq!(fixed.status(prop::ISOLATION), Some(PropertyStatus::Holds));
    assert_eq!(
        fixed.status(prop::REJECTED_NEVER_200),
        Some(PropertyStatus::Holds)
    );
    assert!(fixed.all_hold(), "{:?}", fixed.properties);
    let pre = check(&opts(&[], 2, FaultBudget::default()));
    assert_eq!(pre.status(prop::ISOLATION), Some(PropertyStatus::Violated));
}

/// The long check (minutes on two cores): run it with
/// `cargo test --release -p kvw-check -- --ignored`.
#[test]
#[ignore = "long: the three-request state space with aborts and lost acks"]
fn all_fixes_hold_for_three_requests_with_aborts_and_lost_acks() {
    let o = CheckOptions {
        strategy: Strategy::DfsSymmetry,
        threads: 2,
        ..opts(&Fix::ALL, 3, holding_faults())
    };
    let r = check(&o);
    assert!(r.complete);
    assert!(r.all_hold(), "{:?}", r.properties);
    assert!(r.counterexample.is_none());
    assert!(r.unique_states > 1_000, "{} states", r.unique_states);
    let pre = check(&CheckOptions {
        fixes: Vec::new(),
        ..o
    });
    assert_eq!(pre.status(prop::ISOLATION), Some(PropertyStatus::Violated));
    assert!(pre.counterexample.is_some());
}

#[test]
fn symmetry_agrees_with_plain_search() {
    let base = opts(&Fix::ALL, 3, FaultBudget::default());
    let plain = check(&base);
    let sym = check(&CheckOptions {
        strategy: Strategy::DfsSymmetry,
        ..base
    });
    assert!(plain.all_hold() && sym.all_hold());
    assert!(
        sym.unique_states < plain.unique_states,
        "symmetry merged nothing: {} vs {}",
        sym.unique_states,
        plain.unique_states
    );
}

/// An abort cancels no write already on the wire: without deferred release
/// decode frees the pages at the abort and the write lands after.
#[test]
fn a_write_on_the_wire_at_an_abort_needs_deferred_release() {
    let faults = FaultBudget {
        aborts: 1,
        late_writes: 0,
        lost_acks: 0,
    };
    let pre = check(&opts(&without(Fix::DeferredRelease), 2, faults));
    assert_eq!(
        pre.status(prop::NO_WRITE_AFTER_REASSIGN),
        Some(PropertyStatus::Violated)
    );
    let (_, path) = pre.counterexample.clone().expect("counterexample");
    let actions = path.into_actions();
    assert!(actions.iter().any(|a| matches!(a, Action::ClientAbort(_))));
    assert!(actions.iter().any(|a| matches!(a, Action::Land(_))));
    let fixed = check(&opts(&Fix::ALL, 2, faults));
    assert_eq!(
        fixed.status(prop::NO_WRITE_AFTER_REASSIGN),
        Some(PropertyStatus::Holds)
    );
    assert!(fixed.all_hold(), "{:?}", fixed.properties);
}

/// The liveness property flags a quiescent state that left a request
/// unanswered (no modelled path does so at these bounds; one lost ack leaks
/// at most one request's pages).
#[test]
fn an_unanswered_request_at_quiescence_is_detected() {
    let m = opts(&Fix::ALL, 1, FaultBudget::default()).model().unwrap();
    let mut s = m.init_states().remove(0);
    let props = m.properties();
    let p = props
        .iter()
        .find(|p| p.name == prop::ADMITTED_ANSWERED)
        .unwrap();
    assert!((p.condition)(&m, &s), "not quiescent yet");
    // The request never reaches either worker: nothing can move.
    s.reqs[0].to_prefill.clear();
    s.reqs[0].to_decode.clear();
    assert!(m.is_terminal(&s));
    assert!(!(p.condition)(&m, &s));
}

/// A door that also reads `to_finish` — what the incident's door should
/// have asked.
fn door_reading_to_finish(req: &Req) -> Door {
    if req.finished() || req.to_finish.is_some() {
        Door::DropFinished
    } else {
        Door::Admit
    }
}

#[test]
fn the_checked_door_is_the_shipped_door() {
    let o = opts(&[], 2, FaultBudget::default());
    let shipped = o.model().unwrap();
    // The default door answers as the engine's door does.
    let mut rejected = Req::new("r0", "t0", vec![1; 20], 1, 0);
    rejected.set_finish_with_abort("too long", 400);
    let mut finished = rejected.clone();
    finished.update_finish_state();
    for req in [&rejected, &finished] {
        assert_eq!(
            (shipped.prefill_door)(req),
            policy::prefill_admission_door(req)
        );
    }
    let pre = run_model(&o, shipped.clone(), &mut |_| {}).unwrap();
    assert_eq!(pre.status(prop::ISOLATION), Some(PropertyStatus::Violated));
    let other = PdModel {
        prefill_door: door_reading_to_finish,
        ..shipped
    };
    let r = run_model(&o, other, &mut |_| {}).unwrap();
    assert_eq!(r.status(prop::ISOLATION), Some(PropertyStatus::Holds));
    assert_eq!(
        r.status(prop::REJECTED_NEVER_200),
        Some(PropertyStatus::Holds)
    );
}

#[test]
fn a_fix_that_changes_a_door_changes_the_verdict() {
    // retire-unadmitted-reject changes `policy::entry_door` only; with
    // nothing else on, the rejected request never reaches the forward.
    let r = check(&opts(
        &[Fix::RetireUnadmittedReject],
        2,
        FaultBudget::default(),
    ));
    assert_eq!(r.status(prop::ISOLATION), Some(PropertyStatus::Holds));
    assert!(r.all_hold(), "{:?}", r.properties);
}

#[test]
fn the_model_is_not_vacuous() {
    let r = check(&opts(&Fix::ALL, 2, FaultBudget::default()));
    assert_eq!(
        r.status(prop::COMPLETES_NORMALLY),
        Some(PropertyStatus::Witnessed)
    );
    // A door that admits nothing: no request can complete.
    let o = opts(&Fix::ALL, 2, FaultBudget::default());
    let never = PdModel {
        prefill_door: |_| Door::DropFinished,
        ..o.model().unwrap()
    };
    let r = run_model(&o, never, &mut |_| {}).unwrap();
    assert_eq!(
        r.status(prop::COMPLETES_NORMALLY),
        Some(PropertyStatus::NotWitnessed)
    );
    assert!(!r.all_hold());
}

/// Safety properties no modelled path breaks are still live detectors:
/// a state that breaks them is flagged.
#[test]
fn double_free_and_double_answer_are_detected() {
    let m = opts(&[], 2, FaultBudget::default()).model().unwrap();
    let mut s = m.init_states().remove(0);
    // A deferred release of a page r1 does not hold.
    s.deferred.push(kvw_check::handoff_model::Deferred {
        side: kvw_check::handoff_model::Side::Decode,
        req: 1,
        pages: vec![0],
    });
    let after = m
        .next_state(
            &s,
            Action::Release(kvw_check::handoff_model::Side::Decode, 1),
        )
        .unwrap();
    let props = m.properties();
    let holds = |name: &str, st| {
        let p = props.iter().find(|p| p.name == name).unwrap();
        (p.condition)(&m, st)
    };
    assert!(holds(prop::NO_DOUBLE_FREE, &s));
    assert!(!holds(prop::NO_DOUBLE_FREE, &after));
    let mut twice = s.clone();
    twice.violations.push(Violation::AnsweredTwice { req: 1 });
    assert!(!holds(prop::ANSWERED_AT_MOST_ONCE, &twice));
}

#[test]
fn bad_bounds_are_refused() {
    assert!(CheckOptions {
        requests: 0,
        ..CheckOptions::default()
    }
    .model()
    .is_err());
    assert!(CheckOptions {
        decode_pages: 0,
        ..CheckOptions::default()
    }
    .model()
    .is_err());
    assert!("retire-everything".parse::<kvw_evidence::FixSet>().is_err());
    assert!(kvw_check::parse_faults("meteor").is_err());
    assert_eq!(kvw_check::parse_faults("all").unwrap(), all_faults());
}

#[test]
fn explorer_listens_only_on_loopback() {
    use kvw_check::{explore_address, CheckError};
    assert!(matches!(
        explore_address("0.0.0.0:3000"),
        Err(CheckError::NotLoopback(_))
    ));
    assert!(matches!(
        explore_address("192.168.1.4:3000"),
        Err(CheckError::NotLoopback(_))
    ));
    assert!(matches!(
        explore_address("example.com:80"),
        Err(CheckError::Address(_))
    ));
    let ok = explore_address("127.0.0.1:0").expect("loopback accepted");
    assert!(ok.ip().is_loopback());
    assert!(explore_address("localhost:0").is_ok());
}
