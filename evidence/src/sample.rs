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
    kv_canary: KvCanaryMode,
    seed: u64,
) -> ProbeConfig {
    let (context_len, prefill_pool_tokens, decode_pool_tokens, page_size) = match scale {
        Scale::Walkthrough => (64, 40, 64, 4),
        Scale::Incident => (1_048_576, 681_280, 1_048_576, 64),
    };
    let mut fixes = fixes.to_vec();
    fixes.sort();
    fixes.dedup();
    ProbeConfig {
        scale,
        context_len,
        prefill_pool_tokens,
        decode_pool_tokens,
        page_size,
        max_req_input_len: (context_len - 1).min(prefill_pool_tokens - 1) - 5,
        free_list: FreeListPolicy::Lifo,
        fixes,
        kv_canary,
        seed,
        waiting_timeout_s: 300,
        max_new_tokens: 16,
    }
}

fn step(n: u8, name: &str, provenance: Provenance, summary: &str, events: Vec<Event>) -> Step {
    Step {
        step: n,
        name: name.into(),
        provenance,
        summary: summary.into(),
        state: None,
        pages: None,
        sources: vec![],
        events,
    }
}

fn event(t_us: u64, actor: &str, kind: &str, detail: &str) -> Event {
    Event {
        t_us,
        actor: actor.into(),
        rid: "req-probe".into(),
        kind: kind.into(),
        detail: detail.into(),
    }
}

/// A complete, self-consistent sample predicate for `config`.
pub fn sample_predicate(config: ProbeConfig) -> ProbePredicate {
    let prompt = config.max_req_input_len + 1 + config.seed % 7;
    let pages = prompt.div_ceil(u64::from(config.page_size));
    let blocked = !config.fixes.is_empty();
    let mut steps =
        vec![
        step(1, "Bootstrap", Provenance::Disclosed,
            "The router passes the original prompt length to decode, which reserves pages for it.",
            vec![event(0, "router", "bootstrap", &format!("prompt of {prompt} tokens"))]),
        step(2, "Prefill admission", Provenance::UpstreamTest,
            "The rejection sits in to_finish while finished() is still false.",
            vec![event(10, "prefill", "door", if blocked { "retired" } else { "admitted" })]),
        step(3, "Prefill forward", Provenance::UpstreamThread,
            "Only the one-token placeholder is computed.",
            vec![event(20, "prefill", "forward", "1 token")]),
        step(4, "KV transfer", Provenance::UpstreamThread,
            "One page is sent and the transfer is reported complete.",
            vec![event(30, "transfer", "kv_send", "1 page")]),
        step(5, "Decode admission", Provenance::ModelAssumption,
            "Decode's finished check accepts the handoff.",
            vec![event(40, "decode", "door", "admitted")]),
        step(6, "Decode attention", Provenance::Disclosed,
            "Decode reads every reserved page.",
            vec![event(50, "decode", "attend", &format!("{pages} pages"))]),
        step(7, "Response", Provenance::Disclosed,
            "The client receives the answer.",
            vec![event(60, "client", "response", if blocked { "HTTP 400" } else { "HTTP 200" })]),
    ];
    steps[1].state = Some(ReqState {
        door: "prefill.waiting_queue".into(),
        to_finish: Some("FINISH_ABORT(400)".into()),
        finished_reason: None,
        finished: false,
        original_prompt_len: prompt,
        origin_input_len: 1,
        decision: if blocked { "retired" } else { "admitted" }.into(),
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
                    rid: "req-probe".into(),
                    generation: 0,
                }),
            },
            PageRun {
                first: 1,
                count: pages - 1,
                class: WriterClass::OtherTenant,
                writer: Some(Writer {
                    tenant: "acme".into(),
                    rid: "req-acme-1".into(),
                    generation: 0,
                }),
            },
        ],
        reserved: vec![PageRange {
            first: 0,
            count: pages,
        }],
        transferred: vec![PageRange { first: 0, count: 1 }],
        read: vec![PageRange {
            first: 0,
            count: if blocked { 0 } else { pages },
        }],
    });
    steps[1].sources.push(SourceRef {
        origin: SourceOrigin::Upstream,
        path: "python/sglang/srt/managers/schedule_batch.py".into(),
        line_start: Some(2053),
        line_end: Some(2072),
        label: "set_finish_with_abort()".into(),
    });
    let verdict = if blocked {
        Verdict {
            leak: false,
            http_status: 400,
            foreign_pages_read: 0,
            canaries_leaked: vec![],
            latency_s: 0.25,
            response_text: "input is longer than the prefill pool allows".into(),
            correct_answer: true,
            outcome: "blocked: HTTP 400".into(),
            counters: Counters::default(),
        }
    } else {
        Verdict {
            leak: true,
            http_status: 200,
            foreign_pages_read: pages - 1,
            canaries_leaked: vec!["CANARY-acme-1".into()],
            latency_s: 1.5,
            response_text: "... CANARY-acme-1 ...".into(),
            correct_answer: false,
            outcome: "leak: HTTP 200 with tenant acme's canary".into(),
            counters: Counters {
                bootstraps: 1,
                metadata_buffers: 1,
                senders: 1,
                receivers: 1,
                prefill_batches: 1,
                ..Counters::default()
            },
        }
    };
    let trace = trace_sha256(&steps);
    ProbePredicate {
        probe: ProbeInfo {
            name: "incident".into(),
            version: 1,
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
        steps,
        verdict,
        trace_sha256: trace,
    }
}

/// A receipt file name for a config, e.g. `incident-walkthrough-none.json`.
pub fn sample_name(config: &ProbeConfig) -> String {
    let scale = match config.scale {
        Scale::Walkthrough => "walkthrough",
        Scale::Incident => "incident",
    };
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
