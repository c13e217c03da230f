//! Each row of the fix matrix against the public record.
//!
//! Every test runs the guarded configuration *and* the pre-fix one, and
//! asserts that the pre-fix run leaks: a test that passes only because the
//! scenario stopped leaking would fail here instead.

use kvw_engine::probe::{incident_config, run, with_prefill_pool, ValidConfig};
use kvw_evidence::{
    AbortCause, AssumptionId, ChecksumScope, Claim, Fix, Outcome, PageTail, PoisonMode,
    ProbeConfig, ProbePredicate, Provenance, Scale, WriterClass,
};

fn config(scale: Scale, fixes: &[Fix], poison: PoisonMode) -> ProbeConfig {
    incident_config(scale, fixes, poison, 2026)
        .unwrap()
        .into_inner()
}

/// `c` after validation, as the engine runs it (tests edit configs freely).
fn valid(c: &ProbeConfig) -> ValidConfig {
    ValidConfig::new(c.clone()).unwrap()
}

fn probe(scale: Scale, fixes: &[Fix], poison: PoisonMode) -> ProbePredicate {
    run(&valid(&config(scale, fixes, poison))).unwrap()
}

fn walk(fixes: &[Fix]) -> ProbePredicate {
    probe(Scale::Walkthrough, fixes, PoisonMode::Off)
}

fn assert_pre_fix_leaks(p: &ProbePredicate) {
    let v = &p.verdict;
    assert!(v.leak, "pre-fix run must leak: {:?}", v.outcome);
    assert_eq!(v.outcome, Outcome::Leak);
    assert_eq!(v.http_status, 200);
    assert!(!v.canaries_leaked.is_empty());
    assert!(v.canaries_leaked[0].starts_with("CANARY-acme-"));
    assert_eq!(v.tenants_leaked, vec!["acme".to_string()]);
    assert!(v.response_text.contains(&v.canaries_leaked[0]));
}

/// The claims of step `n` (1..=7).
fn claims(p: &ProbePredicate, n: usize) -> Vec<&Claim> {
    p.steps[n - 1].facts.iter().map(|f| &f.claim).collect()
}

#[test]
fn no_fixes_reproduces_the_seven_steps() {
    let p = walk(&[]);
    assert_pre_fix_leaks(&p);
    assert_eq!(p.steps.len(), 7);
    for (i, s) in p.steps.iter().enumerate() {
        assert_eq!(s.step as usize, i + 1);
        assert!(s.reached, "step {} reached", i + 1);
        assert!(!s.facts.is_empty());
        for &e in &s.events {
            assert_eq!(p.events[e as usize].rid, "umbrella-1");
        }
    }
    // The incident's facts are the disclosed ones.
    for n in [3, 4, 5, 6, 7] {
        assert!(
            p.steps[n - 1]
                .facts
                .iter()
                .all(|f| f.provenance == Provenance::Disclosed),
            "step {n}"
        );
    }
    // Step 2: the rejection is in to_finish, finished() is false, admitted.
    let s2 = p.steps[1].state.as_ref().unwrap();
    assert!(matches!(
        s2.to_finish,
        Some(kvw_evidence::FinishReason::Abort {
            status_code: 400,
            ..
        })
    ));
    assert!(!s2.finished);
    assert_eq!(s2.decision, kvw_evidence::DoorDecision::Admitted);
    assert_eq!((s2.original_prompt_len, s2.origin_input_len), (128, 1));
    // Step 6: 8 reserved pages read; only the first written by this request.
    let view = p.steps[5].pages.as_ref().unwrap();
    let reserved: u64 = view.reserved.iter().map(|r| r.count).sum();
    let read: u64 = view.read.iter().map(|r| r.count).sum();
    let transferred: u64 = view.transferred.iter().map(|r| r.count).sum();
    assert_eq!((reserved, transferred, read), (8, 1, 8));
    assert_eq!(p.verdict.foreign_pages_read, 7);
    let first = view.reserved[0].first;
    let run = view
        .runs
        .iter()
        .find(|r| r.first <= first && first < r.first + r.count)
        .unwrap();
    assert_eq!(run.class, WriterClass::ThisRequest);
    // The router returned decode's 200; prefill's own answer after the sent
    // handoff is 200 "length" (#33507), so no relay decided anything.
    assert!(claims(&p, 7).iter().any(|c| matches!(
        c,
        Claim::Answered {
            prefill_status: Some(200),
            decode_status: Some(200),
            ..
        }
    )));
}

#[test]
fn retire_aborted_prefill_result_times_out_with_upstreams_500() {
    let p = walk(&[Fix::RetireAbortedPrefillResult]);
    let v = &p.verdict;
    assert!(!v.leak);
    assert_eq!(v.foreign_pages_read, 0);
    assert!(
        v.latency_us >= 300_000_000,
        "decode waits 300 s: {}",
        v.latency_us
    );
    // The decode timeout path answers 500 (KVPoll.Failed → prepare_abort 500).
    assert_eq!(v.http_status, 500);
    assert!(v.counters.bootstraps >= 1 && v.counters.metadata_buffers >= 1);
    assert_eq!(v.counters.transfer_failures, 1);
    assert!(claims(&p, 4).contains(&&Claim::ResultRetired));
    assert!(claims(&p, 5).iter().any(|c| matches!(
        c,
        Claim::HandoffAborted {
            cause: AbortCause::Timeout,
            status: 500
        }
    )));
    assert!(
        p.steps[5].state.is_none(),
        "decode attention is never reached"
    );
    assert_pre_fix_leaks(&walk(&[]));
}

#[test]
fn retire_unadmitted_reject_retires_at_prefills_door_and_decode_times_out() {
    // Default assumption: decode's own cap accepts the prompt, so only
    // prefill's door retires it; decode reserved pages and waits.
    let p = walk(&[Fix::RetireUnadmittedReject]);
    let v = &p.verdict;
    assert!(!v.leak);
    assert_eq!(v.http_status, 500);
    assert!(v.latency_us >= 300_000_000);
    let c = &v.counters;
    assert_eq!((c.bootstraps, c.senders, c.prefill_batches), (0, 0, 0));
    assert_eq!(c.receivers, 1, "decode still created a receiver");
    let pre = walk(&[]);
    assert_pre_fix_leaks(&pre);
    assert_eq!(
        pre.verdict.counters.prefill_batches, 1,
        "pre-fix ran a stub batch"
    );
}

#[test]
fn with_a_decode_pool_that_rejects_too_the_doors_answer_400_at_once() {
    // The alternative of the decode-pool assumption: decode rejects the
    // prompt itself, as in upstream's 1P1D measurement of PR #38935.
    let mut c = config(
        Scale::Walkthrough,
        &[Fix::RetireUnadmittedReject],
        PoisonMode::Off,
    );
    c.decode_pool_tokens = c.prefill_pool_tokens;
    let p = run(&valid(&c)).unwrap();
    let v = &p.verdict;
    assert!(!v.leak);
    assert_eq!(v.http_status, 400);
    assert!(v.latency_us < 10_000, "immediate, got {} µs", v.latency_us);
    assert!(v
        .response_text
        .contains("exceeds the maximum allowed length"));
    let k = &v.counters;
    assert_eq!(
        (
            k.bootstraps,
            k.metadata_buffers,
            k.senders,
            k.receivers,
            k.prefill_batches
        ),
        (0, 0, 0, 0, 0)
    );
    assert!(claims(&p, 1).contains(&&Claim::NothingReserved));
    // Pre-fix with the same pools: decode reserves only the placeholder's
    // page, so nothing foreign is read, and its pending abort answers 400.
    let mut pre = config(Scale::Walkthrough, &[], PoisonMode::Off);
    pre.decode_pool_tokens = pre.prefill_pool_tokens;
    let pre = run(&valid(&pre)).unwrap();
    assert!(!pre.verdict.leak);
    assert_eq!(pre.verdict.http_status, 400);
    assert_eq!(pre.verdict.counters.prefill_batches, 1);
    assert!(p
        .assumptions
        .iter()
        .any(|a| a.id == AssumptionId::DecodePool));
    assert_pre_fix_leaks(&walk(&[]));
}

#[test]
fn kv_checksum_catches_the_short_handoff_before_batching() {
    let p = walk(&[Fix::KvChecksum]);
    let v = &p.verdict;
    assert!(!v.leak);
    assert_eq!(v.http_status, 500);
    assert!(v.response_text.contains("checksum"));
    assert_eq!(v.counters.transfer_failures, 1);
    assert!(claims(&p, 5).iter().any(|c| matches!(
        c,
        Claim::HandoffAborted {
            cause: AbortCause::ChecksumMismatch,
            ..
        }
    )));
    assert!(p.steps[5].state.is_none(), "never batched");
    assert!(p
        .assumptions
        .iter()
        .any(|a| a.id == AssumptionId::ChecksumScope));
    // The alternative scope (only the received pages) does not catch it.
    let mut c = config(Scale::Walkthrough, &[Fix::KvChecksum], PoisonMode::Off);
    c.checksum_scope = ChecksumScope::Received;
    assert_pre_fix_leaks(&run(&valid(&c)).unwrap());
    assert_pre_fix_leaks(&walk(&[]));
}

#[test]
fn page_tags_refuse_foreign_pages_and_fail_closed() {
    let p = walk(&[Fix::PageTags]);
    let v = &p.verdict;
    assert!(!v.leak);
    assert_eq!(v.http_status, 500);
    assert_eq!(v.counters.tag_refusals, 1);
    assert_eq!(v.foreign_pages_read, 0);
    assert!(v.canaries_leaked.is_empty());
    assert!(p
        .assumptions
        .iter()
        .any(|a| a.id == AssumptionId::TagRefusalStatus));
    assert_pre_fix_leaks(&walk(&[]));
}

#[test]
fn scrub_on_free_removes_foreign_data_but_still_answers_200_wrongly() {
    let p = walk(&[Fix::ScrubOnFree]);
    let v = &p.verdict;
    assert!(!v.leak);
    assert_eq!(v.http_status, 200);
    assert!(!v.correct_answer);
    assert_eq!(v.foreign_pages_read, 0);
    assert_eq!(v.outcome, Outcome::WrongAnswer);
    assert_pre_fix_leaks(&walk(&[]));
}

#[test]
fn deferred_release_alone_does_not_close_this_path() {
    assert_pre_fix_leaks(&walk(&[Fix::DeferredRelease]));
}

#[test]
fn poison_on_free_logs_or_refuses() {
    let log = probe(Scale::Walkthrough, &[], PoisonMode::Log);
    assert!(log.verdict.leak, "log mode only records");
    assert!(log.verdict.counters.poison_reads > 0);
    let refuse = probe(Scale::Walkthrough, &[], PoisonMode::Refuse);
    assert!(!refuse.verdict.leak);
    assert_eq!(refuse.verdict.http_status, 500);
    assert!(refuse
        .assumptions
        .iter()
        .any(|a| a.id == AssumptionId::PoisonOnFree));
    assert_pre_fix_leaks(&walk(&[]));
}

#[test]
fn a_zeroed_page_tail_still_leaks_through_the_other_reserved_pages() {
    let mut c = config(Scale::Walkthrough, &[], PoisonMode::Off);
    c.page_tail = PageTail::Zeroed;
    let p = run(&valid(&c)).unwrap();
    assert!(p.verdict.leak);
    assert!(!p.assumptions.iter().any(|a| a.id == AssumptionId::PageTail));
    assert_pre_fix_leaks(&walk(&[]));
}

#[test]
fn pool_at_least_context_gives_the_correct_answer() {
    let base = config(Scale::Walkthrough, &[], PoisonMode::Off);
    let ok = with_prefill_pool(valid(&base), base.context_len).unwrap();
    let p = run(&ok).unwrap();
    let v = &p.verdict;
    assert!(!v.leak);
    assert_eq!(v.http_status, 200);
    assert!(v.correct_answer, "{:?}", v.response_text);
    assert!(
        v.response_text.starts_with("CANARY-umbrella-"),
        "its own document"
    );
    assert_eq!(v.foreign_pages_read, 0);
    assert_pre_fix_leaks(&run(&valid(&base)).unwrap());
}

/// The provenance of the first fact of step `n` whose claim `is`.
fn provenance_of(p: &ProbePredicate, n: usize, is: impl Fn(&Claim) -> bool) -> Provenance {
    p.steps[n - 1]
        .facts
        .iter()
        .find(|f| is(&f.claim))
        .unwrap_or_else(|| panic!("step {n} has the claim"))
        .provenance
}

#[test]
fn only_the_recorded_page_count_is_disclosed() {
    // The record gives 8 reserved pages, all read: the walkthrough's
    // counts are disclosed; the incident scale's 10,646 pages of 64 tokens
    // follow from sizes the record does not give.
    let reserved = |c: &Claim| matches!(c, Claim::Reserved { .. });
    let attended = |c: &Claim| matches!(c, Claim::Attended { .. });
    let w = walk(&[]);
    assert_eq!(provenance_of(&w, 1, reserved), Provenance::Disclosed);
    assert_eq!(provenance_of(&w, 6, attended), Provenance::Disclosed);
    let p = probe(Scale::Incident, &[], PoisonMode::Off);
    let pages = p.steps[0]
        .facts
        .iter()
        .find_map(|f| match f.claim {
            Claim::Reserved { pages, .. } => Some(pages),
            _ => None,
        })
        .unwrap();
    assert!(pages > 8, "{pages}");
    assert_eq!(provenance_of(&p, 1, reserved), Provenance::ModelAssumption);
    assert_eq!(provenance_of(&p, 6, attended), Provenance::ModelAssumption);
    let basis = &p.steps[0]
        .facts
        .iter()
        .find(|f| reserved(&f.claim))
        .unwrap()
        .basis;
    assert!(basis.contains("the record gives 8 pages"), "{basis}");
}

#[test]
fn incident_scale_reads_a_warm_pool_of_foreign_kv() {
    let p = probe(Scale::Incident, &[], PoisonMode::Off);
    assert_eq!(p.config.context_len, 1_048_576);
    assert_eq!(p.config.prefill_pool_tokens, 681_280);
    assert_eq!(p.config.prefill_input_cap(), 681_274);
    assert!(p.verdict.leak);
    assert_eq!(p.verdict.http_status, 200);
    // Every reserved page but the handoff's own held earlier tenants' KV.
    assert!(
        p.verdict.foreign_pages_read >= 10_600,
        "{}",
        p.verdict.foreign_pages_read
    );
    for id in [
        AssumptionId::PageSize,
        AssumptionId::WarmPool,
        AssumptionId::DecodePool,
    ] {
        assert!(p.assumptions.iter().any(|a| a.id == id), "{id:?} labelled");
    }
    let fixed = probe(
        Scale::Incident,
        &[Fix::RetireAbortedPrefillResult],
        PoisonMode::Off,
    );
    assert!(!fixed.verdict.leak);
    assert_eq!(fixed.verdict.foreign_pages_read, 0);
}

#[test]
fn same_seed_same_trace_other_seed_other_canary() {
    let a = walk(&[]);
    let b = walk(&[]);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    let c = run(&incident_config(Scale::Walkthrough, &[], PoisonMode::Off, 7).unwrap()).unwrap();
    assert_ne!(a.trace_sha256, c.trace_sha256);
    assert_ne!(a.verdict.canaries_leaked, c.verdict.canaries_leaked);
    assert_pre_fix_leaks(&c);
}

#[test]
fn fifo_hands_out_fresh_pages_first_so_fewer_foreign_pages_are_read() {
    let lifo = walk(&[]);
    let mut c = config(Scale::Walkthrough, &[], PoisonMode::Off);
    c.free_list = kvw_evidence::FreeListPolicy::Fifo;
    let fifo = run(&valid(&c)).unwrap();
    assert!(fifo.verdict.foreign_pages_read < lifo.verdict.foreign_pages_read);
    assert_pre_fix_leaks(&lifo);
}

#[test]
fn hop_and_step_costs_order_events_but_never_decide_an_outcome() {
    use kvw_engine::backend::Backend;
    use kvw_engine::probe::run_with_costs;
    use kvw_engine::sim::cost::Costs;

    let d = Costs::default();
    let variants = [
        // Decode hears of the request long before prefill does.
        Costs {
            hop_prefill_us: 50_000,
            hop_decode_us: 10,
            ..d
        },
        // Slow hops back, a fast decode loop and slow writes.
        Costs {
            hop_back_us: 30_000,
            decode_step_us: 1_000,
            write_latency_us: 40_000,
            write_per_page_us: 100,
            ..d
        },
        // A slow prefill.
        Costs {
            prefill_fixed_us: 90_000,
            prefill_tokens_per_us: 1,
            ..d
        },
    ];
    let key = |p: &ProbePredicate| {
        let v = &p.verdict;
        (
            v.outcome,
            v.http_status,
            v.leak,
            v.foreign_pages_read,
            v.response_text.clone(),
        )
    };
    let rows: Vec<Vec<Fix>> = std::iter::once(vec![])
        .chain(Fix::ALL.iter().map(|f| vec![*f]))
        .chain(std::iter::once(Fix::ALL.to_vec()))
        .collect();
    let backend = Backend::Cpu;
    let mut latencies = std::collections::BTreeSet::new();
    for fixes in rows {
        let c = config(Scale::Walkthrough, &fixes, PoisonMode::Off);
        let base = run_with_costs(&valid(&c), &backend, d).unwrap();
        for costs in variants {
            let other = run_with_costs(&valid(&c), &backend, costs).unwrap();
            assert_eq!(key(&base), key(&other), "{fixes:?} with {costs:?}");
            latencies.insert(other.verdict.latency_us);
        }
    }
    assert!(latencies.len() > 3, "the costs did change the timings");
    assert_pre_fix_leaks(&walk(&[]));
}
