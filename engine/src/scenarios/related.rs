//! Related upstream failures of the PD KV lifetime, each run before and
//! after the change that closes it.
//!
//! * SGLang #24527 / #35049: decode gives up on a transfer, its pages are
//!   reused, and a late write lands in the next tenant's page; deferred
//!   release (#35049) closes it.
//! * SGLang #33507: a request aborted mid-transfer answered 200 "length".
//! * SGLang #22716: a metadata buffer index freed twice is handed to two
//!   requests (here: through a result processed twice).
//! * SGLang #38961: three gaps of drain acks under deferred release — the
//!   ack target dropped before the drain (closed by #40645), one ack per
//!   room under fan-out (closed by #41402), no ack for a cleared room with a
//!   chunk outstanding (model assumption: closed with the drain-ack work the
//!   record groups under `deferred-release`).

use super::words;
use kvw_evidence::{EventKind, Fix, ResourceAction as RA, ResourceKind as RK, Worker};

use super::script::{judge, Ran, Script};
use super::{Gate, Guard, Observed, Record, Rule, Scenario, Setup};
use crate::ensure;
use crate::sim::{Extras, Reentry, ABORT_MESSAGE};
use crate::transfer::Fault;

const DEFERRED: &[Fix] = &[Fix::DeferredRelease];

pub fn scenarios() -> Vec<Scenario> {
    let drain = |name, description, rule, closed_by, run| Scenario {
        name,
        gate: Gate::LifetimeOwnership,
        description,
        upstream: None,
        guard: Guard {
            fixes: DEFERRED,
            rule: Some(rule),
        },
        closed_by,
        record: Record::Fails,
        expects: "no write lands outside its owner's pages; pages freed once, after the drain",
        run,
    };
    vec![
        Scenario {
            name: "late_write_corrupts_next_tenant",
            gate: Gate::LifetimeOwnership,
            description: "decode times out on acme, frees its pages, umbrella reuses them and acme's late write lands in umbrella's decode (#24527)",
            upstream: None,
            guard: Guard {
                fixes: DEFERRED,
                rule: None,
            },
            closed_by: "PR #35049 (deferred release), issue #24527",
            record: Record::Fails,
            expects: "no stale write; umbrella reads only its own pages and answers its own text",
            run: late_write,
        },
        Scenario {
            name: "mid_transfer_abort_answered_200_length",
            gate: Gate::TransferRead,
            description: "a client abort after the last chunk was sent; prefill's inflight queue finishes the request with FINISH_LENGTH and answers 200 (#33507)",
            upstream: None,
            guard: Guard {
                fixes: &[Fix::RetireAbortedPrefillResult, Fix::DeferredRelease],
                rule: None,
            },
            closed_by: "issue #33507; model assumption: the record does not name the closing change; in the engine either switch closes it (the pending abort applied under retire-aborted-prefill-result, PR #36988; the room closed to the sender by decode's abort under deferred-release)",
            record: Record::Fails,
            expects: "no worker answers 200 for the aborted request",
            run: mid_transfer_abort,
        },
        Scenario {
            name: "metadata_buffer_index_collision",
            gate: Gate::LifetimeOwnership,
            description: "an aborted request's result is processed twice, its metadata buffer index freed twice, and two later requests share it (#22716)",
            upstream: None,
            guard: Guard {
                fixes: &[Fix::RetireAbortedPrefillResult],
                rule: Some(Rule {
                    what: "ignoring late results of retired requests",
                    remove: |d| d.ignore_retired_result = false,
                }),
            },
            closed_by: "issue #22716; PR #36988 (freed once, late results ignored)",
            record: Record::Fails,
            expects: "every metadata index held by one request at a time, freed once",
            run: metadata_collision,
        },
        drain(
            "drain_ack_target_dropped_before_drain",
            "decode aborts with a write in flight and drops its drain-ack target, counting the room drained; the write lands in a freed page (#38961)",
            Rule {
                what: "keeping the ack target until writes finish",
                remove: |d| d.ack_waits_for_writes = false,
            },
            "issue #38961; PR #40645",
            ack_target_dropped,
        ),
        drain(
            "drain_ack_one_per_room_under_fan_out",
            "a room spread over two decode peers is counted drained on one peer's ack while the other still receives (#38961)",
            Rule {
                what: "one ack per decode peer",
                remove: |d| d.ack_every_peer = false,
            },
            "issue #38961; PR #41402",
            fan_out,
        ),
        drain(
            "drain_ack_missing_for_cleared_room",
            "decode clears a room with a chunk outstanding and never acks it, so its pages are never freed (#38961)",
            Rule {
                what: "acking a cleared room once its chunk lands",
                remove: |d| d.ack_cleared_room = false,
            },
            "issue #38961; model assumption: closed by the drain-ack work under deferred-release (#40645, #41402, #41404)",
            cleared_room,
        ),
    ]
}

fn late_write(setup: &Setup) -> Observed {
    let mut s = Script::new(setup);
    s.new_tokens = 24;
    let acme = s.request("acme", 0, 100, Extras::default());
    let umbrella = s.request("umbrella", 300_100_000, 100, Extras::default());
    // acme's seventh page write (its last page) lands 300.3 s late.
    s.fault(
        acme,
        Fault::LateWrite {
            nth: 6,
            us: 300_300_000,
        },
    );
    judge(s.run(), |ran| {
        ensure!(
            ran.stale_writes.is_empty(),
            "late write(s) landed outside their owner's pages: {}",
            words::stale(&ran.stale_writes)
        );
        let foreign = ran.foreign_reads(umbrella);
        ensure!(
            foreign == 0,
            "umbrella attended to {foreign} page(s) acme wrote"
        );
        let want = ran.want(umbrella, 24);
        let got = ran.responses[umbrella as usize].as_ref();
        ensure!(
            got.is_some_and(|g| g.status == 200 && g.text == want),
            "umbrella answered {} with text that is not its own",
            words::status(got.map(|g| g.status))
        );
        Ok("acme's pages held until its late write drained; umbrella correct".into())
    })
}

/// acme's 100-token prompt; its client aborts at 12 ms, after the last
/// chunk was posted and while write `nth` is held 50 ms on the wire.
fn aborted_in_flight(setup: &Setup, nth: usize, fan_out: bool) -> (Ran, u32) {
    let mut s = Script::new(setup);
    let acme = s.request("acme", 0, 100, Extras::default());
    if fan_out {
        s.fault(acme, Fault::FanOut { peers: 2 });
    }
    s.fault(acme, Fault::LateWrite { nth, us: 50_000 });
    s.abort(12_000, acme);
    (s.run(), acme)
}

fn mid_transfer_abort(setup: &Setup) -> Observed {
    let mut s = Script::new(setup);
    let acme = s.request("acme", 0, 100, Extras::default());
    s.fault(acme, Fault::Delay { us: 50_000 });
    s.abort(12_000, acme);
    judge(s.run(), |ran| {
        for worker in [Worker::Prefill, Worker::Decode] {
            let answers = ran.answers(acme, worker);
            ensure!(
                answers.iter().all(|a| a.0 != 200),
                "{} answered {} for a request its client aborted",
                words::worker(worker),
                words::answers(&answers)
            );
        }
        ensure!(ran.status(acme) != Some(200), "the client got 200");
        Ok("both workers answered the abort, not 200".into())
    })
}

fn metadata_collision(setup: &Setup) -> Observed {
    let mut s = Script::new(setup);
    let a = s.request(
        "acme",
        0,
        16,
        Extras {
            reentry: Some(Reentry {
                prefill: true,
                to_finish: Some((ABORT_MESSAGE.into(), 503)),
                metadata_buffer_index: true,
                ..Reentry::default()
            }),
            delayed_result: true,
            ..Extras::default()
        },
    );
    s.request("globex", 1_000_000, 16, Extras::default());
    s.request("initech", 1_000_500, 16, Extras::default());
    judge(s.run(), |ran| {
        for r in 0..ran.requests.len() as u32 {
            let n = ran.resource_on(r, Worker::Prefill, RK::MetadataBuffer, RA::DoubleFree)
                + ran.resource_on(r, Worker::Decode, RK::MetadataBuffer, RA::DoubleFree);
            ensure!(
                n == 0,
                "{}: metadata buffer index freed twice or handed out while held ({n})",
                ran.requests[r as usize].rid
            );
        }
        ensure!(
            ran.double_frees == 0,
            "{} KV page double free(s)",
            ran.double_frees
        );
        let _ = a;
        Ok("each metadata index freed once; no two holders".into())
    })
}

/// The drain checks: no stale write, and acme's decode pages freed once.
fn drained(ran: &Ran, acme: u32) -> Result<String, String> {
    ensure!(
        ran.stale_writes.is_empty(),
        "write(s) landed in pages acme no longer held: {}",
        words::stale(&ran.stale_writes)
    );
    let frees = ran.frees(acme, Worker::Decode);
    ensure!(frees == 1, "acme's decode pages were freed {frees} time(s)");
    let acks = ran.count(acme, |k| matches!(k, EventKind::DrainAck { .. }));
    Ok(format!(
        "pages freed once after the drain ({acks} drain ack(s))"
    ))
}

fn ack_target_dropped(setup: &Setup) -> Observed {
    let (ran, acme) = aborted_in_flight(setup, 6, false);
    judge(ran, |ran| drained(ran, acme))
}

fn fan_out(setup: &Setup) -> Observed {
    let (ran, acme) = aborted_in_flight(setup, 5, true);
    judge(ran, |ran| drained(ran, acme))
}

fn cleared_room(setup: &Setup) -> Observed {
    let (ran, acme) = aborted_in_flight(setup, 6, false);
    judge(ran, |ran| drained(ran, acme))
}
