//! The discrete-event simulator of a 1P1D cluster.
//!
//! A router, one prefill worker and one decode worker exchange messages over
//! a virtual clock; KV moves through a [`TransferChannel`]. Each worker runs
//! iterations of its event loop the way SGLang's disaggregated schedulers do
//! (`event_loop_normal_disagg_prefill` / `..._decode`): take in requests,
//! pass them through the queue doors, run a batch, process the result. All
//! decisions come from [`crate::policy`]. Same config and seed → the same
//! events at the same virtual microseconds, bit for bit.

mod decode;
pub mod extras;
pub mod fork;
mod idle;
pub mod lookahead;
pub mod null_mode;
mod prefill;
mod queue;
mod release;
pub mod remote;
mod settle;

use kvw_evidence::{
    Counters, EventKind, Fix, PageRun, PageView, PoisonMode, PoolSide, ProbeConfig, Worker,
    WriterClass,
};
use kvw_kernels::KvLayout;

use crate::arrivals::Arrival;
use crate::attention::HEAD_DIM;
use crate::backend::Backend;
use crate::policy::{Doors, FixSet};
use crate::pool::{KvPool, WriterId};
use crate::req::{validate_input_length, Req};
use crate::slots::SlotPool;
use crate::trace::{ranges, Trace};
use crate::transfer::TransferChannel;

pub use decode::DecodeWorker;
pub use extras::{Extras, Reentry, SamplingMask};
pub use prefill::PrefillWorker;
pub use remote::{Role, Wire};
pub use settle::Retained;

/// Size of each worker's metadata buffer and Mamba slot pools (model
/// assumption: upstream sizes them from `max_running_requests`; only
/// exhaustion, never reached by the probes, would depend on it).
pub const SLOTS: u32 = 64;

/// Message of a client's abort (upstream `AbortReq`).
pub const ABORT_MESSAGE: &str = "Aborted by AbortReq.";

/// Virtual costs (microseconds). Model assumptions; only their order matters.
pub mod cost {
    /// Stop the run after this much virtual time.
    pub const HORIZON_US: u64 = 3_600_000_000;

    /// Hop and step costs in virtual microseconds. Model assumptions: they
    /// order events and never decide an outcome (a test scales them and
    /// checks that every outcome stays).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Costs {
        /// Router → prefill hop.
        pub hop_prefill_us: u64,
        /// Router → decode hop (decode is busy with its running batch).
        pub hop_decode_us: u64,
        /// Worker → router and router → client hops.
        pub hop_back_us: u64,
        /// Fixed cost of a prefill forward.
        pub prefill_fixed_us: u64,
        /// Prefill throughput: tokens per microsecond.
        pub prefill_tokens_per_us: u64,
        /// One decode step of the running batch.
        pub decode_step_us: u64,
        /// Latency of a page write on the transfer channel.
        pub write_latency_us: u64,
        /// Extra latency per page of a chunk.
        pub write_per_page_us: u64,
    }

    impl Default for Costs {
        fn default() -> Self {
            Costs {
                hop_prefill_us: 100,
                hop_decode_us: 1_000,
                hop_back_us: 100,
                prefill_fixed_us: 2_000,
                prefill_tokens_per_us: 50,
                decode_step_us: 20_000,
                write_latency_us: 500,
                write_per_page_us: 1,
            }
        }
    }
}

/// A request of the run as the cluster knows it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub arrival: Arrival,
    pub rid: String,
    pub room: u64,
    /// Prefill's answer to the router: status and finish reason.
    pub prefill_answer: Option<(u16, String)>,
    /// Decode's answer to the router.
    pub decode_answer: Option<Response>,
    /// What the client received.
    pub response: Option<Response>,
    /// What a scenario script adds to the request.
    pub extras: Extras,
}

impl Entry {
    /// The request as a receipt lists it.
    pub fn info(&self) -> kvw_evidence::RequestInfo {
        kvw_evidence::RequestInfo {
            rid: self.rid.clone(),
            tenant: self.arrival.tenant.clone(),
            prompt_len: self.arrival.prompt.len() as u64,
            canary: self.arrival.canary.clone(),
            arrival_us: self.arrival.at_us,
            probed: self.arrival.probed,
        }
    }

    /// The request as a worker receives it from the router.
    pub fn req(&self) -> Req {
        Req::new(
            &self.rid,
            &self.arrival.tenant,
            self.arrival.prompt.clone(),
            self.arrival.max_new_tokens,
            self.room,
        )
    }

    /// The request as worker `prefill` (or decode) builds it, with the
    /// script's re-entry markers and session applied.
    pub fn req_on(&self, prefill: bool) -> Req {
        let mut req = self.req();
        self.extras.apply(&mut req, prefill);
        req
    }
}

/// An answer: decode's to the router, or the router's to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub text: String,
    pub at_us: u64,
    pub output_ids: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Msg {
    Arrive(u32),
    ToPrefill(u32),
    ToDecode(u32),
    PrefillAnswer {
        req: u32,
        status: u16,
        finish_reason: String,
    },
    DecodeAnswer {
        req: u32,
        status: u16,
        text: String,
        output_ids: Vec<u32>,
    },
    ClientGets(u32),
    ClientAbort(u32),
    PrefillTick,
    DecodeTick,
    Land,
}

/// The probed request's bookkeeping shared by both workers.
#[derive(Debug, Clone, Default)]
pub struct ProbeMarks {
    pub reserved: Vec<u32>,
    pub transferred: Vec<u32>,
    pub read: Vec<u32>,
    /// Distinct foreign pages seen across all decode steps.
    pub foreign_seen: std::collections::BTreeSet<u32>,
}

/// The whole cluster.
pub struct Sim<'b> {
    /// Where decode attention runs.
    pub backend: &'b Backend,
    pub now: u64,
    pub config: ProbeConfig,
    /// The switches that are on; read only through [`Sim::fix`] and
    /// [`Sim::decide`], so that a shared warm-up knows what it consulted.
    fixes: FixSet,
    /// Set while this run is a warm-up other runs will continue from.
    watch: Option<fork::Watch>,
    pub layout: KvLayout,
    pub prefill_pool: KvPool,
    pub decode_pool: KvPool,
    pub channel: TransferChannel,
    pub entries: Vec<Entry>,
    pub trace: Trace,
    pub counters: Counters,
    pub marks: ProbeMarks,
    /// Hop and step costs.
    pub costs: cost::Costs,
    /// The finer door and cleanup rules (upstream's unless a test swaps one).
    pub doors: Doors,
    /// Stop after this much virtual time ([`cost::HORIZON_US`] unless set).
    pub horizon_us: u64,
    /// Record [`kvw_evidence::EventKind::Resource`] events (scenario and
    /// fuzz runs; probe v2 receipts predate them).
    pub resource_events: bool,
    /// Send a prefill poll that changed nothing straight past the polls
    /// that cannot change anything either (module `idle`); off, it polls
    /// again one poll period later. Same events either way. Only for a run
    /// with resource events whose messages are all queued from inside (not
    /// the live engine or a split pair, which add arrivals as they come).
    pub skip_idle_polls: bool,
    /// Metadata buffer indices of prefill and decode, indexed by `PoolSide`.
    pub metadata: [SlotPool; 2],
    /// Mamba state slots of prefill.
    pub mamba: SlotPool,
    /// Streaming sessions and the request holding each one's active slot.
    pub sessions: std::collections::BTreeMap<String, Option<u32>>,
    /// Request each decode page is handed to (`None` when free).
    pub decode_owner: Vec<Option<u32>>,
    /// Request each prefill page is handed to.
    pub prefill_owner: Vec<Option<u32>>,
    /// Page writes that landed in a decode page not handed to their writer,
    /// or copied a prefill page no longer held by it: (request, page).
    pub stale_writes: Vec<(u32, u32)>,
    /// `(request, worker)` of each release that gave pages back without
    /// their drain ack because the deferral timed out
    /// ([`crate::policy::Release::TimedOut`]).
    pub released_unacked: Vec<(u32, Worker)>,
    /// Prompt tokens of a request whose KV a prefix cache already holds
    /// (set by [`crate::live`]); prefill charges no forward time for them.
    pub prefill_cached: std::collections::BTreeMap<u32, usize>,
    /// Deferred releases, indexed by `PoolSide as usize`.
    deferred: [Vec<release::Deferred>; 2],
    prefill: PrefillWorker,
    decode: DecodeWorker,
    queue: queue::EventQueue<Msg>,
    prefill_tick_at: Option<u64>,
    /// The latest successor an idle prefill poll scheduled since the last
    /// message that was not one ([`Sim::skip_idle_polls`]).
    idle_latest: Option<u64>,
    decode_tick_at: Option<u64>,
    /// This process's worker when the pair is split across processes
    /// ([`remote`]); `None` runs both.
    role: Option<Role>,
    /// Messages for the peer process, taken by [`Sim::take_outbox`].
    outbox: Vec<Wire>,
    /// Request of each bootstrap room.
    room_index: std::collections::HashMap<u64, u32>,
}

impl<'b> Sim<'b> {
    pub fn new(config: ProbeConfig, arrivals: Vec<Arrival>, backend: &'b Backend) -> Self {
        Self::with_costs(config, arrivals, backend, cost::Costs::default())
    }

    /// A cluster with other hop and step costs.
    pub fn with_costs(
        config: ProbeConfig,
        arrivals: Vec<Arrival>,
        backend: &'b Backend,
        costs: cost::Costs,
    ) -> Self {
        let layout = KvLayout {
            page_size: config.page_size as usize,
            num_kv_heads: 1,
            head_dim: HEAD_DIM,
        };
        let ps = config.page_size as u64;
        let prefill_pool = KvPool::new(
            layout,
            (config.prefill_pool_tokens / ps) as usize,
            config.free_list,
        );
        let decode_pool = KvPool::new(
            layout,
            (config.decode_pool_tokens / ps) as usize,
            config.free_list,
        );
        let fixes = FixSet::new(&config.fixes);
        let mut counts = std::collections::BTreeMap::<String, u32>::new();
        let entries = arrivals
            .into_iter()
            .enumerate()
            .map(|(i, a)| {
                let n = counts.entry(a.tenant.clone()).or_default();
                *n += 1;
                Entry {
                    rid: format!("{}-{}", a.tenant, n),
                    room: 1000 + i as u64,
                    arrival: a,
                    prefill_answer: None,
                    decode_answer: None,
                    response: None,
                    extras: Extras::default(),
                }
            })
            .collect::<Vec<_>>();
        let decode_pages = decode_pool.pages_total();
        let prefill_pages = prefill_pool.pages_total();
        let mut sim = Sim {
            doors: Doors::SHIPPED,
            horizon_us: cost::HORIZON_US,
            resource_events: false,
            skip_idle_polls: false,
            metadata: [SlotPool::new(SLOTS), SlotPool::new(SLOTS)],
            mamba: SlotPool::new(SLOTS),
            sessions: Default::default(),
            decode_owner: vec![None; decode_pages],
            prefill_owner: vec![None; prefill_pages],
            stale_writes: Vec::new(),
            released_unacked: Vec::new(),
            backend,
            now: 0,
            prefill: PrefillWorker::new(&config),
            decode: DecodeWorker::default(),
            config,
            fixes,
            watch: None,
            layout,
            prefill_pool,
            decode_pool,
            channel: TransferChannel::new(costs.write_latency_us, costs.write_per_page_us),
            costs,
            prefill_cached: Default::default(),
            entries,
            trace: Trace::new(),
            counters: Counters::default(),
            marks: ProbeMarks::default(),
            deferred: [Vec::new(), Vec::new()],
            queue: queue::EventQueue::new(),
            prefill_tick_at: None,
            idle_latest: None,
            decode_tick_at: None,
            role: None,
            outbox: Vec::new(),
            room_index: Default::default(),
        };
        for i in 0..sim.entries.len() {
            let at = sim.entries[i].arrival.at_us;
            sim.room_index.insert(sim.entries[i].room, i as u32);
            sim.send(at, Msg::Arrive(i as u32));
        }
        sim
    }

    /// Index of the probed request.
    pub fn probed(&self) -> Option<u32> {
        self.entries
            .iter()
            .position(|e| e.arrival.probed)
            .map(|i| i as u32)
    }

    pub fn is_probed(&self, req: u32) -> bool {
        self.entries[req as usize].arrival.probed
    }

    /// Whether switch `f` is on. Ask only where the answer matters: a
    /// shared warm-up counts every call for a switch it watches as
    /// depending on it ([`fork`]).
    pub fn fix(&self, f: Fix) -> bool {
        if let Some(watch) = &self.watch {
            watch.consulted(f);
        }
        self.fixes.has(f)
    }

    /// Whether switch `f` is on, where it can change something only if
    /// `matters()`: a shared warm-up counts the call as depending on a
    /// switch it watches only then.
    pub fn fix_where(&self, f: Fix, matters: impl FnOnce() -> bool) -> bool {
        if let Some(watch) = &self.watch {
            if watch.watches(f) && matters() {
                watch.consulted(f);
            }
        }
        self.fixes.has(f)
    }

    /// The switches that are on, for code outside the run that has its own
    /// copy of them (a live engine reporting its configuration).
    pub fn fixes(&self) -> FixSet {
        self.fixes
    }

    /// A decision that reads the switches: `decide(switches on)`. A shared
    /// warm-up also takes it with every combination of the switches it
    /// watches turned on, and counts a different answer as depending on
    /// them ([`fork`]).
    pub fn decide<T: PartialEq>(&self, decide: impl Fn(FixSet) -> T) -> T {
        let answer = decide(self.fixes);
        if let Some(watch) = &self.watch {
            watch.compare(self.fixes, &answer, decide);
        }
        answer
    }

    pub fn poison_mode(&self) -> PoisonMode {
        self.config.poison_on_free
    }

    fn send(&mut self, at: u64, msg: Msg) {
        self.queue.push(at, msg);
    }

    pub(super) fn wake_prefill(&mut self, at: u64) {
        if self.prefill_tick_at.is_none_or(|t| at < t) {
            self.prefill_tick_at = Some(at);
            self.send(at, Msg::PrefillTick);
        }
    }

    fn wake_decode(&mut self, at: u64) {
        if self.decode_tick_at.is_none_or(|t| at < t) {
            self.decode_tick_at = Some(at);
            self.send(at, Msg::DecodeTick);
        }
    }

    /// Record an event of request `req` now; returns its index.
    pub fn record(&mut self, req: u32, kind: EventKind) -> usize {
        let rid = &self.entries[req as usize].rid;
        self.trace.record(req, rid, self.now, kind)
    }

    /// The scheduler's input-length check on `worker`
    /// ([`validate_input_length`], `handle_generate_request` upstream),
    /// recorded as an event; a prompt at or over `cap` is aborted with 400,
    /// finished only when a door or the next update looks at it.
    pub fn check_input(&mut self, i: u32, req: &mut Req, worker: Worker, cap: u64) {
        let input_len = req.input_len();
        let rejection = validate_input_length(input_len, cap);
        self.record(
            i,
            EventKind::InputCheck {
                worker,
                input_len: input_len as u64,
                cap,
                rejected: rejection.is_some(),
            },
        );
        if let Some(msg) = rejection {
            req.set_finish_with_abort(&msg, 400);
        }
    }

    /// Record an event and, for the probed request, the picture of `side`.
    pub fn record_with_picture(&mut self, req: u32, kind: EventKind, side: PoolSide) {
        let i = self.record(req, kind);
        if self.is_probed(req) {
            let view = self.page_view(side);
            self.trace.picture(i, view);
        }
    }

    /// Admit one more request arriving at `arrival.at_us` (no earlier than
    /// now): the live engine's door into a running cluster. Returns its index.
    pub fn admit(&mut self, arrival: Arrival) -> u32 {
        let room = 1000 + self.entries.len() as u64;
        self.admit_to_room(arrival, room)
    }

    /// [`Sim::admit`] into the bootstrap room the router chose (a worker of
    /// a split pair: both workers must name the request by the same room).
    /// The caller makes sure no live request holds `room`.
    pub fn admit_to_room(&mut self, arrival: Arrival, room: u64) -> u32 {
        let i = self.entries.len() as u32;
        let at = arrival.at_us.max(self.now);
        self.room_index.insert(room, i);
        self.entries.push(Entry {
            rid: format!("{}-{}", arrival.tenant, i + 1),
            room,
            arrival,
            prefill_answer: None,
            decode_answer: None,
            response: None,
            extras: Extras::default(),
        });
        self.send(at, Msg::Arrive(i));
        i
    }

    /// Handle every event due at or before `t`, then stand at `t`.
    pub fn run_until(&mut self, t: u64) {
        while self.queue.next_at().is_some_and(|at| at <= t) {
            let Some((at, msg)) = self.queue.pop() else {
                break;
            };
            self.now = at;
            self.handle(msg);
        }
        self.now = self.now.max(t);
    }

    /// When the next event is due, if any.
    pub fn next_event_at(&self) -> Option<u64> {
        self.queue.next_at()
    }

    /// Run until every request has its answer or the horizon passes.
    pub fn run(&mut self) {
        while self.step() {}
    }

    /// Handle the next message; false once every request has its answer,
    /// nothing is left to do or the horizon passed. Callers that check
    /// invariants after every event loop on this.
    pub fn step(&mut self) -> bool {
        let Some((at, msg)) = self.queue.pop() else {
            return false;
        };
        if at > self.horizon_us {
            return false;
        }
        self.now = at;
        self.handle(msg);
        !self.entries.iter().all(|e| e.response.is_some())
    }

    /// Handle what is left after the last answer (writes still in flight,
    /// drain acks, deferred releases) until nothing is, or the horizon.
    pub fn quiesce(&mut self) {
        while let Some((at, msg)) = self.queue.pop() {
            if at > self.horizon_us {
                break;
            }
            self.now = at;
            self.handle(msg);
        }
    }

    /// The client of request `req` aborts it at `at` (upstream
    /// `abort_request`: the router tells both workers).
    pub fn client_abort(&mut self, at: u64, req: u32) {
        self.send(at, Msg::ClientAbort(req));
    }

    /// Record a resource event when resource events are on.
    pub fn resource(
        &mut self,
        req: u32,
        worker: Worker,
        resource: kvw_evidence::ResourceKind,
        action: kvw_evidence::ResourceAction,
        index: u64,
    ) {
        if self.resource_events {
            self.record(
                req,
                EventKind::Resource {
                    worker,
                    resource,
                    action,
                    index,
                },
            );
        }
    }

    /// Give back the streaming-session slot `req` holds (the scheduler's
    /// normal cleanup, or a retirement's detach).
    pub fn session_release(&mut self, req: u32, action: kvw_evidence::ResourceAction) {
        let Some((id, true)) = self.entries[req as usize].extras.session.clone() else {
            return;
        };
        if let Some(holder) = self.sessions.get_mut(&id) {
            if *holder == Some(req) {
                *holder = None;
                self.resource(
                    req,
                    Worker::Prefill,
                    kvw_evidence::ResourceKind::SessionSlot,
                    action,
                    0,
                );
            }
        }
    }

    fn handle(&mut self, msg: Msg) {
        let idle_latest = self.idle_latest.take();
        match msg {
            Msg::Arrive(i) => {
                if !self.session_admit(i) {
                    return;
                }
                let prompt_len = self.entries[i as usize].arrival.prompt.len() as u64;
                let room = self.entries[i as usize].room;
                self.record(i, EventKind::Dispatch { prompt_len, room });
                if self.role != Some(Role::Decode) {
                    self.send(self.now + self.costs.hop_prefill_us, Msg::ToPrefill(i));
                }
                if self.role != Some(Role::Prefill) {
                    self.send(self.now + self.costs.hop_decode_us, Msg::ToDecode(i));
                }
            }
            Msg::ToPrefill(i) => {
                prefill::receive(self, i);
                self.wake_prefill(self.now);
            }
            Msg::ToDecode(i) => {
                decode::receive(self, i);
                self.wake_decode(self.now);
            }
            Msg::PrefillTick => {
                self.prefill_tick_at = None;
                let recorded = self.trace.events.len();
                let quiet = prefill::quiet(self);
                let next = prefill::tick(self);
                let idle = self.skip_idle_polls
                    && self.resource_events
                    && quiet
                    && self.trace.events.len() == recorded;
                match next {
                    Some(at) if idle => {
                        let at = self.idle_poll_successor(at);
                        self.wake_prefill(at);
                        let latest = idle_latest.map_or(at, |l| l.max(at));
                        self.prefill_tick_at = Some(latest);
                        self.idle_latest = Some(latest);
                    }
                    Some(at) => self.wake_prefill(at),
                    None => {}
                }
            }
            Msg::DecodeTick => {
                self.decode_tick_at = None;
                let next = decode::tick(self);
                if let Some(at) = next {
                    self.wake_decode(at);
                }
            }
            Msg::Land => self.land(),
            Msg::ClientAbort(i) => {
                if self.entries[i as usize].response.is_some() {
                    return;
                }
                self.record(
                    i,
                    EventKind::Abort {
                        worker: Worker::Client,
                        status: 503,
                        message: ABORT_MESSAGE.into(),
                    },
                );
                prefill::client_abort(self, i);
                decode::client_abort(self, i);
                self.wake_prefill(self.now);
                self.wake_decode(self.now);
            }
            Msg::PrefillAnswer {
                req,
                status,
                finish_reason,
            } => {
                self.entries[req as usize].prefill_answer = Some((status, finish_reason));
                self.router_combine(req);
            }
            Msg::DecodeAnswer {
                req,
                status,
                text,
                output_ids,
            } => {
                self.entries[req as usize].decode_answer = Some(Response {
                    status,
                    text,
                    at_us: self.now,
                    output_ids,
                });
                self.router_combine(req);
            }
            Msg::ClientGets(req) => {
                let Some(mut answer) = self.entries[req as usize].decode_answer.clone() else {
                    return;
                };
                answer.at_us = self.now;
                self.record(
                    req,
                    EventKind::Response {
                        status: answer.status,
                        text: answer.text.clone(),
                    },
                );
                self.entries[req as usize].response = Some(answer);
            }
        }
    }

    /// `create_req` on a streaming session marks it in flight; a session
    /// whose active slot is still held fails the new request with 400.
    /// Returns whether the request goes on.
    fn session_admit(&mut self, i: u32) -> bool {
        let Some((id, true)) = self.entries[i as usize].extras.session.clone() else {
            return true;
        };
        let holder = self.sessions.entry(id.clone()).or_default();
        if holder.is_some() {
            let text = format!("session {id} already has a request in flight");
            self.record(
                i,
                EventKind::Abort {
                    worker: Worker::Router,
                    status: 400,
                    message: text.clone(),
                },
            );
            self.record(
                i,
                EventKind::Response {
                    status: 400,
                    text: text.clone(),
                },
            );
            self.entries[i as usize].response = Some(Response {
                status: 400,
                text,
                at_us: self.now,
                output_ids: Vec::new(),
            });
            return false;
        }
        *holder = Some(i);
        self.resource(
            i,
            Worker::Prefill,
            kvw_evidence::ResourceKind::SessionSlot,
            kvw_evidence::ResourceAction::Allocate,
            0,
        );
        true
    }

    /// The PD router waits for both workers' answers and returns decode's
    /// (see [`crate::policy::router_answer`]).
    /// A worker of a split pair answers with its own answer: the router in
    /// front of it decides what the client gets.
    fn router_combine(&mut self, req: u32) {
        let e = &mut self.entries[req as usize];
        match self.role {
            Some(Role::Prefill) if e.response.is_none() => {
                e.response = e.prefill_answer.as_ref().map(|(status, text)| Response {
                    status: *status,
                    text: text.clone(),
                    at_us: self.now,
                    output_ids: Vec::new(),
                });
                return;
            }
            Some(Role::Decode) if e.response.is_none() => {
                e.response = e.decode_answer.clone();
                return;
            }
            Some(_) => return,
            None => {}
        }
        let answered = crate::policy::router_answer(
            e.prefill_answer.as_ref().map(|a| a.0),
            e.decode_answer.as_ref().map(|a| a.status),
        );
        if answered.is_some() && e.response.is_none() {
            self.send(self.now + self.costs.hop_back_us, Msg::ClientGets(req));
        }
    }

    /// Post page writes and schedule their landing.
    pub fn schedule_landings(&mut self) {
        if let Some(at) = self.channel.next_landing() {
            self.send(at.max(self.now), Msg::Land);
        }
    }

    /// Apply writes that landed: copy prefill page bytes into decode pages.
    fn land(&mut self) {
        let landed = self.channel.take_landed(self.now);
        if landed.is_empty() {
            return;
        }
        if self.role == Some(Role::Prefill) {
            self.ship(&landed);
        } else {
            self.copy_landed(&landed);
        }
        if self.doors.ack_cleared_room {
            for (room, peer) in self.channel.ack_cleared(self.ack_rules()) {
                self.record_ack(room, peer);
            }
        }
        self.schedule_landings();
        self.wake_prefill(self.now);
        self.wake_decode(self.now);
    }

    /// Landed writes within one process: prefill page bytes into decode pages.
    fn copy_landed(&mut self, landed: &[crate::transfer::PageWrite]) {
        for w in landed {
            let dst_owner = self
                .decode_owner
                .get(w.dst_page as usize)
                .copied()
                .flatten();
            let src_owner = self
                .prefill_owner
                .get(w.src_page as usize)
                .copied()
                .flatten();
            if dst_owner != Some(w.writer.req) || src_owner != Some(w.writer.req) {
                self.stale_writes.push((w.writer.req, w.dst_page));
            }
            // Disjoint fields: copy straight from one pool into the other.
            self.prefill_pool.settle(&[w.src_page]);
            let bytes = self.prefill_pool.page_bytes(w.src_page);
            self.decode_pool.write_page(w.dst_page, bytes, w.writer);
            if self.probed() == Some(w.writer.req) {
                self.marks.transferred.push(w.dst_page);
            }
        }
        let mut by_req: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
        for w in landed {
            by_req.entry(w.writer.req).or_default().push(w.dst_page);
        }
        for (req, pages) in by_req {
            self.record(
                req,
                EventKind::KvLanded {
                    pages: ranges(&pages),
                    until_us: None,
                },
            );
        }
    }

    /// The drain-ack rules of this run.
    pub fn ack_rules(&self) -> crate::transfer::AckRules {
        crate::transfer::AckRules {
            waits_for_writes: self.doors.ack_waits_for_writes,
            every_peer: self.doors.ack_every_peer,
        }
    }

    /// Decode is done with `room`: its drained peers ack, and under
    /// deferred release the room is closed to the sender.
    pub fn ack(&mut self, room: u64) {
        if self.fix(Fix::DeferredRelease) {
            self.channel.close(room);
            if self.role == Some(Role::Decode) {
                self.outbox.push(Wire::Close { room });
            }
        }
        if self.role == Some(Role::Decode) {
            self.outbox.push(Wire::Ack { room });
        }
        for peer in self.channel.ack_with(room, self.ack_rules()) {
            self.record_ack(room, peer);
        }
    }

    fn record_ack(&mut self, room: u64, peer: u32) {
        if !self.resource_events {
            return;
        }
        if let Some(i) = self.entry_of_room(room) {
            self.record(i, EventKind::DrainAck { room, peer });
        }
    }

    /// Prefill answers the router with a status and finish reason.
    pub fn prefill_answer(&mut self, at: u64, req: u32, status: u16, finish_reason: String) {
        self.record(
            req,
            EventKind::WorkerAnswer {
                worker: Worker::Prefill,
                status,
                finish_reason: finish_reason.clone(),
            },
        );
        self.send(
            at + self.costs.hop_back_us,
            Msg::PrefillAnswer {
                req,
                status,
                finish_reason,
            },
        );
    }

    /// Decode answers the router.
    pub fn decode_answer(
        &mut self,
        at: u64,
        req: u32,
        status: u16,
        text: String,
        output_ids: Vec<u32>,
    ) {
        let finish_reason = if status == 200 {
            "length".to_string()
        } else {
            text.clone()
        };
        self.record(
            req,
            EventKind::WorkerAnswer {
                worker: Worker::Decode,
                status,
                finish_reason,
            },
        );
        self.send(
            at + self.costs.hop_back_us,
            Msg::DecodeAnswer {
                req,
                status,
                text,
                output_ids,
            },
        );
    }

    /// Writer id of a request.
    pub fn writer(&self, req: u32, generation: u32) -> WriterId {
        WriterId { req, generation }
    }

    /// Classify a page writer relative to the probed request.
    pub fn class_of(&self, writer: Option<WriterId>, probed: u32) -> WriterClass {
        match writer {
            None => WriterClass::NeverWritten,
            Some(w) if w.req == probed => WriterClass::ThisRequest,
            Some(w)
                if self.entries[w.req as usize].arrival.tenant
                    == self.entries[probed as usize].arrival.tenant =>
            {
                WriterClass::SameTenant
            }
            Some(_) => WriterClass::OtherTenant,
        }
    }

    /// The page picture of a pool for the probed request.
    pub fn page_view(&self, side: PoolSide) -> PageView {
        let probed = self.probed().unwrap_or(0);
        let pool = match side {
            PoolSide::Prefill => &self.prefill_pool,
            PoolSide::Decode => &self.decode_pool,
        };
        let mut runs: Vec<PageRun> = Vec::new();
        for (p, m) in pool.metas().iter().enumerate() {
            let class = self.class_of(m.writer, probed);
            let writer = m.writer.map(|w| {
                let e = &self.entries[w.req as usize];
                kvw_evidence::Writer {
                    tenant: e.arrival.tenant.clone(),
                    rid: e.rid.clone(),
                    generation: w.generation,
                }
            });
            match runs.last_mut() {
                Some(r) if r.class == class && r.writer == writer => r.count += 1,
                _ => runs.push(PageRun {
                    first: p as u64,
                    count: 1,
                    class,
                    writer,
                }),
            }
        }
        let (reserved, transferred, read) = match side {
            PoolSide::Decode => (
                ranges(&self.marks.reserved),
                ranges(&self.marks.transferred),
                ranges(&self.marks.read),
            ),
            PoolSide::Prefill => (ranges(&self.prefill.pages_of(probed)), vec![], vec![]),
        };
        PageView {
            pool: side,
            pages_total: pool.pages_total() as u64,
            page_size: self.config.page_size,
            runs,
            reserved,
            transferred,
            read,
        }
    }
}
