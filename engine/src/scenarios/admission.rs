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

use super::words;
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
    what: "is_unadmitted_reject's exclusions for re-entering requests",
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
    let reentry = |name, subtest, description, run| Scenario {
        name,
        gate: Gate::RejectAdmission,
        description,
        upstream: upstream(name_of(name), Some(subtest)),
        guard: Guard {
            fixes: RETIRE,
            rule: NAIVE,
        },
        closed_by: "PR #38935 (is_unadmitted_reject)",
        record: Record::HoldsVacuously,
        expects: "admitted, still carrying its pending abort",
        run,
    };
    vec![
        Scenario {
            name: "test_rejected_request_is_retired_at_each_pd_door.prefill",
            gate: Gate::RejectAdmission,
            description: "a prompt over prefill's input cap is retired at prefill's bootstrap-queue door: no sender, bootstrap or forward",
            upstream: upstream("test_rejected_request_is_retired_at_each_pd_door", Some("door=prefill")),
            guard: Guard { fixes: RETIRE, rule: None },
            closed_by: "PR #38935",
            record: Record::Fails,
            expects: "retired at prefill's door, nothing created",
            run: rejected_at_prefill,
        },
        Scenario {
            name: "test_rejected_request_is_retired_at_each_pd_door.decode",
            gate: Gate::RejectAdmission,
            description: "a prompt over decode's own cap is retired at decode's prealloc-queue door: no receiver, reservation or bootstrap",
            upstream: upstream("test_rejected_request_is_retired_at_each_pd_door", Some("door=decode")),
            guard: Guard { fixes: RETIRE, rule: None },
            closed_by: "PR #38935",
            record: Record::Fails,
            expects: "retired at decode's door, nothing reserved",
            run: rejected_at_decode,
        },
        reentry(
            "test_reentering_prefill_request_is_not_retired.metadata_buffer_index",
            "marker=metadata_buffer_index",
            "a preempted prefill request holding its metadata buffer index re-enters with a pending abort and reaches its queue",
            reenter_metadata,
        ),
        reentry(
            "test_reentering_prefill_request_is_not_retired.retraction_backup",
            "marker=retraction_backup",
            "a preempted prefill request holding a retraction backup re-enters with a pending abort and reaches its queue",
            reenter_backup,
        ),
        reentry(
            "test_retracted_decode_request_is_not_retired.is_retracted.backup",
            "flag=is_retracted, has_backup=True",
            "a decode request requeued by retract_decode with a backup goes to the retracted queue, not retired",
            retracted_backup,
        ),
        reentry(
            "test_retracted_decode_request_is_not_retired.is_retracted.no_backup",
            "flag=is_retracted, has_backup=False",
            "a short retracted decode request (no backup) is kept by its flag alone",
            retracted_no_backup,
        ),
        reentry(
            "test_retracted_decode_request_is_not_retired.is_rebootstrap.backup",
            "flag=is_rebootstrap, has_backup=True",
            "a re-bootstrapping decode request with a backup gets a new receiver, not retired",
            rebootstrap_backup,
        ),
        reentry(
            "test_retracted_decode_request_is_not_retired.is_rebootstrap.no_backup",
            "flag=is_rebootstrap, has_backup=False",
            "a re-bootstrapping decode request without a backup gets a new receiver, not retired",
            rebootstrap_no_backup,
        ),
        reentry(
            "test_preempted_reentry_is_not_retired.prefill",
            "door=prefill",
            "a short preempted request (is_retracted, nothing held) re-enters prefill and is not retired",
            preempted_prefill,
        ),
        reentry(
            "test_preempted_reentry_is_not_retired.decode",
            "door=decode",
            "a short preempted request (is_retracted, nothing held) re-enters decode and gets a receiver",
            preempted_decode,
        ),
        Scenario {
            name: "test_valid_request_still_admitted.prefill",
            gate: Gate::RejectAdmission,
            description: "a valid request passes prefill's door and is served",
            upstream: upstream("test_valid_request_still_admitted", Some("door=prefill")),
            guard: Guard { fixes: RETIRE, rule: Some(RETIRE_ALL) },
            closed_by: "PR #38935",
            record: Record::HoldsVacuously,
            expects: "admitted and answered 200 with its own text",
            run: valid_prefill,
        },
        Scenario {
            name: "test_valid_request_still_admitted.decode",
            gate: Gate::RejectAdmission,
            description: "a valid request passes decode's door and gets a receiver",
            upstream: upstream("test_valid_request_still_admitted", Some("door=decode")),
            guard: Guard { fixes: RETIRE, rule: Some(RETIRE_ALL) },
            closed_by: "PR #38935",
            record: Record::HoldsVacuously,
            expects: "admitted with a receiver and answered 200",
            run: valid_decode,
        },
        Scenario {
            name: "test_null_mode_is_deliberately_untouched",
            gate: Gate::RejectAdmission,
            description: "without disaggregation a rejected request is still enqueued; the one-token stub runs once and the batch boundary answers 400",
            upstream: upstream("test_null_mode_is_deliberately_untouched", None),
            guard: Guard {
                fixes: RETIRE,
                rule: Some(Rule {
                    what: "NULL mode left alone by the PD doors",
                    remove: |d| d.null_mode_untouched = false,
                }),
            },
            closed_by: "PR #38935 (PD doors only)",
            record: Record::HoldsVacuously,
            expects: "enqueued with to_finish pending, answered 400",
            run: null_mode,
        },
        Scenario {
            name: "test_retire_detaches_a_streaming_session",
            gate: Gate::RejectAdmission,
            description: "retiring a rejected request detaches its streaming session's active slot, so the next request on the session is served; the original 400 survives",
            upstream: upstream("test_retire_detaches_a_streaming_session", None),
            guard: Guard {
                fixes: RETIRE,
                rule: Some(Rule {
                    what: "the retirement's session detach",
                    remove: |d| d.session_effect = |_| SessionEffect::None,
                }),
            },
            closed_by: "PR #38935 (retire_unadmitted_request)",
            record: Record::Fails,
            expects: "400 with the original message; slot detached; next request 200",
            run: streaming_session,
        },
        Scenario {
            name: "test_retire_leaves_a_non_streaming_session_alone",
            gate: Gate::RejectAdmission,
            description: "retiring a rejected request leaves a non-streaming session alone",
            upstream: upstream("test_retire_leaves_a_non_streaming_session_alone", None),
            guard: Guard {
                fixes: RETIRE,
                rule: Some(Rule {
                    what: "detaching streaming sessions only",
                    remove: |d| d.session_effect = |s| match s {
                        Some(_) => SessionEffect::DetachActiveSlot,
                        None => SessionEffect::None,
                    },
                }),
            },
            closed_by: "PR #38935 (retire_unadmitted_request)",
            record: Record::HoldsVacuously,
            expects: "retired with no session detach; the session serves the next request",
            run: non_streaming_session,
        },
    ]
}

const RETIRE_ALL: Rule = Rule {
    what: "retiring only requests with a pending rejection",
    remove: |d| d.unadmitted_reject = |_| true,
};

/// The test function part of a scenario name.
fn name_of(name: &'static str) -> &'static str {
    name.split('.').next().unwrap_or(name)
}

fn forwarded(ran: &super::script::Ran, r: u32) -> usize {
    ran.count(r, |k| matches!(k, EventKind::Forward { .. }))
}

fn rejected_at_prefill(setup: &Setup) -> Observed {
    let mut s = Script::with_prefill_pool(setup, 112);
    let r = s.request("umbrella", 0, 128, Extras::default());
    judge(s.run(), |ran| {
        let d = ran.door(r, DoorName::PrefillBootstrapQueue);
        ensure!(
            matches!(d, Some((DoorDecision::Retired, _))),
            "prefill's bootstrap-queue door decided {} for the rejected request",
            words::decided(d.map(|x| x.0))
        );
        ensure!(
            !ran.bootstrapped(r, Worker::Prefill),
            "a sender and bootstrap were created"
        );
        ensure!(forwarded(ran, r) == 0, "the one-token stub ran a forward");
        Ok("retired at prefill's door; no sender, bootstrap or forward".into())
    })
}

fn rejected_at_decode(setup: &Setup) -> Observed {
    let mut s = Script::with_prefill_pool(setup, 112).decode_pool(112);
    let r = s.request("umbrella", 0, 128, Extras::default());
    judge(s.run(), |ran| {
        let d = ran.door(r, DoorName::DecodePreallocQueue);
        ensure!(
            matches!(d, Some((DoorDecision::Retired, _))),
            "decode's prealloc-queue door decided {} for the rejected request",
            words::decided(d.map(|x| x.0))
        );
        ensure!(
            !ran.bootstrapped(r, Worker::Decode),
            "a receiver and metadata buffer were created"
        );
        ensure!(
            ran.count(r, |k| matches!(k, EventKind::Reserve { .. })) == 0,
            "decode reserved pages"
        );
        Ok("retired at decode's door; no receiver or reservation".into())
    })
}

/// A re-entering request with `reentry`: the door of `door` must admit it
/// with its abort still pending; `then` checks what follows.
fn reenter(
    setup: &Setup,
    reentry: Reentry,
    door: DoorName,
    then: fn(&super::script::Ran, u32) -> Result<String, String>,
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
        let d = ran.door(r, door);
        ensure!(
            matches!(&d, Some((DoorDecision::Admitted, Some(t))) if t.contains("FINISH_ABORT")),
            "{} decided {} (to_finish {}) for a re-entering request",
            words::door(door),
            words::decided(d.as_ref().map(|x| x.0)),
            d.as_ref()
                .and_then(|x| x.1.clone())
                .unwrap_or_else(|| "None".into())
        );
        let more = then(ran, r)?;
        Ok(format!("admitted with its abort pending; {more}"))
    })
}

fn released_once(ran: &super::script::Ran, r: u32, kind: RK) -> Result<String, String> {
    let n = ran.resource(r, kind, RA::Free);
    ensure!(
        n == 1,
        "{} freed {n} times by the queue that owns it",
        words::resource(kind)
    );
    ensure!(ran.status(r).is_some(), "never answered");
    Ok(format!("{} freed once by its queue", words::resource(kind)))
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

fn retracted_queue(ran: &super::script::Ran, r: u32) -> Result<String, String> {
    ensure!(
        !ran.bootstrapped(r, Worker::Decode),
        "a new receiver was created instead of the retracted queue"
    );
    let answers = ran.answers(r, Worker::Decode);
    ensure!(
        answers.iter().map(|a| a.0).collect::<Vec<_>>() == [503],
        "decode answered {}, not the pending 503 once",
        words::answers(&answers)
    );
    Ok("resumed in the retracted queue, answered its pending 503".into())
}

fn new_receiver(ran: &super::script::Ran, r: u32) -> Result<String, String> {
    ensure!(
        ran.bootstrapped(r, Worker::Decode),
        "no receiver was created"
    );
    Ok("a new receiver was created".into())
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
            "its queue never took it"
        );
        Ok("its queue took it".into())
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
        let d = ran.door(r, door);
        ensure!(
            matches!(d, Some((DoorDecision::Admitted, None))),
            "{} decided {} for a valid request",
            words::door(door),
            words::decided(d.map(|x| x.0))
        );
        ensure!(
            ran.bootstrapped(r, worker),
            "no {} endpoint was created",
            words::worker(worker)
        );
        let want = ran.want(r, 8);
        let got = ran.responses[r as usize].as_ref();
        ensure!(
            got.is_some_and(|g| g.status == 200 && g.text == want),
            "answered {}, not 200 with its own text",
            words::status(got.map(|g| g.status))
        );
        Ok("admitted and answered 200 with its own text".into())
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
                decision, state, ..
            } => Some((*decision, state.to_finish.clone())),
            _ => None,
        });
        ensure!(
            matches!(&door, Some((DoorDecision::Admitted, Some(t))) if t.contains("FINISH_ABORT")),
            "NULL mode's door decided {}",
            words::decided(door.map(|d| d.0))
        );
        let status = run.events.iter().find_map(|e| match &e.kind {
            EventKind::Response { status, .. } => Some(*status),
            _ => None,
        });
        ensure!(
            status == Some(400),
            "answered {}, not 400",
            words::status(status)
        );
        Ok(
            "enqueued with to_finish pending; one stub forward; the batch boundary answered 400"
                .into(),
        )
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
            prefill.len() == 1 && prefill[0].0 == 400 && prefill[0].1.starts_with("Input length"),
            "prefill answered {}, not the original 400",
            words::answers(&prefill)
        );
        ensure!(
            ran.status(a) == Some(400),
            "the client got {}, not 400",
            words::status(ran.status(a))
        );
        ensure!(
            ran.status(b) == Some(200),
            "the next request on the session got {}: the session is stuck",
            words::status(ran.status(b))
        );
        Ok("original 400 kept; session slot released; next request 200".into())
    })
}

fn non_streaming_session(setup: &Setup) -> Observed {
    let (s, a, b) = session_script(setup, false);
    judge(s.run(), |ran| {
        let detached = ran.resource(a, RK::SessionSlot, RA::Detach);
        ensure!(
            detached == 0,
            "the non-streaming session was detached {detached} time(s)"
        );
        ensure!(
            ran.status(b).is_some(),
            "the next request on the session got no answer"
        );
        Ok("session untouched; the next request was answered".into())
    })
}
