//! kvwitness engine: a prefill/decode disaggregated serving cluster modelled
//! on SGLang, running real attention over real paged KV bytes.
//!
//! The crate reproduces the 2026 cross-tenant KV exposure step by step and
//! shows what each upstream fix changes. Modules, in the order data flows:
//!
//! * [`req`] — SGLang's `Req` and the input-length rule;
//! * [`policy`] — every door and release decision, as pure functions;
//! * [`pool`] — paged KV pools with real bytes and page ownership;
//! * [`attention`] — the attention model whose answer reveals what it read;
//! * [`transfer`] — the asynchronous KV channel with injectable faults;
//! * [`sim`] — router, prefill and decode workers on a virtual clock;
//! * [`arrivals`] — who sends what, when;
//! * [`trace`] — typed events of every request, recorded as they happen;
//! * [`narrate`] — the seven steps and their claims, read off the events;
//! * [`backend`] — CPU reference or CUDA for decode attention;
//! * [`probe`] — runs a scenario and builds the receipt predicate;
//! * [`scenarios`] — scripted runs with assertions, grouped by acceptance gate;
//! * [`fuzz`] — randomized runs with invariants checked after every event;
//! * [`slots`] — metadata buffer and Mamba slot allocators;
//! * [`live`] — the same cluster serving requests as they arrive, on a real clock;
//! * [`upstream_twin`] — the engine's side of each probe of a real SGLang release.

pub mod arrivals;
pub mod attention;
pub mod backend;
pub mod config;
pub mod fuzz;
pub mod live;
pub mod narrate;
pub mod policy;
pub mod pool;
pub mod probe;
pub mod req;
pub mod scenarios;
pub mod sim;
pub mod slots;
pub mod trace;
pub mod transfer;
pub mod upstream_twin;
