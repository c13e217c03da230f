//! A long-lived cluster that serves requests as they come, on a real clock.
//!
//! A probe replays a fixed script on a virtual clock; a server cannot: its
//! requests arrive whenever clients send them. [`LiveEngine`] runs the same
//! [`Sim`] — the same `Req`, doors ([`crate::policy`]), paged pools and
//! attention — on its own thread, admits each request the moment it is
//! submitted, and lets the virtual clock follow the wall clock (one virtual
//! microsecond per real one). The pools live as long as the engine, so pages
//! a request frees still hold its tenant's KV when the next request, of any
//! tenant, reuses them; requests in flight together are batched by the
//! prefill and decode workers exactly as in a probe. With the fixes off, a
//! prompt above the prefill pool but within the context is answered 200 with
//! whatever KV decode's reserved pages still hold (the incident); with
//! `retire-unadmitted-reject` it is refused with 400.
//!
//! The optional prefix cache ([`PrefixCacheMode`]) records, per page-aligned
//! block of prompt tokens, a hash of the whole prefix up to that block,
//! scoped to everybody (`shared`), to the tenant (`per-tenant`) and to a
//! per-request `cache_salt` (vLLM's defence, CVE-2025-46570). A request
//! whose leading blocks are in the cache is charged no prefill forward time
//! for them. **model-assumption `prefix-cache-cost`**: the model's K/V of a
//! token is a pure function of its position and id, so the bytes prefill
//! writes for a cached block are the bytes the cache holds; what a hit saves
//! is forward time, which the cost model charges per uncached token
//! ([`live_costs`]). `--prefix-cache off` runs the alternative.
//!
//! **model-assumption `early-reject`** (see [`LiveConfig::early_reject`]):
//! the gateway that answers a prefill 4xx at once also aborts the request at
//! decode, as a client's disconnect does (upstream `abort_request`), so
//! decode gives back the pages it reserved for the rejected prompt at once
//! instead of holding them until its waiting timeout. Availability is
//! isolation too: without that, one tenant's burst of rejected prompts
//! holds decode's pool and the next tenant's requests time out. With
//! `early_reject` off (upstream's router), decode holds them until its
//! waiting timeout, which `--waiting-timeout` bounds. Once a request is
//! answered and nothing holds it, the engine forgets its prompt, room and
//! answer ([`Sim::forget`]); [`LiveEngine::census`] counts what is kept.
//!
//! A request whose client goes away is aborted ([`LiveEngine::abort`], the
//! router's `abort_request`). [`LiveConfig::late_write`] injects SGLang
//! #24527's transfer fault: a page write that lands late even after the
//! abort, which without `deferred-release` (#35049) lands in pages the next
//! request was handed.
//!
//! **Split pairs.** [`LiveEngine::start_split`] runs one worker of the pair
//! per process ([`crate::sim::remote`]): requests come with the bootstrap
//! room (and, at decode, the prefill's bootstrap address) the router put in
//! them, the worker answers with its own answer, and the KV crosses over
//! [`crate::bootstrap`]'s connection. `early-reject` does not apply: the
//! router in front decides what the client gets.
//!
//! The clock may run slower than real time ([`LiveConfig::clock_scale`]):
//! every latency the cost model sets stretches alike, which keeps a
//! prefix-cache hit measurable over loopback jitter; no outcome depends on it.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::net::{SocketAddr, TcpListener};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::arrivals::Arrival;
use crate::backend::Backend;
use crate::bootstrap::{self, Event, Heard, Link};
use crate::config::ValidConfig;
use crate::sim::cost::Costs;
use crate::sim::{Retained, Role, Sim, Wire};
use crate::trace::Trace;

/// Who may reuse a cached prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixCacheMode {
    /// No prefix cache: every prompt is prefilled in full.
    Off,
    /// One cache for every tenant (the timing side channel).
    Shared,
    /// A tenant only hits prefixes it cached itself.
    PerTenant,
}

impl PrefixCacheMode {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "off" => Some(Self::Off),
            "shared" => Some(Self::Shared),
            "per-tenant" => Some(Self::PerTenant),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Shared => "shared",
            Self::PerTenant => "per-tenant",
        }
    }
}

/// How the live cluster is built.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// Pools, page size, context, fixes (a probe's configuration).
    pub probe: ValidConfig,
    pub costs: Costs,
    pub prefix_cache: PrefixCacheMode,
    /// Blocks (pages of prompt) the prefix cache remembers, least recently
    /// used first out.
    pub cache_blocks: usize,
    /// **model-assumption `early-reject`**: the gateway in front of the
    /// cluster answers the client as soon as prefill answers a 4xx, instead
    /// of waiting for decode (upstream's PD router returns decode's answer,
    /// [`crate::policy::router_answer`], which after a prefill-side retire is
    /// decode's 500 at its waiting timeout), and aborts the request at
    /// decode so its reserved pages are given back at once. `false` runs
    /// upstream's rule.
    pub early_reject: bool,
    /// Real microseconds per virtual microsecond (1 = real time; 2 runs the
    /// cluster at half speed, doubling every latency the cost model sets).
    pub clock_scale: u64,
    /// A fault of the KV transfer on every request (SGLang #24527): see
    /// [`LateWrite`]. `None` for a healthy channel.
    pub late_write: Option<LateWrite>,
}

/// The last `pages` page writes of every request's prompt land `us`
/// virtual microseconds late, even after the request was aborted (an RDMA
/// write still in flight when decode gives up on the transfer, SGLang
/// #24527). A request that is not aborted waits for them and answers
/// correctly; one aborted in that window has its pages freed at once
/// without `deferred-release` (#35049), and the writes land in pages the
/// next request was handed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LateWrite {
    pub pages: usize,
    pub us: u64,
}

/// Costs of the live cluster (model assumptions; they order events and set
/// latencies, never an outcome). Prefill charges one microsecond per
/// uncached prompt token so a prefix-cache hit is measurable from outside.
pub fn live_costs() -> Costs {
    Costs {
        hop_prefill_us: 100,
        hop_decode_us: 500,
        hop_back_us: 100,
        prefill_fixed_us: 300,
        prefill_tokens_per_us: 1,
        decode_step_us: 1_000,
        write_latency_us: 100,
        write_per_page_us: 1,
    }
}

/// What a client gets back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveAnswer {
    /// Request id inside the cluster, e.g. `acme-17`.
    pub rid: String,
    /// HTTP status of the router's answer.
    pub status: u16,
    /// Generated text on 200, the error message otherwise.
    pub text: String,
    pub output_ids: Vec<u32>,
    pub prompt_tokens: usize,
    /// Prompt tokens the prefix cache held.
    pub cached_tokens: usize,
}

/// One request handed to the engine.
pub struct Submit {
    pub tenant: String,
    pub prompt: Vec<u32>,
    pub max_new_tokens: u32,
    /// Extra scope of the prefix cache (vLLM's `cache_salt`).
    pub cache_salt: Option<String>,
    /// Called once, on the engine thread, with the answer.
    pub reply: Box<dyn FnOnce(LiveAnswer) + Send>,
    /// The caller's name for the request, for [`LiveEngine::abort`].
    pub handle: Option<u64>,
    /// What the router added, for a worker of a split pair.
    pub bootstrap: Option<BootstrapFields>,
}

impl Submit {
    /// A request whose answer comes on the returned channel, with no
    /// prefix-cache salt and no handle.
    pub fn on_channel(
        tenant: &str,
        prompt: Vec<u32>,
        max_new_tokens: u32,
        bootstrap: Option<BootstrapFields>,
    ) -> (Self, mpsc::Receiver<LiveAnswer>) {
        let (tx, rx) = mpsc::channel();
        let submit = Submit {
            tenant: tenant.into(),
            prompt,
            max_new_tokens,
            cache_salt: None,
            reply: Box::new(move |a| {
                let _ = tx.send(a);
            }),
            handle: None,
            bootstrap,
        };
        (submit, rx)
    }
}

/// The router's bootstrap fields of one request, as a split worker takes
/// them: the room both workers name the request by, and (for decode) the
/// prefill's bootstrap server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootstrapFields {
    pub room: u64,
    pub prefill: Option<SocketAddr>,
}

/// What the engine thread is handed.
enum Control {
    Submit(Submit),
    /// Report what the cluster retains.
    Census(Box<dyn FnOnce(Retained) + Send>),
    /// The client of the request submitted with this handle went away.
    Abort(u64),
    /// A bootstrap connection's news (split pairs).
    Remote(Heard),
    /// Stop taking requests.
    Stop,
}

/// The engine has stopped and takes no more requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the live engine has stopped")]
pub struct Stopped;

/// A running cluster on its own thread.
pub struct LiveEngine {
    tx: Option<mpsc::Sender<Control>>,
    thread: Option<JoinHandle<()>>,
    config: LiveConfig,
}

impl LiveEngine {
    /// Start the engine thread.
    pub fn start(config: LiveConfig) -> Self {
        Self::spawn(config, None)
    }

    /// Start one worker of a split pair: `role`'s half of the cluster. A
    /// prefill serves its bootstrap server on `bootstrap` (decode workers
    /// connect there); a decode takes `None`.
    pub fn start_split(
        config: LiveConfig,
        role: Role,
        bootstrap: Option<TcpListener>,
    ) -> std::io::Result<Self> {
        if (role == Role::Prefill) != bootstrap.is_some() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a prefill worker serves a bootstrap address; a decode worker serves none",
            ));
        }
        let engine = Self::spawn(config, Some((role, bootstrap)));
        Ok(engine)
    }

    fn spawn(config: LiveConfig, split: Option<(Role, Option<TcpListener>)>) -> Self {
        let (tx, rx) = mpsc::channel();
        let run_config = config.clone();
        let to_engine = tx.clone();
        let thread = std::thread::Builder::new()
            .name("kvw-live-engine".into())
            .spawn(move || run(run_config, rx, to_engine, split))
            .ok();
        LiveEngine {
            tx: Some(tx),
            thread,
            config,
        }
    }

    pub fn config(&self) -> &LiveConfig {
        &self.config
    }

    /// The prefill input cap (`max_req_input_len`).
    pub fn input_cap(&self) -> u64 {
        self.config.probe.prefill_input_cap()
    }

    /// Hand a request to the engine; its `reply` runs when it is answered.
    pub fn submit(&self, s: Submit) -> Result<(), Stopped> {
        self.send(Control::Submit(s))
    }

    /// The client of the request submitted with `handle` is gone: abort it
    /// in the cluster (upstream `abort_request`, which the HTTP server
    /// calls when the connection closes). Its answer, if it comes, is
    /// dropped by the caller.
    pub fn abort(&self, handle: u64) -> Result<(), Stopped> {
        self.send(Control::Abort(handle))
    }

    /// What the cluster retains now, once the engine thread gets to it.
    pub fn census(&self, timeout: Duration) -> Result<Retained, Stopped> {
        let (tx, rx) = mpsc::channel();
        self.send(Control::Census(Box::new(move |r| {
            let _ = tx.send(r);
        })))?;
        rx.recv_timeout(timeout).map_err(|_| Stopped)
    }

    fn send(&self, c: Control) -> Result<(), Stopped> {
        self.tx
            .as_ref()
            .ok_or(Stopped)?
            .send(c)
            .map_err(|_| Stopped)
    }
}

impl Drop for LiveEngine {
    /// Stop taking requests, answer those in flight, join the thread.
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(Control::Stop);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A request waiting for its answer.
struct Pending {
    reply: Box<dyn FnOnce(LiveAnswer) + Send>,
    prompt_tokens: usize,
    cached_tokens: usize,
}

/// The prefix cache: prefix hashes of page-aligned blocks, LRU-bounded.
struct PrefixCache {
    mode: PrefixCacheMode,
    capacity: usize,
    page: usize,
    blocks: HashMap<u64, u64>,
    tick: u64,
}

impl PrefixCache {
    /// Hash of every block prefix of `prompt` under the request's scope.
    fn block_hashes(&self, tenant: &str, salt: Option<&str>, prompt: &[u32]) -> Vec<u64> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        match self.mode {
            PrefixCacheMode::PerTenant => tenant.hash(&mut h),
            _ => "shared".hash(&mut h),
        }
        salt.hash(&mut h);
        // A request always prefills at least its last token.
        let full = prompt.len().saturating_sub(1) / self.page;
        (0..full)
            .map(|b| {
                prompt[b * self.page..(b + 1) * self.page].hash(&mut h);
                h.finish()
            })
            .collect()
    }

    /// Tokens of `prompt` already cached; then remember all its blocks.
    fn lookup_and_insert(&mut self, tenant: &str, salt: Option<&str>, prompt: &[u32]) -> usize {
        if self.mode == PrefixCacheMode::Off || self.capacity == 0 {
            return 0;
        }
        let hashes = self.block_hashes(tenant, salt, prompt);
        let hit = hashes
            .iter()
            .take_while(|h| self.blocks.contains_key(h))
            .count();
        for h in hashes {
            self.tick += 1;
            self.blocks.insert(h, self.tick);
        }
        while self.blocks.len() > self.capacity {
            let Some((&oldest, _)) = self.blocks.iter().min_by_key(|(_, &t)| t) else {
                break;
            };
            self.blocks.remove(&oldest);
        }
        hit * self.page
    }
}

/// Virtual microseconds the engine may run behind the clock before virtual
/// time waits for it.
const MAX_LAG_US: u64 = 100;

/// Longest the engine thread sleeps with nothing due.
const IDLE_WAIT: Duration = Duration::from_millis(50);

/// A split worker's bootstrap connections, one per room.
struct Links {
    role: Role,
    /// The room's connection to the peer.
    open: HashMap<u64, Link>,
    /// Decode: the prefill bootstrap server of each room's request.
    peers: HashMap<u64, SocketAddr>,
    /// Prefill: rooms registered by a decode before (or without) a request
    /// naming them, and since when (virtual microseconds).
    unclaimed: HashMap<u64, u64>,
    report: bootstrap::Report,
    /// The prefill's bootstrap server, while the engine runs.
    _server: Option<bootstrap::Server>,
}

impl Links {
    /// Send what the worker has for its peers.
    fn flush(&mut self, sim: &mut Sim) {
        for msg in sim.take_outbox() {
            let room = msg.room();
            match msg {
                Wire::Register { .. } => match self.peers.get(&room) {
                    Some(&addr) => {
                        let link = bootstrap::connect(addr, msg, self.report.clone());
                        self.open.insert(room, link);
                    }
                    None => sim.peer_lost(room),
                },
                msg => {
                    if let Some(link) = self.open.get(&room) {
                        link.send(msg);
                    }
                }
            }
        }
    }

    /// Take the news of one connection.
    fn hear(&mut self, sim: &mut Sim, h: Heard) {
        let Heard {
            room,
            conn,
            event,
            link,
        } = h;
        let current = self.open.get(&room).is_some_and(|l| l.id() == conn);
        match event {
            Event::Message(msg) => {
                if link.is_none() && !current {
                    return;
                }
                match sim.take_remote(msg) {
                    Ok(()) => {
                        if let Some(link) = link {
                            self.open.insert(room, link);
                            if sim.entry_of_room(room).is_none() {
                                self.unclaimed.insert(room, sim.now);
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(room, "bootstrap: {e}");
                        match link {
                            // A second registration: refused on its own
                            // connection; the first one stands.
                            Some(link) => link.refuse(room, &e.to_string()),
                            None => {
                                if let Some(link) = self.open.remove(&room) {
                                    link.refuse(room, &e.to_string());
                                }
                                sim.peer_lost(room);
                            }
                        }
                    }
                }
            }
            Event::Refused(reason) if current => {
                tracing::warn!(room, "bootstrap: the peer refused the room: {reason}");
                self.open.remove(&room);
                sim.peer_lost(room);
            }
            Event::Lost(why) if current => {
                tracing::debug!(room, "bootstrap: connection ended: {why}");
                self.open.remove(&room);
                if self.unclaimed.remove(&room).is_some() && sim.entry_of_room(room).is_none() {
                    sim.channel.forget(room);
                } else {
                    sim.peer_lost(room);
                }
            }
            Event::Refused(_) | Event::Lost(_) => {}
        }
    }

    /// Prefill: a registration no request claimed within the waiting
    /// timeout is refused and forgotten.
    fn sweep(&mut self, sim: &mut Sim) {
        if self.role != Role::Prefill {
            return;
        }
        let limit = sim.config.waiting_timeout_s * 1_000_000;
        let now = sim.now;
        let stale: Vec<u64> = self
            .unclaimed
            .iter()
            .filter(|&(&room, &since)| {
                sim.entry_of_room(room).is_none() && now.saturating_sub(since) >= limit
            })
            .map(|(&room, _)| room)
            .collect();
        for room in stale {
            self.unclaimed.remove(&room);
            if let Some(link) = self.open.remove(&room) {
                link.refuse(
                    room,
                    &crate::sim::remote::Refused::UnknownRoom(room).to_string(),
                );
            }
            sim.channel.forget(room);
        }
        self.unclaimed
            .retain(|&room, _| sim.entry_of_room(room).is_none());
    }

    /// The request of `room` is forgotten: its connection closes.
    fn forget(&mut self, room: u64) {
        self.open.remove(&room);
        self.peers.remove(&room);
    }
}

/// Why a split worker refuses a request before it enters the cluster.
fn split_refusal(
    sim: &Sim,
    role: Role,
    fields: Option<BootstrapFields>,
) -> Result<BootstrapFields, String> {
    let Some(f) = fields else {
        return Err("a PD worker takes only requests with the router's bootstrap_room (and bootstrap_host, bootstrap_port at decode)".into());
    };
    if sim.entry_of_room(f.room).is_some() {
        return Err(format!(
            "bootstrap room {} is already in use on this worker",
            f.room
        ));
    }
    if role == Role::Decode && f.prefill.is_none() {
        return Err("a decode worker needs the prefill's bootstrap_host and bootstrap_port".into());
    }
    Ok(f)
}

fn run(
    config: LiveConfig,
    rx: mpsc::Receiver<Control>,
    to_engine: mpsc::Sender<Control>,
    split: Option<(Role, Option<TcpListener>)>,
) {
    let backend = Backend::detect();
    let cap = config.probe.prefill_input_cap() as usize;
    let mut sim = Sim::with_costs((*config.probe).clone(), Vec::new(), &backend, config.costs);
    let mut links = split.and_then(|(role, listener)| {
        sim.set_role(role);
        let report: bootstrap::Report = Arc::new(move |h| {
            let _ = to_engine.send(Control::Remote(h));
        });
        let server = match listener.map(|l| bootstrap::Server::start(l, report.clone())) {
            Some(Ok(s)) => Some(s),
            Some(Err(e)) => {
                tracing::error!("bootstrap server did not start: {e}");
                return None;
            }
            None => None,
        };
        Some(Links {
            role,
            open: HashMap::new(),
            peers: HashMap::new(),
            unclaimed: HashMap::new(),
            report,
            _server: server,
        })
    });
    let early_reject = config.early_reject && links.is_none();
    let mut cache = PrefixCache {
        mode: config.prefix_cache,
        capacity: config.cache_blocks,
        page: config.probe.page_size as usize,
        blocks: HashMap::new(),
        tick: 0,
    };
    let mut waiting: BTreeMap<u32, Pending> = BTreeMap::new();
    // Handles of requests in flight, to abort them.
    let mut handles: HashMap<u64, u32> = HashMap::new();
    // Answered requests the cluster may still hold, to forget once it does not.
    let mut settling: Vec<u32> = Vec::new();
    let start = Instant::now();
    let scale = config.clock_scale.max(1);
    // Virtual time stands still while the engine thread is behind, so every
    // modelled duration is really waited for, however busy the machine is.
    let mut behind = 0u64;
    let now_us = |behind: u64| (start.elapsed().as_micros() as u64 / scale).saturating_sub(behind);
    let mut open = true;
    while open || !waiting.is_empty() {
        let mut now = now_us(behind);
        if let Some(at) = sim.next_event_at().filter(|&at| now > at + MAX_LAG_US) {
            behind += now - at;
            now = at;
        }
        sim.run_until(now);
        settling.extend(deliver(&mut sim, &mut waiting, early_reject));
        handles.retain(|_, i| waiting.contains_key(i));
        // What the worker has for its peer goes out before a forgotten
        // request's connection closes.
        if let Some(l) = links.as_mut() {
            l.flush(&mut sim);
        }
        settling.retain(|&i| {
            let room = sim.entries[i as usize].room;
            let gone = sim.forget(i);
            if gone {
                if let Some(l) = links.as_mut() {
                    l.forget(room);
                }
            }
            !gone
        });
        if let Some(l) = links.as_mut() {
            l.sweep(&mut sim);
        }
        // The live engine answers; it does not narrate. Keep memory flat.
        sim.trace = Trace::new();
        let now = now_us(behind);
        let wait = match sim.next_event_at() {
            Some(at) => Duration::from_micros(at.saturating_sub(now) * scale).min(IDLE_WAIT),
            None => IDLE_WAIT,
        };
        let mut incoming = Vec::new();
        if open {
            match rx.recv_timeout(wait) {
                Ok(s) => incoming.push(s),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => open = false,
            }
            incoming.extend(rx.try_iter());
        } else if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        for c in incoming {
            let s = match c {
                Control::Submit(s) => s,
                Control::Census(reply) => {
                    reply(sim.retained());
                    continue;
                }
                Control::Stop => {
                    open = false;
                    continue;
                }
                Control::Remote(h) => {
                    if let Some(l) = links.as_mut() {
                        let at = now_us(behind).max(sim.now);
                        sim.run_until(at);
                        l.hear(&mut sim, h);
                    }
                    continue;
                }
                Control::Abort(h) => {
                    if let Some(i) = handles.remove(&h).filter(|i| waiting.contains_key(i)) {
                        let at = now_us(behind).max(sim.now);
                        sim.run_until(at);
                        sim.client_abort(at, i);
                    }
                    continue;
                }
            };
            let at = now_us(behind).max(sim.now);
            sim.run_until(at);
            let prompt_tokens = s.prompt.len();
            let room = match links.as_mut() {
                None => None,
                Some(l) => match split_refusal(&sim, l.role, s.bootstrap) {
                    Ok(f) => {
                        if let Some(addr) = f.prefill {
                            l.peers.insert(f.room, addr);
                        }
                        l.unclaimed.remove(&f.room);
                        Some(f.room)
                    }
                    Err(text) => {
                        (s.reply)(LiveAnswer {
                            rid: String::new(),
                            status: 400,
                            text,
                            output_ids: Vec::new(),
                            prompt_tokens,
                            cached_tokens: 0,
                        });
                        continue;
                    }
                },
            };
            let cached_tokens = if prompt_tokens <= cap {
                cache.lookup_and_insert(&s.tenant, s.cache_salt.as_deref(), &s.prompt)
            } else {
                0
            };
            let arrival = Arrival {
                at_us: at,
                tenant: s.tenant,
                prompt: s.prompt,
                canary: String::new(),
                max_new_tokens: s.max_new_tokens,
                probed: false,
            };
            let idx = match room {
                Some(room) => sim.admit_to_room(arrival, room),
                None => sim.admit(arrival),
            };
            if cached_tokens > 0 {
                sim.prefill_cached.insert(idx, cached_tokens);
            }
            if let Some(h) = s.handle {
                handles.insert(h, idx);
            }
            if let Some(f) = config.late_write {
                let page = config.probe.page_size as usize;
                let pages = prompt_tokens.div_ceil(page.max(1));
                let room = sim.entries[idx as usize].room;
                for nth in pages.saturating_sub(f.pages)..pages {
                    let nth = u32::try_from(nth).unwrap_or(u32::MAX);
                    sim.channel
                        .inject(room, crate::transfer::Fault::LateWrite { nth, us: f.us });
                }
            }
            tracing::debug!(idx, prompt_tokens, cached_tokens, "admitted");
            waiting.insert(
                idx,
                Pending {
                    reply: s.reply,
                    prompt_tokens,
                    cached_tokens,
                },
            );
        }
    }
}

/// Prefill's 4xx answer, which `early-reject` relays at once.
fn early_status(e: &crate::sim::Entry) -> Option<(u16, String)> {
    e.prefill_answer
        .clone()
        .filter(|(status, _)| (400..500).contains(status))
}

/// Answer every waiting request the router has answered; returns them. A
/// request answered with prefill's 4xx ahead of decode is aborted at decode
/// (model-assumption `early-reject`), no earlier than decode has received it.
fn deliver(sim: &mut Sim, waiting: &mut BTreeMap<u32, Pending>, early_reject: bool) -> Vec<u32> {
    let done: Vec<u32> = waiting
        .keys()
        .copied()
        .filter(|&i| {
            let e = &sim.entries[i as usize];
            e.response.is_some() || (early_reject && early_status(e).is_some())
        })
        .collect();
    for &i in &done {
        let Some(p) = waiting.remove(&i) else {
            continue;
        };
        let e = &sim.entries[i as usize];
        let (status, text, output_ids) = match (&e.response, early_status(e)) {
            (Some(r), _) => (r.status, r.text.clone(), r.output_ids.clone()),
            (None, Some((status, text))) => (status, text, Vec::new()),
            (None, None) => continue,
        };
        let rid = e.rid.clone();
        if e.response.is_none() {
            let at = (e.arrival.at_us + sim.costs.hop_decode_us).max(sim.now);
            sim.client_abort(at, i);
        }
        sim.prefill_cached.remove(&i);
        (p.reply)(LiveAnswer {
            rid,
            status,
            text,
            output_ids,
            prompt_tokens: p.prompt_tokens,
            cached_tokens: p.cached_tokens,
        });
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention;
    use crate::config::incident_config;
    use kvw_evidence::{Fix, PoisonMode, Scale};

    /// The small shape the tests share, `page` tokens a page.
    fn small(fixes: &[Fix], page: u32) -> ValidConfig {
        let mut probe = incident_config(Scale::Incident, fixes, PoisonMode::Off, 1)
            .unwrap()
            .into_inner();
        probe.context_len = 8192;
        probe.prefill_pool_tokens = 4096;
        probe.decode_pool_tokens = 16384;
        probe.page_size = page;
        probe.waiting_timeout_s = 2;
        ValidConfig::new(probe).unwrap()
    }

    fn engine(fixes: &[Fix], cache: PrefixCacheMode) -> LiveEngine {
        LiveEngine::start(LiveConfig {
            probe: small(fixes, 16),
            costs: live_costs(),
            prefix_cache: cache,
            cache_blocks: 4096,
            early_reject: true,
            clock_scale: 1,
            late_write: None,
        })
    }

    fn ask(e: &LiveEngine, tenant: &str, text: &str, n: u32) -> LiveAnswer {
        send(e, tenant, text, n)
            .recv_timeout(Duration::from_secs(20))
            .unwrap()
    }

    fn doc(canary: &str, len: usize) -> String {
        let mut s = String::from("^");
        while s.len() < len {
            s.push_str(canary);
            s.push(' ');
        }
        s.truncate(len);
        s
    }

    #[test]
    fn pre_fix_an_over_pool_prompt_reads_another_tenants_freed_kv() {
        let canary = "CANARY-globex-1f2e";
        for (fixes, leaks) in [(vec![], true), (Fix::ALL.to_vec(), false)] {
            let e = engine(&fixes, PrefixCacheMode::Off);
            let mine = ask(&e, "globex", &doc(canary, 3000), 24);
            assert_eq!(mine.status, 200);
            assert!(mine.text.starts_with(canary), "{}", mine.text);
            let theirs = ask(&e, "umbrella", &doc("CANARY-umbrella-9a9a", 6000), 24);
            if leaks {
                assert_eq!(theirs.status, 200, "{theirs:?}");
                assert!(theirs.text.contains(canary), "{}", theirs.text);
            } else {
                assert_eq!(theirs.status, 400, "{theirs:?}");
                assert!(!theirs.text.contains(canary));
            }
        }
    }

    #[test]
    fn a_shared_prefix_cache_skips_prefill_of_another_tenants_prefix() {
        for (mode, hit) in [
            (PrefixCacheMode::Shared, true),
            (PrefixCacheMode::PerTenant, false),
            (PrefixCacheMode::Off, false),
        ] {
            let e = engine(&[], mode);
            let text = doc("shared system prompt", 2000);
            assert_eq!(ask(&e, "a", &text, 2).cached_tokens, 0);
            let b = ask(&e, "b", &text, 2);
            assert_eq!(b.cached_tokens > 0, hit, "{mode:?}");
            if mode != PrefixCacheMode::Off {
                assert!(ask(&e, "a", &text, 2).cached_tokens > 0);
            }
        }
    }

    /// Submit without waiting; the answer comes on the returned channel.
    fn send(e: &LiveEngine, tenant: &str, text: &str, n: u32) -> mpsc::Receiver<LiveAnswer> {
        let (submit, rx) = Submit::on_channel(tenant, attention::encode(text), n, None);
        e.submit(submit).unwrap();
        rx
    }

    /// The census once the engine has forgotten what it can (bounded polls).
    fn settled_census(e: &LiveEngine) -> Retained {
        let mut last = Retained::default();
        for _ in 0..200 {
            last = e.census(Duration::from_secs(5)).unwrap();
            if last.rooms == 0 && last.queued == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        last
    }

    #[test]
    fn a_burst_of_rejected_prompts_neither_starves_another_tenant_nor_is_kept() {
        let e = engine(&Fix::ALL, PrefixCacheMode::Off);
        // Each over-pool prompt would have decode reserve 375 of its 1,024
        // pages until its waiting timeout; 40 of them, two at a time.
        let burst: Vec<_> = (0..40)
            .map(|k| send(&e, "acme", &doc(&format!("CANARY-acme-{k:04}"), 6000), 8))
            .collect();
        for rx in burst {
            let a = rx.recv_timeout(Duration::from_secs(20)).unwrap();
            assert_eq!(a.status, 400, "{a:?}");
        }
        for k in 0..5 {
            let a = ask(&e, "globex", &doc(&format!("CANARY-globex-{k}"), 1000), 4);
            assert_eq!(a.status, 200, "globex request {k}: {a:?}");
        }
        let kept = settled_census(&e);
        assert_eq!(
            kept,
            Retained::default(),
            "the cluster still holds answered requests"
        );
    }

    #[test]
    fn answered_requests_leave_nothing_behind_but_their_record() {
        let e = engine(&Fix::ALL, PrefixCacheMode::PerTenant);
        for k in 0..20 {
            let a = ask(&e, "acme", &doc(&format!("CANARY-acme-{k}"), 500), 4);
            assert_eq!(a.status, 200);
        }
        assert_eq!(settled_census(&e), Retained::default());
    }

    #[test]
    fn an_aborted_request_s_late_write_lands_in_the_next_tenant_s_page_without_deferred_release() {
        for (fixes, leaks) in [(vec![], true), (vec![Fix::DeferredRelease], false)] {
            let e = LiveEngine::start(LiveConfig {
                probe: small(&fixes, 64),
                costs: live_costs(),
                prefix_cache: PrefixCacheMode::Off,
                cache_blocks: 0,
                early_reject: true,
                clock_scale: 1,
                late_write: Some(LateWrite {
                    pages: 1,
                    us: 300_000,
                }),
            });
            let canary = "CANARY-acme-77aa77aa";
            let (tx, _rx) = mpsc::channel();
            e.submit(Submit {
                tenant: "acme".into(),
                prompt: attention::encode(&doc(canary, 60)),
                max_new_tokens: 8,
                cache_salt: None,
                reply: Box::new(move |a| {
                    let _ = tx.send(a);
                }),
                handle: Some(7),
                bootstrap: None,
            })
            .unwrap();
            std::thread::sleep(Duration::from_millis(30));
            e.abort(7).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            let b = ask(&e, "umbrella", &doc("CANARY-umbrella-0001", 400), 32);
            assert_eq!(b.text.contains(canary), leaks, "{fixes:?}: {b:?}");
        }
    }
}
