//! Receipts of the other predicate kinds a bundle may carry: model checks,
//! scenarios, gate runs and randomized runs.
//!
//! The index describes each probe run field by field ([`super::IndexEntry`]).
//! Every other kind travels under one rule instead of one per kind: it is
//! signed by the bundle key under its file name, covered by the signed
//! manifest like every receipt, and listed in the index's `others` with its
//! `predicateType`, the typed facts that summarise it and its subject
//! digest, all recomputed from the receipt on verification.
//! [`crate::kinds::describe`] is the one place that knows which kinds exist
//! and which facts summarise each; a re-run
//! (`--reproduce`) is the caller's, through
//! [`ReproduceOtherFn`](super::verify::ReproduceOtherFn), since the
//! evidence crate runs nothing.

use serde::{Deserialize, Serialize};

pub use crate::kinds::{describe, OtherFacts, OTHER_PREDICATE_TYPES};
use crate::receipt::VerifiedStatement;

/// A receipt of another kind as listed in `index.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtherEntry {
    /// Path inside the bundle, `receipts/<name>`.
    pub file: String,
    /// Its `predicateType`.
    pub predicate_type: String,
    /// What was run and what it came to.
    pub facts: OtherFacts,
    /// Subject digest: canonical SHA-256 of the predicate.
    pub predicate_sha256: String,
}

impl OtherEntry {
    /// The entry for a verified statement of another kind stored at `file`.
    pub fn for_statement(file: &str, statement: &VerifiedStatement) -> Result<OtherEntry, String> {
        Ok(OtherEntry {
            file: file.to_string(),
            predicate_type: statement.predicate_type.clone(),
            facts: describe(statement)?,
            predicate_sha256: statement.predicate_sha256.clone(),
        })
    }
}
