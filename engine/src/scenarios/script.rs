//! Building and running a scenario script, and reading its events.
//!
//! [`Script`] collects arrivals (with their [`Extras`]), client aborts and
//! transfer faults, runs them on [`Sim`] with resource events on, and hands
//! back a [`Ran`] whose helpers answer the questions assertions ask: what a
//! door decided, how often a resource was freed, what the client got.

use kvw_evidence::judged::{Breach, Outcome, StaleWrite, WorkerAnswer};
use kvw_evidence::{
    DoorDecision, DoorName, Event, EventKind, Fix, PoisonMode, ProbeConfig, RequestInfo,
    ResourceAction, ResourceKind, Scale, Worker,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{Observed, Setup};
use crate::arrivals::Arrival;
use crate::attention;
use crate::backend::Backend;
use crate::config::{incident_config, with_prefill_pool, ValidConfig};
use crate::policy::Doors;
use crate::sim::{Extras, Response, Sim};
use crate::transfer::Fault;

/// Seed of every scenario.
pub const SEED: u64 = 2026;

/// A scenario script.
pub struct Script {
    pub config: ProbeConfig,
    pub doors: Doors,
    arrivals: Vec<(Arrival, Extras)>,
    aborts: Vec<(u64, u32)>,
    faults: Vec<(u32, Fault)>,
    rng: ChaCha8Rng,
    /// Tokens each later request generates.
    pub new_tokens: u32,
}

impl Script {
    /// Walkthrough scale (page size 16, decode pool 256 tokens), prefill
    /// pool 256 tokens so that ordinary prompts are admissible.
    pub fn new(setup: &Setup) -> Self {
        Self::with_prefill_pool(setup, 256)
    }

    /// As [`Script::new`] with another prefill pool (112 tokens: the
    /// walkthrough's input cap of 106 tokens).
    pub fn with_prefill_pool(setup: &Setup, tokens: u64) -> Self {
        let base = incident_config(Scale::Walkthrough, &setup.fixes, PoisonMode::Off, SEED)
            .and_then(|c| with_prefill_pool(c, tokens))
            .map(ValidConfig::into_inner);
        // The walkthrough preset with a page-aligned pool always validates.
        let config = base.unwrap_or_else(|_| unreachable_config());
        Script {
            config,
            doors: setup.doors,
            arrivals: Vec::new(),
            aborts: Vec::new(),
            faults: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(SEED),
            new_tokens: 8,
        }
    }

    /// Set the decode pool (112 tokens makes decode's own cap reject 128).
    pub fn decode_pool(mut self, tokens: u64) -> Self {
        self.config.decode_pool_tokens = tokens;
        self
    }

    /// A request of `tenant` with a `len`-token prompt at `at_us`; returns its index.
    pub fn request(&mut self, tenant: &str, at_us: u64, len: usize, extras: Extras) -> u32 {
        let canary = attention::canary(tenant, &mut self.rng);
        let prompt = attention::document(tenant, &canary, len, &mut self.rng);
        let i = self.arrivals.len() as u32;
        self.arrivals.push((
            Arrival {
                at_us,
                tenant: tenant.into(),
                prompt,
                canary,
                max_new_tokens: self.new_tokens,
                probed: i == 0,
            },
            extras,
        ));
        i
    }

    /// The prompt of request `i`.
    pub fn prompt(&self, i: u32) -> &[u32] {
        &self.arrivals[i as usize].0.prompt
    }

    /// The extras of request `i`.
    pub fn extras_mut(&mut self, i: u32) -> &mut Extras {
        &mut self.arrivals[i as usize].1
    }

    pub fn abort(&mut self, at_us: u64, req: u32) {
        self.aborts.push((at_us, req));
    }

    pub fn fault(&mut self, req: u32, fault: Fault) {
        self.faults.push((req, fault));
    }

    /// Run the script to the end.
    pub fn run(self) -> Ran {
        let backend = Backend::Cpu;
        let (arrivals, extras): (Vec<_>, Vec<_>) = self.arrivals.into_iter().unzip();
        let mut sim = Sim::new(self.config, arrivals, &backend);
        sim.doors = self.doors;
        sim.resource_events = true;
        for (entry, extras) in sim.entries.iter_mut().zip(extras) {
            entry.extras = extras;
        }
        for (req, fault) in self.faults {
            let room = sim.entries[req as usize].room;
            sim.channel.inject(room, fault);
        }
        for (at, req) in self.aborts {
            sim.client_abort(at, req);
        }
        sim.run();
        // Late writes and acks after the last answer still count.
        sim.quiesce();
        Ran::from_sim(&sim)
    }
}

fn unreachable_config() -> ProbeConfig {
    // Only reached if the walkthrough preset itself stopped validating.
    panic!("the walkthrough preset no longer validates")
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct Ran {
    pub events: Vec<Event>,
    /// Request index of each event.
    pub owners: Vec<u32>,
    pub requests: Vec<RequestInfo>,
    pub responses: Vec<Option<Response>>,
    pub prompts: Vec<Vec<u32>>,
    /// `(request, page)` of writes that landed outside their owner's pages.
    pub stale_writes: Vec<(u32, u32)>,
    pub double_frees: u32,
    /// `(request, worker)` of releases that gave pages back without their
    /// drain ack (the deferred release timed out).
    pub released_unacked: Vec<(u32, Worker)>,
    /// Page pictures of the first request, keyed by event index.
    pub pictures: Vec<(usize, kvw_evidence::PageView)>,
}

impl Ran {
    pub fn from_sim(sim: &Sim) -> Ran {
        Ran {
            events: sim.trace.events.clone(),
            owners: sim.trace.requests.clone(),
            requests: sim.entries.iter().map(|e| e.info()).collect(),
            responses: sim.entries.iter().map(|e| e.response.clone()).collect(),
            prompts: sim
                .entries
                .iter()
                .map(|e| e.arrival.prompt.clone())
                .collect(),
            stale_writes: sim.stale_writes.clone(),
            double_frees: sim.counters.double_frees,
            released_unacked: sim.released_unacked.clone(),
            pictures: sim.trace.pictures.clone(),
        }
    }

    /// Events of request `req`, with their index.
    pub fn of(&self, req: u32) -> impl Iterator<Item = (usize, &EventKind)> {
        self.events
            .iter()
            .zip(&self.owners)
            .enumerate()
            .filter(move |(_, (_, &o))| o == req)
            .map(|(i, (e, _))| (i, &e.kind))
    }

    /// How many events of `req` match.
    pub fn count(&self, req: u32, f: impl Fn(&EventKind) -> bool) -> usize {
        self.of(req).filter(|(_, k)| f(k)).count()
    }

    /// The first decision of door `door` for `req`, with `to_finish` as read.
    pub fn door(
        &self,
        req: u32,
        door: DoorName,
    ) -> Option<(DoorDecision, Option<kvw_evidence::FinishReason>)> {
        self.of(req).find_map(|(_, k)| match k {
            EventKind::Door {
                door: d,
                decision,
                state,
                ..
            } if *d == door => Some((*decision, state.to_finish.clone())),
            _ => None,
        })
    }

    /// Resource events of `req` on prefill for `kind` with `action`.
    pub fn resource(&self, req: u32, kind: ResourceKind, action: ResourceAction) -> usize {
        self.resource_on(req, Worker::Prefill, kind, action)
    }

    /// Resource events of `req` on `worker` for `kind` with `action`.
    pub fn resource_on(
        &self,
        req: u32,
        worker: Worker,
        kind: ResourceKind,
        action: ResourceAction,
    ) -> usize {
        self.count(req, |k| {
            matches!(k, EventKind::Resource { worker: w, resource, action: a, .. }
                if *w == worker && *resource == kind && *a == action)
        })
    }

    /// Worker answers of `req` by `worker`.
    pub fn answers(&self, req: u32, worker: Worker) -> Vec<WorkerAnswer> {
        self.of(req)
            .filter_map(|(_, k)| match k {
                EventKind::WorkerAnswer {
                    worker: w,
                    status,
                    finish_reason,
                } if *w == worker => Some(WorkerAnswer {
                    status: *status,
                    finish_reason: finish_reason.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    /// The request id of request `req`, as its events name it.
    pub fn rid(&self, req: u32) -> String {
        self.requests
            .get(req as usize)
            .map(|r| r.rid.clone())
            .unwrap_or_default()
    }

    /// Writes that landed outside their owner's pages, by writer id.
    pub fn stale(&self) -> Vec<StaleWrite> {
        self.stale_writes
            .iter()
            .map(|&(req, page)| StaleWrite {
                rid: self.rid(req),
                page,
            })
            .collect()
    }

    /// Whether request `req` had an event of this kind on `worker`.
    pub fn bootstrapped(&self, req: u32, worker: Worker) -> bool {
        self.count(
            req,
            |k| matches!(k, EventKind::Bootstrap { worker: w, .. } if *w == worker),
        ) > 0
    }

    /// Page releases of `req` on `worker` that freed pages (not deferrals).
    pub fn frees(&self, req: u32, worker: Worker) -> usize {
        self.count(
            req,
            |k| matches!(k, EventKind::Release { worker: w, deferred: false, .. } if *w == worker),
        )
    }

    /// `send_kv_chunk` calls of `req`.
    pub fn sends(&self, req: u32) -> usize {
        self.count(req, |k| matches!(k, EventKind::KvSend { .. }))
    }

    /// The client's status for `req`.
    pub fn status(&self, req: u32) -> Option<u16> {
        self.responses[req as usize].as_ref().map(|r| r.status)
    }

    /// The answer a correct engine gives request `req` (its own prompt echoed).
    pub fn want(&self, req: u32, new_tokens: usize) -> String {
        let p = &self.prompts[req as usize];
        attention::decode(&p[1..=new_tokens.min(p.len() - 1)])
    }

    /// Request `req` was answered 200 with its own text (its first
    /// `new_tokens` tokens echoed); the status, or the breach.
    pub fn own_text(&self, req: u32, new_tokens: usize) -> Result<u16, Breach> {
        let want = self.want(req, new_tokens);
        let got = self.responses[req as usize].as_ref();
        match got {
            Some(g) if g.status == 200 && g.text == want => Ok(g.status),
            _ => Err(Breach::NotOwnText {
                rid: self.rid(req),
                status: got.map(|g| g.status),
            }),
        }
    }

    /// Pages decode attention read that another request wrote.
    pub fn foreign_reads(&self, req: u32) -> u64 {
        self.of(req)
            .map(|(_, k)| match k {
                EventKind::Attend { foreign_pages, .. } => *foreign_pages,
                _ => 0,
            })
            .sum()
    }

    /// Turn into an [`Observed`] with this verdict.
    pub fn observed(self, verdict: Result<Outcome, Breach>) -> Observed {
        Observed {
            events: self.events,
            requests: self.requests,
            pictures: self.pictures,
            verdict,
        }
    }
}

/// Fail the assertion with `breach` (a [`Breach`]) unless `cond` holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $breach:expr) => {
        if !$cond {
            return Err($breach);
        }
    };
}

/// Whether a switch is on in a setup.
pub fn on(setup: &Setup, f: Fix) -> bool {
    setup.fixes.contains(&f)
}

/// Judge a finished run with `check`.
pub fn judge(ran: Ran, check: impl FnOnce(&Ran) -> Result<Outcome, Breach>) -> Observed {
    let verdict = check(&ran);
    ran.observed(verdict)
}
