//! Hand-made predicates for tests, examples and documentation.
//!
//! The evidence layer must be testable without the engine, so this module
//! builds well-formed [`ProbePredicate`]s by hand: seven steps with plausible
//! states and pages, a verdict that depends on the fixes, and a correct
//! `trace_sha256`. They are *illustrations*, not engine output; nothing here
//! claims to be what the engine would record.

use crate::predicate::*;
use crate::receipt::trace_sha256;

/// Configuration of a sample run at `scale` with `fixes` on.
pub fn sample_config(
    scale: Scale,
    fixes: &[Fix],
    poison_on_free: PoisonMode,
    seed: u64,
) -> ProbeConfig {
    // A smaller walkthrough than the engine's, so hand-made pages stay few.
    let (context_len, prefill_pool_tokens, decode_pool_tokens, page_size) = match scale {
        Scale::Walkthrough => (64, 40, 64, 4),
        Scale::Incident => {
            let p = scale.preset();
            (
                p.context_len,
                p.prefill_pool_tokens,
                p.decode_pool_tokens,
                p.page_size,
            )
        }
    };
    let fixes = crate::FixSet::canonical(fixes);
    ProbeConfig {
        scale,
        context_len,
        prefill_pool_tokens,
        decode_pool_tokens,
        page_size,
        free_list: FreeListPolicy::Lifo,
        fixes,
        poison_on_free,
        checksum_scope: ChecksumScope::Reserved,
        page_tail: PageTail::Carried,
        seed,
        waiting_timeout_s: 300,
        max_new_tokens: 16,
    }
}

fn fact(claim: Claim, provenance: Provenance) -> Fact {
    Fact {
        claim,
        provenance,
        basis: "sample".into(),
    }
}

fn event(at_us: u64, kind: EventKind) -> Event {
    Event {
        at_us,
        rid: "probe-1".into(),
        kind,
    }
}

/// A complete, self-consistent sample predicate for `config`.
pub fn sample_predicate(config: ProbeConfig) -> ProbePredicate {
    let prompt = config.prefill_input_cap() + 1 + config.seed % 7;
    let pages = prompt.div_ceil(u64::from(config.page_size));
    let blocked = !config.fixes.is_empty();
    let status = if blocked { 400 } else { 200 };
    let events = vec![
        event(
            0,
            EventKind::Dispatch {
                prompt_len: prompt,
                room: 1000,
            },
        ),
        event(
            10,
            EventKind::Reserve {
                pages: vec![PageRange::up(0, pages)],
                tokens: prompt,
            },
        ),
        event(
            20,
            EventKind::Forward {
                from: 0,
                to: 1,
                pages: 1,
            },
        ),
        event(
            30,
            EventKind::KvSend {
                pages: 1,
                last: true,
                checksum: None,
            },
        ),
        event(
            40,
            EventKind::Attend {
                decode_step: 1,
                pages,
                foreign_pages: pages - 1,
                token: 65,
            },
        ),
        event(
            50,
            EventKind::Response {
                status,
                text: String::new(),
            },
        ),
    ];
    let door = |decision| Claim::Door {
        door: DoorName::PrefillWaitingQueue,
        decision,
        finished: false,
        to_finish_set: true,
    };
    let facts: [Vec<Fact>; 7] = [
        vec![fact(
            Claim::Dispatched {
                prompt_len: prompt,
                room: 1000,
            },
            Provenance::Disclosed,
        )],
        vec![fact(
            door(if blocked {
                DoorDecision::Retired
            } else {
                DoorDecision::Admitted
            }),
            Provenance::UpstreamTest,
        )],
        vec![fact(
            Claim::Forwarded {
                tokens: 1,
                prompt_len: prompt,
                pages: 1,
            },
            Provenance::Disclosed,
        )],
        vec![fact(Claim::ResultRetired, Provenance::UpstreamTest)],
        vec![fact(
            Claim::HandoffAccepted {
                pages_written: 1,
                pages_reserved: pages,
            },
            Provenance::ModelAssumption,
        )],
        vec![fact(
            Claim::Attended {
                pages_read: pages,
                positions: prompt,
                foreign_pages: pages - 1,
            },
            Provenance::Disclosed,
        )],
        vec![fact(
            Claim::Answered {
                prefill_status: None,
                decode_status: None,
                status,
                latency_us: 1_500_000,
                outcome: if blocked {
                    Outcome::Refused
                } else {
                    Outcome::Leak
                },
            },
            Provenance::Disclosed,
        )],
    ];
    let mut steps: Vec<Step> = facts
        .into_iter()
        .enumerate()
        .map(|(i, facts)| Step {
            step: i as u8 + 1,
            reached: true,
            events: vec![i.min(events.len() - 1) as u32],
            facts,
            state: None,
            pages: None,
            sources: vec![],
        })
        .collect();
    steps[1].state = Some(ReqState {
        door: DoorName::PrefillWaitingQueue,
        to_finish: Some(FinishReason::Abort {
            status_code: 400,
            message: "Input length exceeds the maximum allowed length".into(),
        }),
        finished_reason: None,
        finished: false,
        original_prompt_len: prompt,
        origin_input_len: 1,
        decision: if blocked {
            DoorDecision::Retired
        } else {
            DoorDecision::Admitted
        },
    });
    steps[5].pages = Some(PageView {
        pool: PoolSide::Decode,
        pages_total: config.decode_pool_tokens / u64::from(config.page_size),
        page_size: config.page_size,
        runs: vec![
            PageRun {
                first: 0,
                count: 1,
                class: WriterClass::ThisRequest,
                writer: Some(Writer {
                    tenant: "probe".into(),
                    rid: "probe-1".into(),
                    generation: 0,
                }),
            },
            PageRun {
                first: 1,
                count: pages - 1,
                class: WriterClass::OtherTenant,
                writer: Some(Writer {
                    tenant: "acme".into(),
                    rid: "acme-1".into(),
                    generation: 0,
                }),
            },
        ],
        reserved: vec![PageRange::up(0, pages)],
        transferred: vec![PageRange::up(0, 1)],
        read: vec![PageRange::up(0, if blocked { 0 } else { pages })],
    });
    steps[1].sources.push(SourceRef {
        origin: SourceOrigin::Upstream,
        path: "python/sglang/srt/managers/schedule_batch.py".into(),
        line_start: Some(2053),
        line_end: Some(2072),
        label: "set_finish_with_abort()".into(),
    });
    let verdict = Verdict {
        outcome: if blocked {
            Outcome::Refused
        } else {
            Outcome::Leak
        },
        leak: !blocked,
        http_status: status,
        foreign_pages_read: if blocked { 0 } else { pages - 1 },
        canaries_leaked: if blocked {
            vec![]
        } else {
            vec!["CANARY-acme-1".into()]
        },
        tenants_leaked: if blocked { vec![] } else { vec!["acme".into()] },
        latency_us: 1_500_000,
        response_text: if blocked {
            "input is longer than the prefill pool allows".into()
        } else {
            "... CANARY-acme-1 ...".into()
        },
        correct_answer: blocked,
        counters: Counters::default(),
    };
    let trace = trace_sha256(&events, &steps);
    ProbePredicate {
        probe: ProbeInfo {
            name: "incident".into(),
            version: 2,
        },
        engine: EngineInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            commit: "unknown".into(),
        },
        backend: BackendInfo {
            kind: BackendKind::Cpu,
            device: "cpu (sample)".into(),
        },
        config,
        requests: vec![RequestInfo {
            rid: "probe-1".into(),
            tenant: "probe".into(),
            prompt_len: prompt,
            canary: "CANARY-probe-1".into(),
            arrival_us: 0,
            probed: true,
        }],
        events,
        steps,
        assumptions: vec![],
        verdict,
        trace_sha256: trace,
    }
}

/// A receipt file name for a config, e.g. `incident-walkthrough-none.json`.
pub fn sample_name(config: &ProbeConfig) -> String {
    let scale = config.scale;
    let fixes = if config.fixes.is_empty() {
        "none".to_string()
    } else {
        config
            .fixes
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join("_")
    };
    format!("incident-{scale}-{fixes}.json")
}
