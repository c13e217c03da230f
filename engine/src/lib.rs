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
//! * [`bootstrap`] — the KV connection of a prefill and a decode worker in separate processes;
//! * [`upstream_twin`] — the engine's side of each probe of a real SGLang release.
//!
//! # The incident in a few lines
//!
//! A probe is deterministic: the walkthrough preset with seed 2026 gives the
//! same predicate on any machine. Without a fix the probed tenant's answer
//! carries another tenant's canary; with SGLang PR #36988
//! ([`Fix::RetireAbortedPrefillResult`](kvw_evidence::Fix::RetireAbortedPrefillResult))
//! the aborted prefill result is retired and decode reads no foreign page.
//!
//! ```
//! use kvw_engine::config::{incident_config, DEFAULT_SEED};
//! use kvw_engine::probe::{run, ProbeError};
//! use kvw_evidence::{Fix, Outcome, PoisonMode, Scale, Verdict};
//!
//! fn probe(fixes: &[Fix]) -> Result<Verdict, ProbeError> {
//!     let config = incident_config(Scale::Walkthrough, fixes, PoisonMode::Off, DEFAULT_SEED)?;
//!     Ok(run(&config)?.verdict)
//! }
//!
//! let before = probe(&[])?;
//! assert_eq!(before.outcome, Outcome::Leak);
//! assert!(before.foreign_pages_read > 0);
//! assert_eq!(before.tenants_leaked, ["acme"]);
//! assert!(before.response_text.contains(&before.canaries_leaked[0]));
//!
//! let after = probe(&[Fix::RetireAbortedPrefillResult])?;
//! assert!(!after.leak);
//! assert_eq!(after.foreign_pages_read, 0);
//! assert!(after.canaries_leaked.is_empty());
//! # Ok::<(), ProbeError>(())
//! ```
//!
//! `cargo run -p kvw-engine --example incident` runs the same two probes and
//! prints what each one recorded.

pub mod arrivals;
pub mod attention;
pub mod backend;
pub mod bootstrap;
pub mod config;
pub mod fuzz;
pub mod fuzz_campaign;
pub mod live;
pub mod matrix;
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
