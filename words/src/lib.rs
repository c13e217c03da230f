//! Words for kvwitness receipts: every sentence a reader sees, in English
//! and Italian, rendered from the typed facts the receipts sign.
//!
//! Receipts and bundle indexes carry facts only (`kvw-evidence`); this
//! crate is the one place they become words, for the command line and the
//! explorer (native and in the browser) alike, so changing a sentence here
//! changes no signed byte and no published bundle.
//!
//! * [`probe`]: a probe run's steps, claims, events and verdict;
//! * [`scenario`]: scenario and gates facts, and each scenario's own words;
//! * [`source`]: the source lines a step cites;
//! * [`kinds`]: what a receipt of another kind is and came to;
//! * [`model_check`]: a model-check step's engine decision;
//! * [`report`]: the lines `kvw verify` prints (native only).
//!
//! Plain string formatting: no I/O, and it builds for wasm32.

mod lang;

pub mod kinds;
pub mod model_check;
pub mod probe;
#[cfg(not(target_arch = "wasm32"))]
pub mod report;
pub mod scenario;
pub mod source;

pub use lang::Lang;
