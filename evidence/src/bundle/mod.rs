//! Bundles: a folder of receipts that anyone can check offline.
//!
//! A bundle is what gets published. Its layout is fixed so that a verifier
//! can refuse anything that does not belong:
//!
//! ```text
//! <bundle>/
//!   receipts/<name>.json   DSSE envelopes (probe runs; model checks, scenarios, gates, fuzz)
//!   kvw.pub.json           the public key that signed them
//!   index.json             one entry per receipt: config and verdict facts, digests
//!   manifest.json          DSSE envelope: the signed list of every receipt and the index
//!   README.md              what this is and how to check it (its tables state the index)
//!   SHA256SUMS             GNU `sha256sum` format, every file above, sorted
//! ```
//!
//! One concern per module:
//!
//! * [`layout`] reads a folder under the layout rules (regular files only,
//!   no links, no stray folders, size and count caps, opened without
//!   following links or blocking) and checks it against its `SHA256SUMS`;
//!   site building uses the same reader;
//! * [`sums`] writes and parses `SHA256SUMS`;
//! * [`index`] is `index.json`, the receipts' facts;
//! * [`readme`] writes the README from the index and checks that a README
//!   states what the index says;
//! * [`others`] admits the receipts of every kind besides probe runs under
//!   one rule;
//! * [`manifest`] signs and checks `manifest.json`, an in-toto Statement
//!   whose subjects are every receipt and the index, so removing, adding or
//!   renaming a receipt is detected, not only altering one;
//! * [`write`] builds a bundle atomically;
//! * [`verify`] checks a bundle and reports one line per receipt.

pub mod index;
pub mod layout;
pub mod manifest;
pub mod others;
pub mod readme;
pub mod sums;
pub mod verify;
pub mod write;

pub use index::{BundleIndex, ConfigSummary, IndexEntry, VerdictSummary};
pub use layout::{read_bundle, BundleFiles};
pub use others::{OtherEntry, OtherFacts, OTHER_PREDICATE_TYPES};
pub use readme::{check_readme, readme};
pub use verify::{
    check_reproduction, verify_bundle, verify_files, verify_files_keeping, BundleReport, KeySource,
    ReceiptFacts, ReceiptLine, ReceiptOk, ReproduceFn, ReproduceOtherFn, Rerun, VerifyOptions,
};
pub use write::{
    check_target, write_bundle, write_bundle_with_model_checks, write_bundle_with_others,
    WrittenBundle,
};

use crate::receipt::MAX_RECEIPT_BYTES;

/// `format` of a bundle's `index.json`.
pub const BUNDLE_FORMAT: &str = "kvwitness-bundle/v2";
/// Checksum file name.
pub const SUMS_FILE: &str = "SHA256SUMS";
/// Index file name.
pub const INDEX_FILE: &str = "index.json";
/// README file name.
pub const README_FILE: &str = "README.md";
/// Signed manifest file name.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Folder holding the receipts.
pub const RECEIPTS_DIR: &str = "receipts";

/// Most bytes one bundle file may hold.
pub const MAX_FILE_BYTES: u64 = MAX_RECEIPT_BYTES;
/// Most bytes all files of a bundle may hold together.
pub const MAX_BUNDLE_BYTES: u64 = 1024 * 1024 * 1024;
/// Most files a bundle may hold.
pub const MAX_FILES: usize = 10_000;

pub(crate) fn bundle_err(msg: impl Into<String>) -> crate::error::EvidenceError {
    crate::error::EvidenceError::Bundle(msg.into())
}

/// The receipt name of a bundle path `receipts/<name>`, if it is one.
pub fn receipt_name_of(path: &str) -> Option<&str> {
    path.strip_prefix(RECEIPTS_DIR)
        .and_then(|rest| rest.strip_prefix('/'))
        .filter(|name| !name.contains('/'))
}
