//! Evidence for kvwitness: the probe predicate, DSSE envelopes carrying
//! in-toto Statements, ed25519 signatures and verifiable bundles.
//!
//! A probe run becomes a *receipt*: [`receipt::sign_predicate`] wraps its
//! [`ProbePredicate`] in an in-toto Statement ([`statement`]) inside a DSSE
//! envelope ([`dsse`]) signed with an ed25519 key ([`signing`]).
//! [`receipt::verify_receipt`] is the one verifier, used by the CLI, by
//! bundles ([`bundle`]) and, compiled to WebAssembly with the `wasm`
//! feature, by the browser. All digests are taken over canonical JSON
//! ([`canonical`]).
//!
//! This crate holds no I/O policy of its own beyond key files and bundle
//! folders (native only), and builds for `wasm32-unknown-unknown`.

pub mod audit;
pub mod canonical;
#[cfg(not(target_arch = "wasm32"))]
mod canonical_spans;
pub mod dsse;
pub mod error;
pub mod fix_set;
pub mod judged;
pub mod kinds;
pub mod model_check;
pub mod predicate;
pub mod preset;
pub mod receipt;
pub mod receipt_name;
pub mod sample;
pub mod scenario;
pub mod schema;
pub mod signing;
pub mod statement;
pub mod tagged;
pub mod upstream_run;
pub mod vocab;

#[cfg(not(target_arch = "wasm32"))]
pub mod bundle;
#[cfg(not(target_arch = "wasm32"))]
pub mod fsutil;
#[cfg(not(target_arch = "wasm32"))]
pub mod staged;
#[cfg(feature = "wasm")]
pub mod wasm;

pub use dsse::Envelope;
pub use error::EvidenceError;
pub use fix_set::FixSet;
pub use predicate::*;
pub use preset::{max_req_input_len, Preset};
pub use receipt::{
    reproducible_digest, sign_predicate, sign_statement, trace_sha256, verify_receipt,
    verify_statement, PredicateKind, VerifiedReceipt, VerifiedStatement,
};
pub use signing::{PublicKey, Signer};

#[cfg(not(target_arch = "wasm32"))]
pub use bundle::{verify_bundle, write_bundle, BundleReport, VerifyOptions};
