//! kvw-check: an exhaustive model check of the PD handoff.
//!
//! Randomized runs sample interleavings; a model checker enumerates them.
//! This crate builds a [`stateright`] model of the protocol actors — router,
//! prefill scheduler, transfer channel, decode scheduler and both page
//! allocators ([`handoff_model`]) — whose every outcome-deciding transition calls the
//! engine's own decision functions over the engine's own `Req`, so the
//! checked logic is the shipped logic. [`run`] checks it under a set of fix
//! switches and fault budgets and returns a [`CheckReport`]: how many states
//! were explored, each property's result and, when one fails, the shortest
//! counterexample (found by a breadth-first search), which
//! [`CheckReport::predicate`] turns into a signed-receipt predicate
//! ([`kvw_evidence::model_check`]).
//!
//! ```no_run
//! use kvw_check::{run, CheckOptions};
//! let report = run(&CheckOptions::default(), &mut |_| {}).unwrap();
//! assert!(report.counterexample.is_some(), "pre-fix the isolation property fails");
//! ```

pub mod handoff_model;
mod predicate;
pub mod symmetry;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kvw_engine::policy::FixSet;
use kvw_evidence::model_check::{Expectation, PropertyStatus};
use kvw_evidence::Fix;
use stateright::{Checker, HasDiscoveries, Model, Path};

pub use handoff_model::{Action, ModelConfig, PdModel, State};
pub use predicate::predicate;

/// Version of the checker crate, for receipts.
pub const STATERIGHT_VERSION: &str = "0.31";

/// What went wrong before any checking started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    #[error("--{what} must be between {min} and {max}, got {got}")]
    Bound {
        what: &'static str,
        min: u32,
        max: u32,
        got: u32,
    },
    #[error("unknown fault '{0}' (known: aborts[=N], late-write[=N], lost-ack[=N], or none/all)")]
    UnknownFault(String),
    #[error("fault '{0}': the count after '=' must be a number from 0 to 8")]
    FaultCount(String),
    #[error("--explore serves only on a loopback address such as 127.0.0.1:3000, not {0}")]
    NotLoopback(String),
    #[error("--explore address '{0}' is not IP:PORT (e.g. 127.0.0.1:3000)")]
    Address(String),
    #[error("cannot listen on {addr}: {reason}")]
    Listen { addr: String, reason: String },
    #[error(
        "the decode pool of {pages} pages cannot hold request r0's {need} reserved pages; use --pages {need} or more"
    )]
    PoolTooSmall { pages: u32, need: u32 },
}

/// Fault budgets of one check.
pub use kvw_evidence::model_check::FaultBudget;

/// Parse `none`, `all` (one abort per request stage, one late write, one
/// lost ack: [`FaultBudget`] of 1/1/1) or a list like `aborts=2,late-write`.
pub fn parse_faults(s: &str) -> Result<FaultBudget, CheckError> {
    let mut b = FaultBudget::default();
    match s.trim() {
        "none" | "" => return Ok(b),
        "all" => {
            return Ok(FaultBudget {
                aborts: 1,
                late_writes: 1,
                lost_acks: 1,
            })
        }
        _ => {}
    }
    for item in s.split(',').map(str::trim) {
        let (name, count) = match item.split_once('=') {
            Some((n, c)) => (
                n.trim(),
                c.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|c| *c <= 8)
                    .ok_or_else(|| CheckError::FaultCount(item.to_string()))?,
            ),
            None => (item, 1),
        };
        match name {
            "aborts" | "abort" => b.aborts = count,
            "late-write" | "late-writes" => b.late_writes = count,
            "lost-ack" | "lost-acks" => b.lost_acks = count,
            _ => return Err(CheckError::UnknownFault(item.to_string())),
        }
    }
    Ok(b)
}

/// Search order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Breadth-first, one thread: counterexamples are shortest.
    Bfs,
    /// Depth-first with request symmetry, on `threads` threads.
    DfsSymmetry,
}

/// Everything [`run`] needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckOptions {
    pub fixes: Vec<Fix>,
    pub requests: u32,
    pub tenants: u32,
    pub decode_pages: u32,
    pub prefill_pages: u32,
    pub faults: FaultBudget,
    pub strategy: Strategy,
    pub threads: usize,
    /// Stop after this long (the result is then undecided where nothing failed).
    pub timeout: Option<Duration>,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            fixes: Vec::new(),
            requests: 2,
            tenants: 2,
            decode_pages: 8,
            prefill_pages: 4,
            faults: FaultBudget::default(),
            strategy: Strategy::Bfs,
            threads: 1,
            timeout: None,
        }
    }
}

impl CheckOptions {
    /// Validate the bounds and build the model.
    pub fn model(&self) -> Result<PdModel, CheckError> {
        let bound = |what, got: u32, min, max| {
            if (min..=max).contains(&got) {
                Ok(got as u8)
            } else {
                Err(CheckError::Bound {
                    what,
                    min,
                    max,
                    got,
                })
            }
        };
        let config = ModelConfig {
            requests: bound("requests", self.requests, 1, 6)?,
            tenants: bound("tenants", self.tenants, 1, 6)?,
            decode_pages: bound("pages", self.decode_pages, 1, 32)?,
            prefill_pages: bound("prefill-pages", self.prefill_pages, 2, 16)?,
            fixes: FixSet::new(&self.fixes),
            aborts: bound("faults aborts", self.faults.aborts, 0, 8)?,
            late_writes: bound("faults late-write", self.faults.late_writes, 0, 8)?,
            lost_acks: bound("faults lost-ack", self.faults.lost_acks, 0, 8)?,
        };
        let m = PdModel::new(config);
        // Decode reserves for its own view: a prompt over its own cap is a
        // one-token placeholder.
        let need =
            if kvw_engine::req::validate_input_length(m.prompt_len[0], m.decode_cap).is_some() {
                1
            } else {
                m.prompt_len[0].div_ceil(handoff_model::PAGE_SIZE) as u32
            };
        if need > self.decode_pages {
            return Err(CheckError::PoolTooSmall {
                pages: self.decode_pages,
                need,
            });
        }
        Ok(m)
    }
}

/// Progress of a running check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub states: usize,
    pub unique_states: usize,
    pub max_depth: usize,
    pub elapsed: Duration,
}

/// One property's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertyReport {
    pub name: &'static str,
    pub expectation: Expectation,
    pub status: PropertyStatus,
}

/// The outcome of [`run`].
#[derive(Debug, Clone)]
pub struct CheckReport {
    pub options: CheckOptions,
    pub model: PdModel,
    pub states: usize,
    pub unique_states: usize,
    pub max_depth: usize,
    pub elapsed: Duration,
    /// The whole reachable space was enumerated.
    pub complete: bool,
    pub properties: Vec<PropertyReport>,
    /// Shortest path to the first violated property (model order).
    pub counterexample: Option<(&'static str, Path<State, Action>)>,
}

impl CheckReport {
    /// True when every safety and liveness property holds and every
    /// `sometimes` property was witnessed.
    pub fn all_hold(&self) -> bool {
        self.properties
            .iter()
            .all(|p| matches!(p.status, PropertyStatus::Holds | PropertyStatus::Witnessed))
    }

    pub fn status(&self, name: &str) -> Option<PropertyStatus> {
        self.properties
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.status)
    }

    /// States per second of the verdict search.
    pub fn states_per_second(&self) -> f64 {
        self.states as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Expectation of each property, as reported (the liveness property is
/// checked as an `always` over terminal states; see [`handoff_model`]).
fn expectation(name: &str) -> Expectation {
    match name {
        handoff_model::prop::COMPLETES_NORMALLY => Expectation::Sometimes,
        handoff_model::prop::ADMITTED_ANSWERED => Expectation::Eventually,
        _ => Expectation::Always,
    }
}

/// Check the model. `progress` is called about every 250 ms and once at the end.
pub fn run(
    opts: &CheckOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<CheckReport, CheckError> {
    let model = opts.model()?;
    run_model(opts, model, progress)
}

/// [`run`] over an already built model (tests use it to swap a door).
pub fn run_model(
    opts: &CheckOptions,
    model: PdModel,
    progress: &mut dyn FnMut(Progress),
) -> Result<CheckReport, CheckError> {
    let start = Instant::now();
    let mut builder = model.clone().checker().finish_when(HasDiscoveries::All);
    if let Some(t) = opts.timeout {
        builder = builder.timeout(t);
    }
    let (states, unique, depth, found) = match opts.strategy {
        Strategy::Bfs => {
            let c = builder.spawn_bfs();
            watch(c, start, progress)
        }
        Strategy::DfsSymmetry => {
            let c = builder
                .threads(opts.threads.max(1))
                .symmetry_fn(symmetry::representative)
                .spawn_dfs();
            watch(c, start, progress)
        }
    };
    let elapsed = start.elapsed();
    let names: Vec<&'static str> = model.properties().iter().map(|p| p.name).collect();
    let all_found = names.iter().all(|n| found.contains(n));
    let timed_out = opts.timeout.is_some_and(|t| elapsed >= t);
    let complete = !all_found && !timed_out;
    let properties: Vec<PropertyReport> = names
        .iter()
        .map(|&name| {
            let e = expectation(name);
            let found = found.contains(name);
            let status = match (e, found) {
                (Expectation::Sometimes, true) => PropertyStatus::Witnessed,
                (_, true) => PropertyStatus::Violated,
                _ if !complete => PropertyStatus::Undecided,
                (Expectation::Sometimes, false) => PropertyStatus::NotWitnessed,
                (_, false) => PropertyStatus::Holds,
            };
            PropertyReport {
                name,
                expectation: e,
                status,
            }
        })
        .collect();
    let first_violated = properties
        .iter()
        .find(|p| p.status == PropertyStatus::Violated)
        .map(|p| p.name);
    let counterexample = match first_violated {
        None => None,
        Some(name) => {
            // Stateright keeps the *last* violating state it met for an
            // `always` property; a second BFS that stops at the first one
            // gives the shortest path.
            shortest(&model, name).map(|p| (name, p))
        }
    };
    Ok(CheckReport {
        options: opts.clone(),
        model,
        states,
        unique_states: unique,
        max_depth: depth,
        elapsed,
        complete,
        properties,
        counterexample,
    })
}

type Found = BTreeSet<&'static str>;

fn watch<C: Checker<PdModel>>(
    c: C,
    start: Instant,
    progress: &mut dyn FnMut(Progress),
) -> (usize, usize, usize, Found) {
    let report = |c: &C| Progress {
        states: c.state_count(),
        unique_states: c.unique_state_count(),
        max_depth: c.max_depth(),
        elapsed: start.elapsed(),
    };
    // Poll quickly at first so a small check's time is its own, not the
    // poll interval's; then every 250 ms.
    let mut wait = Duration::from_millis(1);
    while !c.is_done() {
        progress(report(&c));
        std::thread::sleep(wait);
        wait = (wait * 2).min(Duration::from_millis(250));
    }
    let c = c.join();
    progress(report(&c));
    (
        c.state_count(),
        c.unique_state_count(),
        c.max_depth(),
        c.discoveries().into_keys().collect(),
    )
}

/// Shortest path to a state that violates `property`: a plain
/// breadth-first search that stops at the first such state. (Stateright's
/// own BFS keeps the last violating state it met within a block, which need
/// not be the nearest.)
fn shortest(model: &PdModel, property: &'static str) -> Option<Path<State, Action>> {
    use std::collections::{HashSet, VecDeque};
    use std::hash::{Hash, Hasher};
    let props = model.properties();
    let prop = props.iter().find(|p| p.name == property)?;
    let fp = |s: &State| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        s.hash(&mut h);
        h.finish()
    };
    let init = model.init_states();
    let mut nodes: Vec<(State, Option<(usize, Action)>)> = Vec::new();
    let mut seen = HashSet::new();
    let mut queue = VecDeque::new();
    for s in &init {
        if seen.insert(fp(s)) {
            queue.push_back(nodes.len());
            nodes.push((s.clone(), None));
        }
    }
    let mut actions = Vec::new();
    while let Some(i) = queue.pop_front() {
        if !(prop.condition)(model, &nodes[i].0) {
            let mut steps = Vec::new();
            let mut at = i;
            while let Some((parent, a)) = nodes[at].1 {
                steps.push(a);
                at = parent;
            }
            steps.reverse();
            return Path::from_actions(model, nodes[at].0.clone(), &steps);
        }
        model.actions(&nodes[i].0, &mut actions);
        for a in actions.drain(..) {
            if let Some(next) = model.next_state(&nodes[i].0, a) {
                if seen.insert(fp(&next)) {
                    queue.push_back(nodes.len());
                    nodes.push((next, Some((i, a))));
                }
            }
        }
    }
    None
}

/// Check an `--explore` address: an `IP:PORT` (or `localhost:PORT`) on a
/// loopback interface that can be listened on now. The explorer UI lets
/// anyone who reaches it drive the checker, so it never listens beyond this
/// machine.
pub fn explore_address(addr: &str) -> Result<std::net::SocketAddr, CheckError> {
    use std::net::{Ipv4Addr, SocketAddr};
    let parsed = match addr.strip_prefix("localhost:") {
        Some(port) => port
            .parse::<u16>()
            .ok()
            .map(|p| SocketAddr::from((Ipv4Addr::LOCALHOST, p))),
        None => addr.parse::<SocketAddr>().ok(),
    };
    let sa = parsed.ok_or_else(|| CheckError::Address(addr.to_string()))?;
    if !sa.ip().is_loopback() {
        return Err(CheckError::NotLoopback(addr.to_string()));
    }
    // stateright's server panics when it cannot bind; find out first.
    std::net::TcpListener::bind(sa).map_err(|e| CheckError::Listen {
        addr: sa.to_string(),
        reason: e.to_string(),
    })?;
    Ok(sa)
}

/// Serve stateright's explorer UI for the model of `opts` on `addr` (from
/// [`explore_address`]). Blocks while serving.
pub fn serve_explorer(opts: &CheckOptions, addr: std::net::SocketAddr) -> Result<(), CheckError> {
    let model = opts.model()?;
    if !addr.ip().is_loopback() {
        return Err(CheckError::NotLoopback(addr.to_string()));
    }
    let _checker = model.checker().serve(addr);
    Ok(())
}
