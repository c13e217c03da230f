//! Each row of the fix matrix against the public record.
//!
//! Every test runs the guarded configuration *and* the pre-fix one, and
//! asserts that the pre-fix run leaks: a test that passes only because the
//! scenario stopped leaking would fail here instead.

use kvw_engine::probe::{incident_config, run, with_prefill_pool};
use kvw_evidence::{Fix, KvCanaryMode, ProbePredicate, Scale, WriterClass};

fn probe(scale: Scale, fixes: &[Fix], canary: KvCanaryMode) -> ProbePredicate {
    run(&incident_config(scale, fixes, canary, 2026).unwrap()).unwrap()
}

fn walk(fixes: &[Fix]) -> ProbePredicate {
    probe(Scale::Walkthrough, fixes, KvCanaryMode::Off)
}

fn assert_pre_fix_leaks(p: &ProbePredicate) {
    let v = &p.verdict;
    assert!(v.leak, "pre-fix run must leak: {}", v.outcome);
    assert_eq!(v.http_status, 200);
    assert!(!v.canaries_leaked.is_empty());
    assert!(v.canaries_leaked[0].starts_with("CANARY-acme-"));
    assert!(v.response_text.contains(&v.canaries_leaked[0]));
}

#[test]
fn no_fixes_reproduces_the_seven_steps() {
    let p = walk(&[]);
    assert_pre_fix_leaks(&p);
    assert_eq!(p.steps.len(), 7);
    for (i, s) in p.steps.iter().enumerate() {
        assert_eq!(s.step as usize, i + 1);
        assert!(!s.summary.is_empty());
    }
    // Step 2: the rejection is in to_finish, finished() is false, admitted.
    let s2 = p.steps[1].state.as_ref().unwrap();
    assert!(s2.to_finish.as_deref().unwrap().contains("FINISH_ABORT"));
    assert!(!s2.finished);
    assert_eq!(s2.decision, "admitted");
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
}

#[test]
fn retire_aborted_prefill_result_times_out_without_leaking() {
    let p = walk(&[Fix::RetireAbortedPrefillResult]);
    let v = &p.verdict;
    assert!(!v.leak);
    assert_eq!(v.foreign_pages_read, 0);
    assert!(
        v.latency_s >= 300.0,
        "decode waits for the 300 s timeout, got {}",
        v.latency_s
    );
    assert_eq!(v.http_status, 400);
    assert!(v.counters.bootstraps >= 1 && v.counters.metadata_buffers >= 1);
    assert_eq!(v.counters.transfer_failures, 1);
    assert!(
        p.steps[5].state.is_none(),
        "decode attention is never reached"
    );
    assert_pre_fix_leaks(&walk(&[]));
}

#[test]
fn retire_unadmitted_reject_answers_400_at_once_with_nothing_created() {
    for fixes in [
        vec![Fix::RetireUnadmittedReject],
        vec![Fix::RetireAbortedPrefillResult, Fix::RetireUnadmittedReject],
    ] {
        let p = walk(&fixes);
        let v = &p.verdict;
        assert!(!v.leak);
        assert_eq!(v.http_status, 400);
        assert!(v.latency_s < 0.01, "immediate, got {}", v.latency_s);
        assert!(v
            .response_text
            .contains("exceeds the maximum allowed length"));
        let c = &v.counters;
        assert_eq!(
            (
                c.bootstraps,
                c.metadata_buffers,
                c.senders,
                c.receivers,
                c.prefill_batches
            ),
            (0, 0, 0, 0, 0)
        );
    }
    let pre = walk(&[]);
    assert_pre_fix_leaks(&pre);
    assert_eq!(
        pre.verdict.counters.prefill_batches, 1,
        "pre-fix ran a stub batch"
    );
}

#[test]
fn kv_checksum_catches_the_short_handoff_before_batching() {
    let p = walk(&[Fix::KvChecksum]);
    let v = &p.verdict;
    assert!(!v.leak);
    assert_eq!(v.http_status, 500);
    assert!(v.response_text.contains("checksum"));
    assert_eq!(v.counters.transfer_failures, 1);
    assert_eq!(p.steps[4].state.as_ref().unwrap().decision, "aborted");
    assert!(p.steps[5].state.is_none(), "never batched");
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
    assert!(v.outcome.contains("wrong answer"), "{}", v.outcome);
    assert_pre_fix_leaks(&walk(&[]));
}

#[test]
fn deferred_release_alone_does_not_close_this_path() {
    assert_pre_fix_leaks(&walk(&[Fix::DeferredRelease]));
}

#[test]
fn kv_canary_logs_or_raises() {
    let log = probe(Scale::Walkthrough, &[], KvCanaryMode::Log);
    assert!(log.verdict.leak, "log mode only records");
    assert!(log.verdict.counters.canary_reads > 0);
    let raise = probe(Scale::Walkthrough, &[], KvCanaryMode::Raise);
    assert!(!raise.verdict.leak);
    assert_eq!(raise.verdict.http_status, 500);
    assert_pre_fix_leaks(&walk(&[]));
}

#[test]
fn pool_at_least_context_gives_the_correct_answer() {
    let base = incident_config(Scale::Walkthrough, &[], KvCanaryMode::Off, 2026).unwrap();
    let ok = with_prefill_pool(base.clone(), base.context_len).unwrap();
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
    assert_pre_fix_leaks(&run(&base).unwrap());
}

#[test]
fn incident_scale_reproduces_with_the_disclosed_numbers() {
    let p = probe(Scale::Incident, &[], KvCanaryMode::Off);
    assert_eq!(p.config.context_len, 1_048_576);
    assert_eq!(p.config.prefill_pool_tokens, 681_280);
    assert_eq!(p.config.max_req_input_len, 681_274);
    assert_pre_fix_leaks(&p);
    let s1 = p.steps[0].state.as_ref().unwrap();
    assert!(s1.original_prompt_len > 681_280);
    let fixed = probe(
        Scale::Incident,
        &[Fix::RetireUnadmittedReject],
        KvCanaryMode::Off,
    );
    assert!(!fixed.verdict.leak);
    assert_eq!(fixed.verdict.http_status, 400);
}

#[test]
fn same_seed_same_trace_other_seed_other_canary() {
    let a = walk(&[]);
    let b = walk(&[]);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    let c = run(&incident_config(Scale::Walkthrough, &[], KvCanaryMode::Off, 7).unwrap()).unwrap();
    assert_ne!(a.trace_sha256, c.trace_sha256);
    assert_ne!(a.verdict.canaries_leaked, c.verdict.canaries_leaked);
    assert_pre_fix_leaks(&c);
}

#[test]
fn fifo_free_list_hands_out_never_used_pages_first() {
    let mut c = incident_config(Scale::Incident, &[], KvCanaryMode::Off, 2026).unwrap();
    c.free_list = kvw_evidence::FreeListPolicy::Fifo;
    let p = run(&c).unwrap();
    // The decode pool is large enough that FIFO reaches fresh pages first.
    assert_eq!(p.verdict.foreign_pages_read, 0);
    assert!(!p.verdict.leak);
    assert_eq!(p.verdict.http_status, 200, "still the wrong 200 answer");
}
