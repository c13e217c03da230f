//! Randomized runs: random interleavings of several tenants' requests,
//! rejections, client aborts at every stage, re-entering requests, transfer
//! delays, dropped and late writes and lost acks, with the safety
//! invariants checked after every event.
//!
//! A [`Case`] is plain data, so it can be generated from a seed, shrunk and
//! written into a receipt. [`run_case`] runs it on the simulator and stops
//! at the first broken invariant:
//!
//! * isolation — decode never attends to a page another request (or an
//!   earlier generation) wrote;
//! * ownership — no page or slot is freed twice, no write lands in a page
//!   not held by its writer;
//! * answers — no request is answered twice, a rejected one never with 200,
//!   and once nothing is left to do every request has its answer. A run in
//!   which a lost drain ack holds pages forever (deferred release has no ack
//!   timeout here) may end with requests waiting for those pages; it is
//!   reported as stalled, not as a violation.

use kvw_evidence::{Event, EventKind, Fix, PoisonMode, RequestInfo, ResourceAction, Scale};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::arrivals::Arrival;
use crate::attention;
use crate::backend::Backend;
use crate::config::{incident_config, with_prefill_pool};
use crate::scenarios::script::Ran;
use crate::sim::{Extras, Reentry, Sim, ABORT_MESSAGE};
use crate::transfer::Fault;

/// Tenants of the randomized runs.
pub const TENANTS: [&str; 3] = ["acme", "globex", "umbrella"];

/// One request of a case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseRequest {
    /// Index into [`TENANTS`].
    pub tenant: u8,
    pub at_us: u64,
    pub prompt_len: u32,
    /// The client aborts this long after the arrival.
    pub abort_after_us: Option<u64>,
    /// Faults injected into the request's bootstrap room.
    pub faults: Vec<Fault>,
    /// The request re-enters prefill with a pending abort and its metadata
    /// buffer index (a preempted request).
    pub reenters: bool,
}

/// A randomized run: its requests.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Case {
    pub requests: Vec<CaseRequest>,
}

/// Which invariant broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Invariant {
    Isolation,
    DoubleFree,
    WriteAfterReassign,
    AnsweredTwice,
    Rejected200,
    Unanswered,
}

impl Invariant {
    pub const ALL: [Invariant; 6] = [
        Invariant::Isolation,
        Invariant::DoubleFree,
        Invariant::WriteAfterReassign,
        Invariant::AnsweredTwice,
        Invariant::Rejected200,
        Invariant::Unanswered,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Invariant::Isolation => "isolation",
            Invariant::DoubleFree => "double-free",
            Invariant::WriteAfterReassign => "write-after-reassign",
            Invariant::AnsweredTwice => "answered-twice",
            Invariant::Rejected200 => "rejected-answered-200",
            Invariant::Unanswered => "unanswered",
        }
    }

    pub fn from_name(name: &str) -> Option<Invariant> {
        Invariant::ALL.into_iter().find(|i| i.name() == name)
    }
}

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: Invariant,
    /// Request index.
    pub request: u32,
    /// Index of the last event checked when it was found.
    pub at_event: usize,
    pub detail: String,
}

/// What one case did.
#[derive(Debug, Clone)]
pub struct CaseRun {
    pub violation: Option<Violation>,
    /// Ended with requests waiting on pages a lost ack holds.
    pub stalled: bool,
    pub events: Vec<Event>,
    pub requests: Vec<RequestInfo>,
    /// Page pictures of the pictured request (see [`run_case_pictured`]),
    /// keyed by event index; empty for a plain run.
    pub pictures: Vec<(usize, kvw_evidence::PageView)>,
}

/// Prefill pool of the runs (cap 106 tokens: longer prompts are rejected).
pub const PREFILL_POOL: u64 = 112;
/// Decode pool: large enough that decode's own cap accepts every prompt and
/// a leaked request never starves the others.
pub const DECODE_POOL: u64 = 1024;
/// Decode's waiting timeout in the runs: 1 s instead of upstream's 300 s,
/// so that stalls cost few scheduler iterations; late writes and late
/// arrivals are drawn around it (timing constants order events, they do not
/// decide outcomes).
pub const WAITING_TIMEOUT_S: u64 = 1;
/// Virtual time a run may take: every timeout has fired long before.
pub const HORIZON_US: u64 = 20_000_000;
/// Longest prompt generated.
pub const MAX_PROMPT: u32 = 128;

/// The `index`-th case of seed `seed`.
pub fn generate(seed: u64, index: u64) -> Case {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let n = rng.random_range(1..=4);
    let requests = (0..n)
        .map(|_| {
            let mut faults = Vec::new();
            if rng.random_bool(0.2) {
                faults.push(Fault::Delay {
                    us: rng.random_range(0..40_000),
                });
            }
            if rng.random_bool(0.1) {
                faults.push(Fault::DropWrite {
                    nth: rng.random_range(0..8usize) as u32,
                });
            }
            if rng.random_bool(0.25) {
                let us = if rng.random_bool(0.5) {
                    rng.random_range(0..50_000)
                } else {
                    rng.random_range(900_000..1_300_000)
                };
                faults.push(Fault::LateWrite {
                    nth: rng.random_range(0..8usize) as u32,
                    us,
                });
            }
            if rng.random_bool(0.1) {
                faults.push(Fault::LostAck);
            }
            CaseRequest {
                tenant: rng.random_range(0..TENANTS.len() as u8),
                at_us: if rng.random_bool(0.2) {
                    rng.random_range(900_000..1_300_000)
                } else {
                    rng.random_range(0..20_000)
                },
                prompt_len: rng.random_range(8..=MAX_PROMPT),
                abort_after_us: rng.random_bool(0.3).then(|| rng.random_range(0..40_000)),
                faults,
                reenters: rng.random_bool(0.1),
            }
        })
        .collect();
    Case { requests }
}

/// Run `case` with `fixes`, checking the invariants after every event.
pub fn run_case(case: &Case, fixes: &[Fix]) -> CaseRun {
    run_case_pictured(case, fixes, None)
}

/// [`run_case`], also recording page pictures of request `pictured` (as a
/// probe records its probed request's). Marking a request pictured changes
/// what is recorded about it, never what happens: the events are the same.
pub fn run_case_pictured(case: &Case, fixes: &[Fix], pictured: Option<usize>) -> CaseRun {
    run_case_polling(case, fixes, pictured, Polling::SkipIdle)
}

/// How prefill's idle polls run: skipped past what cannot change (the
/// default), or every one of them ([`Sim::skip_idle_polls`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Polling {
    SkipIdle,
    EveryPoll,
}

/// [`run_case_pictured`] with prefill's idle polls run as `polling` says;
/// the events are the same either way.
pub fn run_case_polling(
    case: &Case,
    fixes: &[Fix],
    pictured: Option<usize>,
    polling: Polling,
) -> CaseRun {
    let backend = Backend::Cpu;
    let base = incident_config(Scale::Walkthrough, fixes, PoisonMode::Off, 7)
        .and_then(|c| with_prefill_pool(c, PREFILL_POOL))
        .map(crate::config::ValidConfig::into_inner);
    let Ok(mut config) = base else {
        return CaseRun {
            violation: None,
            stalled: false,
            events: Vec::new(),
            requests: Vec::new(),
            pictures: Vec::new(),
        };
    };
    config.decode_pool_tokens = DECODE_POOL;
    config.waiting_timeout_s = WAITING_TIMEOUT_S;
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let arrivals: Vec<Arrival> = case
        .requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let tenant = TENANTS[r.tenant as usize % TENANTS.len()];
            let canary = attention::canary(tenant, &mut rng);
            let prompt = attention::document(tenant, &canary, r.prompt_len as usize, &mut rng);
            Arrival {
                at_us: r.at_us,
                tenant: tenant.into(),
                prompt,
                canary,
                max_new_tokens: 4,
                probed: pictured == Some(i),
            }
        })
        .collect();
    let cap = config.prefill_input_cap();
    let mut sim = Sim::new(config, arrivals, &backend);
    sim.resource_events = true;
    sim.skip_idle_polls = polling == Polling::SkipIdle;
    sim.horizon_us = HORIZON_US;
    for (i, r) in case.requests.iter().enumerate() {
        let room = sim.entries[i].room;
        for f in &r.faults {
            sim.channel.inject(room, *f);
        }
        if let Some(after) = r.abort_after_us {
            sim.client_abort(r.at_us + after, i as u32);
        }
        if r.reenters {
            sim.entries[i].extras = Extras {
                reentry: Some(Reentry {
                    prefill: true,
                    to_finish: Some((ABORT_MESSAGE.into(), 503)),
                    metadata_buffer_index: true,
                    ..Reentry::default()
                }),
                ..Extras::default()
            };
        }
    }
    let rejected: Vec<bool> = case
        .requests
        .iter()
        .map(|r| r.prompt_len as u64 > cap)
        .collect();
    let mut checker = Checker::new(case.requests.len(), rejected);
    let mut violation = None;
    while sim.step() {
        if let Some(v) = checker.check(&sim) {
            violation = Some(v);
            break;
        }
    }
    if violation.is_none() {
        sim.quiesce();
        violation = checker.check(&sim);
    }
    let mut stalled = false;
    if violation.is_none() {
        let lost_ack = case
            .requests
            .iter()
            .any(|r| r.faults.contains(&Fault::LostAck));
        if let Some(i) = sim.entries.iter().position(|e| e.response.is_none()) {
            if lost_ack {
                stalled = true;
            } else {
                violation = Some(Violation {
                    invariant: Invariant::Unanswered,
                    request: i as u32,
                    at_event: sim.trace.events.len().saturating_sub(1),
                    detail: format!("{} never got an answer", sim.entries[i].rid),
                });
            }
        }
    }
    let ran = Ran::from_sim(&sim);
    CaseRun {
        violation,
        stalled,
        events: ran.events,
        requests: ran.requests,
        pictures: ran.pictures,
    }
}

/// Incremental invariant checks over the events recorded so far.
struct Checker {
    seen: usize,
    answers: Vec<u32>,
    rejected: Vec<bool>,
    stale_seen: usize,
}

impl Checker {
    fn new(n: usize, rejected: Vec<bool>) -> Self {
        Checker {
            seen: 0,
            answers: vec![0; n],
            rejected,
            stale_seen: 0,
        }
    }

    fn check(&mut self, sim: &Sim) -> Option<Violation> {
        let events = &sim.trace.events;
        while self.seen < events.len() {
            let i = self.seen;
            self.seen += 1;
            let req = sim.trace.requests[i];
            let rid = &events[i].rid;
            let found = |invariant, detail: String| {
                Some(Violation {
                    invariant,
                    request: req,
                    at_event: i,
                    detail,
                })
            };
            match &events[i].kind {
                EventKind::Attend { foreign_pages, .. } if *foreign_pages > 0 => {
                    return found(
                        Invariant::Isolation,
                        format!("{rid} attended to {foreign_pages} page(s) another request wrote"),
                    );
                }
                EventKind::Resource {
                    action: ResourceAction::DoubleFree,
                    resource,
                    index,
                    ..
                } => {
                    return found(
                        Invariant::DoubleFree,
                        format!("{rid}: {resource:?} {index} freed twice or handed out while held"),
                    );
                }
                EventKind::Response { status, .. } => {
                    self.answers[req as usize] += 1;
                    if self.answers[req as usize] > 1 {
                        return found(Invariant::AnsweredTwice, format!("{rid} answered twice"));
                    }
                    if *status == 200 && self.rejected[req as usize] {
                        return found(
                            Invariant::Rejected200,
                            format!("{rid} was rejected by the input check and answered 200"),
                        );
                    }
                }
                _ => {}
            }
        }
        if sim.counters.double_frees > 0 {
            return Some(Violation {
                invariant: Invariant::DoubleFree,
                request: 0,
                at_event: self.seen.saturating_sub(1),
                detail: format!("{} KV page double free(s)", sim.counters.double_frees),
            });
        }
        if let Some(&(req, page)) = sim.stale_writes.get(self.stale_seen) {
            self.stale_seen += 1;
            return Some(Violation {
                invariant: Invariant::WriteAfterReassign,
                request: req,
                at_event: self.seen.saturating_sub(1),
                detail: format!(
                    "a write of {} landed in decode page {page} it no longer held",
                    sim.entries[req as usize].rid
                ),
            });
        }
        None
    }
}

/// Shrink a failing case: drop requests, faults, aborts and re-entries,
/// shorten prompts and pull arrivals in, keeping a violation of the same
/// invariant. Greedy, one change at a time, until no change keeps it.
pub fn shrink(case: &Case, fixes: &[Fix], invariant: Invariant) -> Case {
    let fails = |c: &Case| {
        run_case(c, fixes)
            .violation
            .is_some_and(|v| v.invariant == invariant)
    };
    let mut best = case.clone();
    loop {
        let next = candidates(&best)
            .into_iter()
            .find(|c| size(c) < size(&best) && fails(c));
        match next {
            Some(c) => best = c,
            None => return best,
        }
    }
}

/// A size measure for shrinking: requests, faults, aborts, re-entries,
/// prompt length and non-zero arrival times.
pub fn size(c: &Case) -> usize {
    c.requests
        .iter()
        .map(|r| {
            100_000
                + r.faults.len() * 1000
                + r.abort_after_us.is_some() as usize * 1000
                + r.reenters as usize * 1000
                + r.prompt_len as usize
                + (r.at_us > 0) as usize
        })
        .sum()
}

fn candidates(c: &Case) -> Vec<Case> {
    let mut out = Vec::new();
    let with = |i: usize, f: &dyn Fn(&mut CaseRequest)| {
        let mut d = c.clone();
        f(&mut d.requests[i]);
        d
    };
    for i in 0..c.requests.len() {
        let mut d = c.clone();
        d.requests.remove(i);
        out.push(d);
    }
    for (i, r) in c.requests.iter().enumerate() {
        for j in 0..r.faults.len() {
            out.push(with(i, &|r| {
                r.faults.remove(j);
            }));
        }
        if r.abort_after_us.is_some() {
            out.push(with(i, &|r| r.abort_after_us = None));
        }
        if r.reenters {
            out.push(with(i, &|r| r.reenters = false));
        }
        // Shorter prompts, keeping a rejected one just over the cap.
        let floor = if r.prompt_len > 106 { 107 } else { 8 };
        for len in [floor, r.prompt_len / 2, r.prompt_len.saturating_sub(1)] {
            if len >= floor && len < r.prompt_len {
                out.push(with(i, &|r| r.prompt_len = len));
            }
        }
        if r.at_us > 0 {
            out.push(with(i, &|r| r.at_us = 0));
        }
    }
    out
}

/// A case's requests as a receipt records them.
pub fn case_requests(case: &Case) -> Vec<kvw_evidence::scenario::FuzzRequest> {
    use kvw_evidence::scenario::FuzzRequest;
    case.requests
        .iter()
        .map(|r| FuzzRequest {
            tenant: TENANTS[r.tenant as usize % TENANTS.len()].into(),
            at_us: r.at_us,
            prompt_len: r.prompt_len,
            abort_after_us: r.abort_after_us,
            faults: r.faults.clone(),
            reenters: r.reenters,
        })
        .collect()
}

/// The case a receipt records, or why it cannot be one.
pub fn case_from_requests(
    requests: &[kvw_evidence::scenario::FuzzRequest],
) -> Result<Case, String> {
    let mut out = Vec::new();
    for r in requests {
        let tenant = TENANTS
            .iter()
            .position(|t| *t == r.tenant)
            .ok_or_else(|| format!("unknown tenant {:?}", r.tenant))? as u8;
        if !(1..=4096).contains(&r.prompt_len) {
            return Err(format!("prompt length {} out of range", r.prompt_len));
        }
        out.push(CaseRequest {
            tenant,
            at_us: r.at_us,
            prompt_len: r.prompt_len,
            abort_after_us: r.abort_after_us,
            faults: r.faults.clone(),
            reenters: r.reenters,
        });
    }
    Ok(Case { requests: out })
}

/// The counterexample of a shrunk failing case, run again to record its events.
pub fn counterexample(
    run: u64,
    original: &Case,
    shrunk: &Case,
    fixes: &[Fix],
) -> Option<kvw_evidence::scenario::FuzzCounterexample> {
    let plain = run_case(shrunk, fixes);
    let v = plain.violation?;
    // Run it once more picturing the request that broke the invariant, so
    // the replay can draw its pages; the events are the plain run's.
    let again = run_case_pictured(shrunk, fixes, Some(v.request as usize));
    let rid = again
        .requests
        .get(v.request as usize)
        .map(|r| r.rid.clone())
        .unwrap_or_default();
    Some(kvw_evidence::scenario::FuzzCounterexample {
        run,
        original_requests: original.requests.len() as u32,
        requests: case_requests(shrunk),
        invariant: v.invariant.name().into(),
        rid,
        at_event: v.at_event as u64,
        detail: v.detail,
        run_requests: again.requests,
        trace_sha256: kvw_evidence::scenario::events_sha256(&plain.events),
        pages: again
            .pictures
            .into_iter()
            .map(|(i, view)| kvw_evidence::scenario::EventPages {
                event: i as u32,
                view,
            })
            .collect(),
        events: plain.events,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picturing_a_request_changes_no_event() {
        let case = (0..200)
            .map(|i| generate(2026, i))
            .find(|c| run_case(c, &[]).violation.is_some())
            .expect("a violating case without fixes");
        let plain = run_case(&case, &[]);
        let v = plain.violation.as_ref().unwrap();
        let pictured = run_case_pictured(&case, &[], Some(v.request as usize));
        assert_eq!(pictured.events, plain.events);
        assert!(plain.pictures.is_empty());
        assert!(
            !pictured.pictures.is_empty(),
            "the pictured request has pages drawn"
        );
    }

    #[test]
    fn skipping_idle_polls_changes_no_event() {
        let mut stalled = 0;
        for fixes in [&[][..], &Fix::ALL[..]] {
            for i in 0..600 {
                let case = generate(2026, i);
                let skip = run_case_polling(&case, fixes, None, Polling::SkipIdle);
                let every = run_case_polling(&case, fixes, None, Polling::EveryPoll);
                assert_eq!(skip.violation, every.violation, "case {i}");
                assert_eq!(skip.stalled, every.stalled, "case {i}");
                assert_eq!(skip.events, every.events, "case {i}");
                assert_eq!(skip.requests, every.requests, "case {i}");
                stalled += every.stalled as u32;
            }
        }
        assert!(stalled > 10, "lost-ack stalls among the cases: {stalled}");
    }

    #[test]
    fn generation_is_deterministic() {
        assert_eq!(generate(5, 3), generate(5, 3));
        assert_ne!(generate(5, 3), generate(5, 4));
    }
}
