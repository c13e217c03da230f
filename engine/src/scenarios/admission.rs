//! Conformance with upstream's `test_admission_abort_not_enqueued.py`
//! (PR #38935), one scenario per test and subtest, read at the pinned commit
//! (`8 tests, 12 subtests`).
//!
//! Upstream calls the door functions on a hand-built `Req`; here the same
//! `Req` state arrives through the router and runs through the whole engine,
//! and the assertion reads the door's typed event (the state it saw and what
//! it decided) and what followed: no sender, bootstrap or receiver for a
//! retired request; a re-entering one kept, with its pending abort, in the
//! queue that owes its release.

use kvw_evidence::judged::{AfterReentry, Breach, GuardRule, Outcome};
use kvw_evidence::{
    DoorDecision, DoorName, EventKind, Fix, ResourceAction as RA, ResourceKind as RK, Worker,
};

use super::script::{judge, Script};
use super::{Gate, Guard, Observed, Record, Rule, Scenario, Setup, Upstream};
use crate::ensure;
use crate::policy::{Doors, SessionEffect};
use crate::req::Req;
use crate::sim::{Extras, Reentry, ABORT_MESSAGE};

const PATH: &str = "test/registered/unit/disaggregation/test_admission_abort_not_enqueued.py";

fn upstream(test: &'static str, subtest: Option<&'static str>) -> Option<Upstream> {
    Some(Upstream {
        path: PATH,
        test,
        subtest,
    })
}

const RETIRE: &[Fix] = &[Fix::RetireUnadmittedReject];

/// A door that retires every pending rejection: `is_unadmitted_reject`
/// without its exclusions (metadata buffer, retraction backup, flags).
fn naive_door(d: &mut Doors) {
    d.unadmitted_reject = |r: &Req| r.to_finish.is_some() && !r.finished();
}

const NAIVE: Option<Rule> = Some(Rule {
    what: GuardRule::UnadmittedRejectExclusions,
    remove: naive_door,
});

/// The pending abort "abort method 3" leaves on a running request.
fn aborted(prefill: bool, decode: bool) -> Reentry {
    Reentry {
        prefill,
        decode,
        to_finish: Some((ABORT_MESSAGE.into(), 503)),
        ..Reentry::default()
    }
}

pub fn scenarios() -> Vec<Scenario> {
    let reentry = |name, subtest, expects, run| Scenario {
        name,
        gate: Gate::RejectAdmission,
        upstream: upstream(name_of(name), Some(subtest)),
        guard: Guard {
            fixes: RETIRE,
            rule: NAIVE,
        },
        record: Record::HoldsVacuously,
        expects,
        run,
    };
    vec![
        Scenario {
            name: "test_rejected_request_is_retired_at_each_pd_door.prefill",
            gate: Gate::RejectAdmission,
            upstream: upstream(
                "test_rejected_request_is_retired_at_each_pd_door",
                Some("door=prefill"),
            ),
            guard: Guard {
                fixes: RETIRE,
                rule: None,
            },
            record: Record::Fails,
            expects: || Outcome::RetiredAtDoor {
                door: DoorName::PrefillBootstrapQueue,
            },
            run: rejected_at_prefill,
        },
        Scenario {
            name: "test_rejected_request_is_retired_at_each_pd_door.decode",
            gate: Gate::RejectAdmission,
            upstream: upstream(
                "test_rejected_request_is_retired_at_each_pd_door",
                Some("door=decode"),
            ),
            guard: Guard {
                fixes: RETIRE,
                rule: None,
            },
            record: Record::Fails,
            expects: || Outcome::RetiredAtDoor {
                door: DoorName::DecodePreallocQueue,
            },
            run: rejected_at_decode,
        },
        reentry(
            "test_reentering_prefill_request_is_not_retired.metadata_buffer_index",
            "marker=metadata_buffer_index",
            || {
                prefill_reentry(AfterReentry::FreedByItsQueue {
                    resource: RK::MetadataBuffer,
                })
            },
            reenter_metadata,
        ),
        reentry(
            "test_reentering_prefill_request_is_not_retired.retraction_backup",
            "marker=retraction_backup",
            || {
                prefill_reentry(AfterReentry::FreedByItsQueue {
                    resource: RK::RetractionBackup,
                })
            },
            reenter_backup,
        ),
        reentry(
            "test_retracted_decode_request_is_not_retired.is_retracted.backup",
            "flag=is_retracted, has_backup=True",
            || decode_reentry(AfterReentry::ResumedRetracted { status: 503 }),
            retracted_backup,
        ),
        reentry(
            "test_retracted_decode_request_is_not_retired.is_retracted.no_backup",
            "flag=is_retracted, has_backup=False",
            || decode_reentry(AfterReentry::ResumedRetracted { status: 503 }),
            retracted_no_backup,
        ),
        reentry(
            "test_retracted_decode_request_is_not_retired.is_rebootstrap.backup",
            "flag=is_rebootstrap, has_backup=True",
            || {
                decode_reentry(AfterReentry::Bootstrapped {
                    worker: Worker::Decode,
                })
            },
            rebootstrap_backup,
        ),
        reentry(
            "test_retracted_decode_request_is_not_retired.is_rebootstrap.no_backup",
            "flag=is_rebootstrap, has_backup=False",
            || {
                decode_reentry(AfterReentry::Bootstrapped {
                    worker: Worker::Decode,
                })
            },
            rebootstrap_no_backup,
        ),
        reentry(
            "test_preempted_reentry_is_not_retired.prefill",
            "door=prefill",
            || {
                prefill_reentry(AfterReentry::Bootstrapped {
                    worker: Worker::Prefill,
                })
            },
            preempted_prefill,
        ),
        reentry(
            "test_preempted_reentry_is_not_retired.decode",
            "door=decode",
            || {
                decode_reentry(AfterReentry::Bootstrapped {
                    worker: Worker::Decode,
                })
            },
            preempted_decode,
        ),
        Scenario {
            name: "test_valid_request_still_admitted.prefill",
            gate: Gate::RejectAdmission,
            upstream: upstream("test_valid_request_still_admitted", Some("door=prefill")),
            guard: Guard {
                fixes: RETIRE,
                rule: Some(RETIRE_ALL),
            },
            record: Record::HoldsVacuously,
            expects: || Outcome::ServedOwnText {
                door: Some(DoorName::PrefillBootstrapQueue),
                status: 200,
            },
            run: valid_prefill,
        },
        Scenario {
            name: "test_valid_request_still_admitted.decode",
            gate: Gate::RejectAdmission,
            upstream: upstream("test_valid_request_still_admitted", Some("door=decode")),
            guard: Guard {
                fixes: RETIRE,
                rule: Some(RETIRE_ALL),
            },
            record: Record::HoldsVacuously,
            expects: || Outcome::ServedOwnText {
                door: Some(DoorName::DecodePreallocQueue),
                status: 200,
            },
            run: valid_decode,
        },
        Scenario {
            name: "test_null_mode_is_deliberately_untouched",
            gate: Gate::RejectAdmission,
            upstream: upstream("test_null_mode_is_deliberately_untouched", None),
            guard: Guard {
                fixes: RETIRE,
                rule: Some(Rule {
                    what: GuardRule::NullModeUntouched,
                    remove: |d| d.null_mode_untouched = false,
                }),
            },
            record: Record::HoldsVacuously,
            expects: || Outcome::EnqueuedWithPendingReject { status: 400 },
            run: null_mode,
        },
        Scenario {
            name: "test_retire_detaches_a_streaming_session",
            gate: Gate::RejectAdmission,
            upstream: upstream("test_retire_detaches_a_streaming_session", None),
            guard: Guard {
                fixes: RETIRE,
                rule: Some(Rule {
                    what: GuardRule::SessionDetach,
                    remove: |d| d.session_effect = |_| SessionEffect::None,
                }),
            },
            record: Record::Fails,
            expects: || Outcome::SessionSlotReleased {
                status: 400,
                next_status: 200,
            },
            run: streaming_session,
        },
        Scenario {
            name: "test_retire_leaves_a_non_streaming_session_alone",
            gate: Gate::RejectAdmission,
            upstream: upstream("test_retire_leaves_a_non_streaming_session_alone", None),
            guard: Guard {
                fixes: RETIRE,
                rule: Some(Rule {
                    what: GuardRule::DetachStreamingOnly,
                    remove: |d| {
                        d.session_effect = |s| match s {
                            Some(_) => SessionEffect::DetachActiveSlot,
                            None => SessionEffect::None,
                        }
                    },
                }),
            },
            record: Record::HoldsVacuously,
            expects: || Outcome::SessionLeftAlone { next_status: None },
            run: non_streaming_session,
        },
    ]
}

fn prefill_reentry(then: AfterReentry) -> Outcome {
    Outcome::AdmittedWithPendingAbort {
        door: DoorName::PrefillBootstrapQueue,
        then,
    }
}

fn decode_reentry(then: AfterReentry) -> Outcome {
    Outcome::AdmittedWithPendingAbort {
        door: DoorName::DecodePreallocQueue,
        then,
    }
}

const RETIRE_ALL: Rule = Rule {
    what: GuardRule::RetireOnlyPendingRejections,
    remove: |d| d.unadmitted_reject = |_| true,
};

/// The test function part of a scenario name.
fn name_of(name: &'static str) -> &'static str {
    name.split('.').next().unwrap_or(name)
}

fn forwarded(ran: &super::script::Ran, r: u32) -> usize {
    ran.count(r, |k| matches!(k, EventKind::Forward { .. }))
}

/// The first decision of `door` for `r`, as a breach of the check.
fn door_breach(ran: &super::script::Ran, r: u32, door: DoorName) -> Breach {
    let d = ran.door(r, door);
    Breach::DoorDecided {
        door,
        decided: d.as_ref().map(|x| x.0),
        to_finish: d.and_then(|x| x.1),
    }
}

fn rejected_at_prefill(setup: &Setup) -> Observed {
    let mut s = Script::with_prefill_pool(setup, 112);
    let r = s.request("umbrella", 0, 128, Extras::default());
    judge(s.run(), |ran| {
        let door = DoorName::PrefillBootstrapQueue;
        ensure!(
            matches!(ran.door(r, door), Some((DoorDecision::Retired, _))),
            door_breach(ran, r, door)
        );
        ensure!(
            !ran.bootstrapped(r, Worker::Prefill),
            Breach::Endpoint {
                worker: Worker::Prefill,
                created: true
            }
        );
        let forwards = forwarded(ran, r);
        ensure!(
            forwards == 0,
            Breach::Forwards {
                count: forwards as u32
            }
        );
        Ok(Outcome::RetiredAtDoor { door })
    })
}

fn rejected_at_decode(setup: &Setup) -> Observed {
    let mut s = Script::with_prefill_pool(setup, 112).decode_pool(112);
    let r = s.request("umbrella", 0, 128, Extras::default());
    judge(s.run(), |ran| {
        let door = DoorName::DecodePreallocQueue;
        ensure!(
            matches!(ran.door(r, door), Some((DoorDecision::Retired, _))),
            door_breach(ran, r, door)
        );
        ensure!(
            !ran.bootstrapped(r, Worker::Decode),
            Breach::Endpoint {
                worker: Worker::Decode,
                created: true
            }
        );
        let reservations = ran.count(r, |k| matches!(k, EventKind::Reserve { .. }));
        ensure!(
            reservations == 0,
            Breach::Reserved {
                reservations: reservations as u32
            }
        );
        Ok(Outcome::RetiredAtDoor { door })
    })
}

/// A re-entering request with `reentry`: the door of `door` must admit it
/// with its abort still pending; `then` checks what follows.
fn reenter(
    setup: &Setup,
    reentry: Reentry,
    door: DoorName,
    then: fn(&super::script::Ran, u32) -> Result<AfterReentry, Breach>,
) -> Observed {
    let mut s = Script::new(setup);
    let r = s.request(
        "acme",
        0,
        16,
        Extras {
            reentry: Some(reentry),
            ..Extras::default()
        },
    );
    judge(s.run(), |ran| {
        ensure!(
            matches!(
                &ran.door(r, door),
                Some((
                    DoorDecision::Admitted,
                    Some(kvw_evidence::FinishReason::Abort { .. })
                ))
            ),
            door_breach(ran, r, door)
        );
        let then = then(ran, r)?;
        Ok(Outcome::AdmittedWithPendingAbort { door, then })
    })
}

fn released_once(ran: &super::script::Ran, r: u32, kind: RK) -> Result<AfterReentry, Breach> {
    let n = ran.resource(r, kind, RA::Free);
    ensure!(
        n == 1,
        Breach::ResourceFreed {
            rid: ran.rid(r),
            resource: kind,
            frees: n as u32,
            double_frees: ran.resource(r, kind, RA::DoubleFree) as u32,
        }
    );
    ensure!(
        ran.status(r).is_some(),
        Breach::ClientGot {
            rid: ran.rid(r),
            status: None,
            expected: None
        }
    );
    Ok(AfterReentry::FreedByItsQueue { resource: kind })
}

fn reenter_metadata(setup: &Setup) -> Observed {
    let reentry = Reentry {
        metadata_buffer_index: true,
        ..aborted(true, false)
    };
    reenter(setup, reentry, DoorName::PrefillBootstrapQueue, |ran, r| {
        released_once(ran, r, RK::MetadataBuffer)
    })
}

fn reenter_backup(setup: &Setup) -> Observed {
    let reentry = Reentry {
        retraction_backup: true,
        ..aborted(true, false)
    };
    reenter(setup, reentry, DoorName::PrefillBootstrapQueue, |ran, r| {
        released_once(ran, r, RK::RetractionBackup)
    })
}

fn retracted_queue(ran: &super::script::Ran, r: u32) -> Result<AfterReentry, Breach> {
    ensure!(
        !ran.bootstrapped(r, Worker::Decode),
        Breach::Endpoint {
            worker: Worker::Decode,
            created: true
        }
    );
    let answers = ran.answers(r, Worker::Decode);
    ensure!(
        answers.iter().map(|a| a.status).collect::<Vec<_>>() == [503],
        Breach::WorkerAnswered {
            worker: Worker::Decode,
            answers,
            expected: 503
        }
    );
    Ok(AfterReentry::ResumedRetracted { status: 503 })
}

fn new_receiver(ran: &super::script::Ran, r: u32) -> Result<AfterReentry, Breach> {
    ensure!(
        ran.bootstrapped(r, Worker::Decode),
        Breach::Endpoint {
            worker: Worker::Decode,
            created: false
        }
    );
    Ok(AfterReentry::Bootstrapped {
        worker: Worker::Decode,
    })
}

fn retracted_backup(setup: &Setup) -> Observed {
    let reentry = Reentry {
        requeued_by_retract: true,
        retraction_backup: true,
        ..aborted(false, true)
    };
    reenter(
        setup,
        reentry,
        DoorName::DecodePreallocQueue,
        retracted_queue,
    )
}

fn retracted_no_backup(setup: &Setup) -> Observed {
    let reentry = Reentry {
        requeued_by_retract: true,
        ..aborted(false, true)
    };
    reenter(
        setup,
        reentry,
        DoorName::DecodePreallocQueue,
        retracted_queue,
    )
}

fn rebootstrap_backup(setup: &Setup) -> Observed {
    let reentry = Reentry {
        is_rebootstrap: true,
        retraction_backup: true,
        ..aborted(false, true)
    };
    reenter(setup, reentry, DoorName::DecodePreallocQueue, new_receiver)
}

fn rebootstrap_no_backup(setup: &Setup) -> Observed {
    let reentry = Reentry {
        is_rebootstrap: true,
        ..aborted(false, true)
    };
    reenter(setup, reentry, DoorName::DecodePreallocQueue, new_receiver)
}

fn preempted_prefill(setup: &Setup) -> Observed {
    let reentry = Reentry {
        is_retracted: true,
        ..aborted(true, false)
    };
    reenter(setup, reentry, DoorName::PrefillBootstrapQueue, |ran, r| {
        ensure!(
            ran.bootstrapped(r, Worker::Prefill),
            Breach::Endpoint {
                worker: Worker::Prefill,
                created: false
            }
        );
        Ok(AfterReentry::Bootstrapped {
            worker: Worker::Prefill,
        })
    })
}

fn preempted_decode(setup: &Setup) -> Observed {
    let reentry = Reentry {
        is_retracted: true,
        ..aborted(false, true)
    };
    reenter(setup, reentry, DoorName::DecodePreallocQueue, new_receiver)
}

fn valid(setup: &Setup, door: DoorName, worker: Worker) -> Observed {
    let mut s = Script::new(setup);
    let r = s.request("acme", 0, 16, Extras::default());
    judge(s.run(), |ran| {
        ensure!(
            matches!(ran.door(r, door), Some((DoorDecision::Admitted, None))),
            door_breach(ran, r, door)
        );
        ensure!(
            ran.bootstrapped(r, worker),
            Breach::Endpoint {
                worker,
                created: false
            }
        );
        let status = ran.own_text(r, 8)?;
        Ok(Outcome::ServedOwnText {
            door: Some(door),
            status,
        })
    })
}

fn valid_prefill(setup: &Setup) -> Observed {
    valid(setup, DoorName::PrefillBootstrapQueue, Worker::Prefill)
}

fn valid_decode(setup: &Setup) -> Observed {
    valid(setup, DoorName::DecodePreallocQueue, Worker::Decode)
}

fn null_mode(setup: &Setup) -> Observed {
    let run = crate::sim::null_mode::serve(&setup.fixes, &setup.doors, 128);
    let ok = (|| {
        let door = run.events.iter().find_map(|e| match &e.kind {
            EventKind::Door {
                door,
                decision,
                state,
                ..
            } => Some((*door, *decision, state.to_finish.clone())),
            _ => None,
        });
        let rid = run
            .requests
            .first()
            .map(|r| r.rid.clone())
            .unwrap_or_default();
        ensure!(
            matches!(
                &door,
                Some((
                    _,
                    DoorDecision::Admitted,
                    Some(kvw_evidence::FinishReason::Abort { .. })
                ))
            ),
            Breach::DoorDecided {
                door: door.as_ref().map_or(DoorName::PrefillWaitingQueue, |d| d.0),
                decided: door.as_ref().map(|d| d.1),
                to_finish: door.and_then(|d| d.2),
            }
        );
        let status = run.events.iter().find_map(|e| match &e.kind {
            EventKind::Response { status, .. } => Some(*status),
            _ => None,
        });
        ensure!(
            status == Some(400),
            Breach::ClientGot {
                rid,
                status,
                expected: Some(400)
            }
        );
        Ok(Outcome::EnqueuedWithPendingReject { status: 400 })
    })();
    Observed {
        events: run.events,
        requests: run.requests,
        pictures: Vec::new(),
        verdict: ok,
    }
}

fn session_script(setup: &Setup, streaming: bool) -> (Script, u32, u32) {
    let mut s = Script::with_prefill_pool(setup, 112).decode_pool(112);
    let session = Some(("chat-7".to_string(), streaming));
    let a = s.request(
        "umbrella",
        0,
        128,
        Extras {
            session: session.clone(),
            ..Extras::default()
        },
    );
    let b = s.request(
        "umbrella",
        1_000_000,
        16,
        Extras {
            session,
            ..Extras::default()
        },
    );
    (s, a, b)
}

fn streaming_session(setup: &Setup) -> Observed {
    let (s, a, b) = session_script(setup, true);
    judge(s.run(), |ran| {
        let prefill = ran.answers(a, Worker::Prefill);
        ensure!(
            prefill.len() == 1
                && prefill[0].status == 400
                && prefill[0].finish_reason.starts_with("Input length"),
            Breach::WorkerAnswered {
                worker: Worker::Prefill,
                answers: prefill,
                expected: 400
            }
        );
        ensure!(
            ran.status(a) == Some(400),
            Breach::ClientGot {
                rid: ran.rid(a),
                status: ran.status(a),
                expected: Some(400)
            }
        );
        ensure!(
            ran.status(b) == Some(200),
            Breach::ClientGot {
                rid: ran.rid(b),
                status: ran.status(b),
                expected: Some(200)
            }
        );
        Ok(Outcome::SessionSlotReleased {
            status: 400,
            next_status: 200,
        })
    })
}

fn non_streaming_session(setup: &Setup) -> Observed {
    let (s, a, b) = session_script(setup, false);
    judge(s.run(), |ran| {
        let detached = ran.resource(a, RK::SessionSlot, RA::Detach);
        ensure!(
            detached == 0,
            Breach::SessionDetached {
                times: detached as u32
            }
        );
        let next = ran.status(b);
        ensure!(
            next.is_some(),
            Breach::ClientGot {
                rid: ran.rid(b),
                status: None,
                expected: None
            }
        );
        Ok(Outcome::SessionLeftAlone { next_status: next })
    })
}
