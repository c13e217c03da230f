//! Evidence for kvwitness: the probe predicate, DSSE envelopes carrying
//! in-toto Statements, ed25519 signatures and verifiable bundles.
//!
//! This crate holds no I/O policy of its own beyond reading and writing
//! bundle folders, and builds for `wasm32-unknown-unknown` so the browser
//! verifies receipts with the very same code as `kvw verify`.

pub mod predicate;

pub use predicate::*;
