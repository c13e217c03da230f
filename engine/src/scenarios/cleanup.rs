//! Conformance with upstream's `test_prefill_abort_result_cleanup.py`
//! (PR #36988), one scenario per collected pytest case (11).
//!
//! The file is not stored at the pinned commit in the reference index this
//! project was checked against; the scenarios follow the stored version at
//! SGLang commit `084b80efce4b67eca2e2edfbaaed35eb944fbe2c` (7 tests, the
//! sampling-mask test parametrized 2 × 2), and link to the path at the
//! pinned commit like every other upstream reference.
//!
//! Upstream drives `process_batch_result_disagg_prefill` with a mocked
//! request; here the request runs through the engine and the assertion reads
//! the result door, `sender.abort()`, each resource's free events and the
//! answers: every resource of an aborted result freed exactly once, nothing
//! sent, one answer with the abort's own status.

use super::words;
use kvw_evidence::{
    DoorDecision, DoorName, EventKind, Fix, ResourceAction as RA, ResourceKind as RK, Worker,
};

use super::script::{judge, Ran, Script};
use super::{Gate, Guard, Observed, Record, Rule, Scenario, Setup, Upstream};
use crate::ensure;
use crate::policy::err_type;
use crate::sim::{Extras, Reentry, SamplingMask, ABORT_MESSAGE};
use crate::transfer::Fault;

const PATH: &str = "test/registered/unit/disaggregation/test_prefill_abort_result_cleanup.py";
const RETIRE: &[Fix] = &[Fix::RetireAbortedPrefillResult];

fn scenario(
    name: &'static str,
    test: &'static str,
    subtest: Option<&'static str>,
    description: &'static str,
    rule: Option<Rule>,
    expects: &'static str,
    run: fn(&Setup) -> Observed,
) -> Scenario {
    Scenario {
        name,
        gate: Gate::LifetimeOwnership,
        description,
        upstream: Some(Upstream {
            path: PATH,
            test,
            subtest,
        }),
        guard: Guard {
            fixes: RETIRE,
            rule,
        },
        closed_by: "PR #36988",
        record: Record::Fails,
        expects,
        run,
    }
}

pub fn scenarios() -> Vec<Scenario> {
    let mut out = vec![
        scenario(
            "test_aborted_final_result_releases_hybrid_cache",
            "test_aborted_final_result_releases_hybrid_cache",
            None,
            "an aborted final prefill result frees KV, Mamba slot, metadata buffer and HiCache entry once, calls sender.abort() once, sends nothing",
            None,
            "retired, everything freed once, nothing sent",
            final_result,
        ),
        scenario(
            "test_aborted_middle_result_releases_after_last_chunk",
            "test_aborted_middle_result_releases_after_last_chunk",
            None,
            "a request aborted between chunks is retired at its next (middle) chunk result and released once, after its earlier chunks landed",
            None,
            "retired mid-prompt, released once after the last landing",
            middle_result,
        ),
        scenario(
            "test_aborted_middle_result_waits_for_inflight_chunk",
            "test_aborted_middle_result_waits_for_inflight_chunk",
            None,
            "with an earlier chunk's writes still in flight, the retired request's pages are released only after they land",
            Some(Rule {
                what: "waiting for in-flight chunk writes before release",
                remove: |d| d.retire_waits_for_inflight = false,
            }),
            "release after the in-flight chunk landed",
            inflight_chunk,
        ),
        scenario(
            "test_delayed_result_ignores_already_retired_request",
            "test_delayed_result_ignores_already_retired_request",
            None,
            "a result delivered again after the request was retired frees and answers nothing more",
            Some(IGNORE_LATE),
            "one retirement, one release, one answer",
            delayed_result,
        ),
        scenario(
            "test_sender_abort_failure_does_not_skip_local_cleanup",
            "test_sender_abort_failure_does_not_skip_local_cleanup",
            None,
            "sender.abort() raising (transport down) does not skip freeing KV and the metadata buffer or the answer",
            None,
            "abort failure recorded; cleanup and answer once",
            sender_abort_fails,
        ),
        scenario(
            "test_grammar_rejection_retires_prefill_before_transfer",
            "test_grammar_rejection_retires_prefill_before_transfer",
            None,
            "a grammar that rejects the first token retires the request before any transfer",
            None,
            "retired with the grammar's 400, nothing sent",
            grammar,
        ),
        scenario(
            "test_aborted_result_releases_mamba_allocated_before_kv",
            "test_aborted_result_releases_mamba_allocated_before_kv",
            None,
            "a hybrid request aborted while it holds its Mamba slot but no KV yet frees the slot once and never forwards",
            None,
            "Mamba slot freed once, no forward",
            mamba_before_kv,
        ),
    ];
    for (name, subtest, mask, transport) in [
        (
            "test_sampling_mask_abort_preserves_error_and_releases_once.overflow",
            "status=OVERFLOW, http_status=400, err_type=BadRequestError, transport_error=False",
            SamplingMask::Overflow,
            false,
        ),
        (
            "test_sampling_mask_abort_preserves_error_and_releases_once.overflow.transport_error",
            "status=OVERFLOW, http_status=400, err_type=BadRequestError, transport_error=True",
            SamplingMask::Overflow,
            true,
        ),
        (
            "test_sampling_mask_abort_preserves_error_and_releases_once.invalid",
            "status=INVALID, http_status=500, err_type=InternalServerError, transport_error=False",
            SamplingMask::Invalid,
            false,
        ),
        (
            "test_sampling_mask_abort_preserves_error_and_releases_once.invalid.transport_error",
            "status=INVALID, http_status=500, err_type=InternalServerError, transport_error=True",
            SamplingMask::Invalid,
            true,
        ),
    ] {
        let run: fn(&Setup) -> Observed = match (mask, transport) {
            (SamplingMask::Overflow, false) => |s| sampling_mask(s, SamplingMask::Overflow, false),
            (SamplingMask::Overflow, true) => |s| sampling_mask(s, SamplingMask::Overflow, true),
            (SamplingMask::Invalid, false) => |s| sampling_mask(s, SamplingMask::Invalid, false),
            (SamplingMask::Invalid, true) => |s| sampling_mask(s, SamplingMask::Invalid, true),
        };
        out.push(scenario(
            name,
            "test_sampling_mask_abort_preserves_error_and_releases_once",
            Some(subtest),
            "a sampling-mask abort keeps its status and error type and frees everything once, the result processed twice, with or without a transport error",
            Some(IGNORE_LATE),
            "the mask's status and error type, everything freed once",
            run,
        ));
    }
    out
}

const IGNORE_LATE: Rule = Rule {
    what: "ignoring late results of retired requests",
    remove: |d| d.ignore_retired_result = false,
};

/// The request shape upstream's `_Req(allocated=True)` has: a pending abort,
/// a metadata buffer index, a Mamba slot and a HiCache entry.
fn aborted_hybrid() -> Extras {
    Extras {
        reentry: Some(Reentry {
            prefill: true,
            to_finish: Some((ABORT_MESSAGE.into(), 503)),
            metadata_buffer_index: true,
            ..Reentry::default()
        }),
        hybrid: true,
        hicache: true,
        ..Extras::default()
    }
}

/// The checks every retired result shares: retired at the result door,
/// one `sender.abort()`, `kinds` freed once each, KV released once, no
/// double free, one prefill answer with `status`, nothing sent after `sent`
/// chunk sends.
fn retired_once(ran: &Ran, r: u32, status: u16, kinds: &[RK], sent: usize) -> Result<(), String> {
    let d = ran.door(r, DoorName::PrefillResult);
    ensure!(
        matches!(d, Some((DoorDecision::Retired, _))),
        "the result door decided {}",
        words::decided(d.map(|x| x.0))
    );
    let sends = ran.sends(r);
    ensure!(
        sends == sent,
        "send_kv_chunk called {sends} time(s), expected {sent}"
    );
    let aborts = ran.count(r, |k| matches!(k, EventKind::SenderAbort { .. }));
    ensure!(aborts == 1, "sender.abort() called {aborts} time(s)");
    let frees = ran.frees(r, Worker::Prefill);
    ensure!(frees == 1, "prefill KV released {frees} time(s)");
    for &kind in kinds {
        let n = ran.resource(r, kind, RA::Free);
        let twice = ran.resource(r, kind, RA::DoubleFree);
        ensure!(
            n == 1 && twice == 0,
            "{} freed {n} time(s), {twice} double free(s)",
            words::resource(kind)
        );
    }
    ensure!(
        ran.double_frees == 0,
        "{} page double free(s)",
        ran.double_frees
    );
    let answers = ran.answers(r, Worker::Prefill);
    ensure!(
        answers.len() == 1 && answers[0].0 == status,
        "prefill answered {}, expected {status} once",
        words::answers(&answers)
    );
    ensure!(
        ran.count(r, |k| matches!(k, EventKind::Attend { .. })) == 0,
        "decode produced output for the aborted request"
    );
    Ok(())
}

const ALL_HELD: &[RK] = &[RK::MetadataBuffer, RK::MambaSlot, RK::HicacheEntry];

fn final_result(setup: &Setup) -> Observed {
    let mut s = Script::new(setup);
    let r = s.request("acme", 0, 16, aborted_hybrid());
    judge(s.run(), |ran| {
        retired_once(ran, r, 503, ALL_HELD, 0)?;
        Ok("retired; KV, Mamba, metadata and HiCache freed once; nothing sent".into())
    })
}

/// A 100-token prompt (four 32-token chunks) aborted by its client between
/// the second and the third chunk; `delay` holds its chunk writes in flight.
fn aborted_mid_prompt(setup: &Setup, delay: Option<u64>) -> (Ran, u32) {
    let mut s = Script::new(setup);
    let r = s.request("acme", 0, 100, Extras::default());
    s.abort(4_000, r);
    if let Some(us) = delay {
        s.fault(r, Fault::Delay { us });
    }
    (s.run(), r)
}

/// The prefill release of `r` comes after its last landed write.
fn released_after_landing(ran: &Ran, r: u32) -> Result<(), String> {
    let last_landing = ran
        .of(r)
        .filter(|(_, k)| matches!(k, EventKind::KvLanded { .. }))
        .map(|(i, _)| i)
        .max();
    let release = ran
        .of(r)
        .find(|(_, k)| {
            matches!(
                k,
                EventKind::Release {
                    worker: Worker::Prefill,
                    deferred: false,
                    ..
                }
            )
        })
        .map(|(i, _)| i);
    ensure!(
        match (release, last_landing) {
            (Some(rel), Some(land)) => rel > land,
            (Some(_), None) => true,
            _ => false,
        },
        "prefill released at {}, not after its last chunk write landed ({})",
        words::event(release),
        words::event(last_landing)
    );
    ensure!(
        ran.stale_writes.is_empty(),
        "writes copied freed pages: {}",
        words::stale(&ran.stale_writes)
    );
    Ok(())
}

fn middle_result(setup: &Setup) -> Observed {
    let (ran, r) = aborted_mid_prompt(setup, None);
    judge(ran, |ran| {
        retired_once(ran, r, 503, &[RK::MetadataBuffer], 2)?;
        released_after_landing(ran, r)?;
        Ok("retired at a middle chunk; released once after the earlier chunks landed".into())
    })
}

fn inflight_chunk(setup: &Setup) -> Observed {
    let (ran, r) = aborted_mid_prompt(setup, Some(20_000));
    judge(ran, |ran| {
        retired_once(ran, r, 503, &[RK::MetadataBuffer], 2)?;
        released_after_landing(ran, r)?;
        Ok("release waited for the in-flight chunk, then happened once".into())
    })
}

fn delayed_result(setup: &Setup) -> Observed {
    let mut s = Script::new(setup);
    let r = s.request(
        "acme",
        0,
        16,
        Extras {
            delayed_result: true,
            ..aborted_hybrid()
        },
    );
    judge(s.run(), |ran| {
        retired_once(ran, r, 503, ALL_HELD, 0)?;
        Ok("the late result was ignored: one retirement, release and answer".into())
    })
}

fn sender_abort_fails(setup: &Setup) -> Observed {
    let mut s = Script::new(setup);
    let r = s.request(
        "acme",
        0,
        16,
        Extras {
            sender_abort_fails: true,
            ..aborted_hybrid()
        },
    );
    judge(s.run(), |ran| {
        ensure!(
            ran.resource(r, RK::KvSender, RA::AbortFailed) == 1,
            "sender.abort() did not fail as scripted"
        );
        retired_once(ran, r, 503, ALL_HELD, 0)?;
        Ok("sender.abort() raised; KV and metadata still freed once; answered".into())
    })
}

fn grammar(setup: &Setup) -> Observed {
    let mut s = Script::new(setup);
    let r = s.request("acme", 0, 16, Extras::default());
    // The grammar accepts two tokens, neither of them the one the model
    // answers first (the prompt's token at position 1).
    let first = s.prompt(r)[1];
    s.extras_mut(r).grammar_allows = Some(vec![first + 1, first + 2]);
    judge(s.run(), |ran| {
        retired_once(ran, r, 400, &[RK::MetadataBuffer], 0)?;
        Ok("grammar rejected the first token; retired before transfer with 400".into())
    })
}

fn mamba_before_kv(setup: &Setup) -> Observed {
    let mut s = Script::with_prefill_pool(setup, 112);
    // `hog` fills the prefill pool and keeps it: its writes land only after 100 s.
    let hog = s.request("globex", 0, 100, Extras::default());
    s.fault(hog, Fault::Delay { us: 100_000_000 });
    let r = s.request(
        "acme",
        20_000,
        16,
        Extras {
            hybrid: true,
            ..Extras::default()
        },
    );
    s.abort(60_000, r);
    judge(s.run(), |ran| {
        ensure!(
            ran.resource(r, RK::MambaSlot, RA::Allocate) == 1,
            "no Mamba slot was allocated"
        );
        let forwards = ran.count(r, |k| matches!(k, EventKind::Forward { .. }));
        ensure!(
            forwards == 0,
            "the aborted request ran {forwards} forward(s)"
        );
        let n = ran.resource(r, RK::MambaSlot, RA::Free);
        ensure!(n == 1, "the Mamba slot was freed {n} time(s)");
        let answers = ran.answers(r, Worker::Prefill);
        ensure!(
            answers.len() == 1 && answers[0].0 == 503,
            "prefill answered {}, not 503 once",
            words::answers(&answers)
        );
        Ok("Mamba slot allocated before KV, freed once; no forward".into())
    })
}

fn sampling_mask(setup: &Setup, mask: SamplingMask, transport_error: bool) -> Observed {
    let mut s = Script::new(setup);
    let extras = Extras {
        hybrid: true,
        hicache: true,
        sampling_mask: Some(mask),
        sender_abort_fails: transport_error,
        delayed_result: true,
        ..Extras::default()
    };
    let r = s.request("acme", 0, 16, extras);
    let status = mask.status();
    judge(s.run(), |ran| {
        retired_once(ran, r, status, ALL_HELD, 0)?;
        ensure!(
            err_type(status) == expected_err_type(mask),
            "error type {} instead of {}",
            err_type(status),
            expected_err_type(mask)
        );
        Ok(format!(
            "{status} {} kept; everything freed once; the second result ignored",
            err_type(status)
        ))
    })
}

fn expected_err_type(mask: SamplingMask) -> &'static str {
    match mask {
        SamplingMask::Overflow => "BadRequestError",
        SamplingMask::Invalid => "InternalServerError",
    }
}
