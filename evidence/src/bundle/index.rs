//! `index.json`: a bundle's table of contents, in typed facts.
//!
//! The index is a table of contents a reader (or the explorer) can use
//! without opening every receipt; verification checks every entry against
//! its receipt, and the signed manifest pins the index's bytes. It holds
//! facts only (names, numbers, switches, outcomes), never a sentence: the
//! words a reader sees are rendered from these facts, so changing them
//! changes no published bundle. The README is generated from the index
//! ([`super::readme`]).

use serde::{Deserialize, Serialize};

use super::others::OtherEntry;
use crate::predicate::{
    Fix, FreeListPolicy, Outcome, PoisonMode, ProbeInfo, ProbePredicate, Scale,
};
use crate::receipt::VerifiedReceipt;

/// `index.json`: a table of contents a reader (or the explorer) can use
/// without opening every receipt. Every entry is checked against its
/// receipt on verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleIndex {
    /// [`BUNDLE_FORMAT`].
    pub format: String,
    /// `predicateType` of every receipt.
    pub predicate_type: String,
    /// Key id of `kvw.pub.json`.
    pub keyid: String,
    /// One entry per probe receipt, sorted by `file`.
    pub receipts: Vec<IndexEntry>,
    /// One entry per receipt of another kind (model check, scenario, gates,
    /// fuzz), sorted by `file`; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<OtherEntry>,
}

/// One receipt as listed in `index.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexEntry {
    /// Path inside the bundle, `receipts/<name>`.
    pub file: String,
    /// Subject name of the receipt (its file name).
    pub name: String,
    pub probe: ProbeInfo,
    pub scale: Scale,
    /// Fix switches that were on.
    pub fixes: Vec<Fix>,
    pub poison_on_free: PoisonMode,
    pub config: ConfigSummary,
    pub verdict: VerdictSummary,
    /// Subject digest: canonical SHA-256 of the predicate.
    pub predicate_sha256: String,
    /// Digest a re-run at any commit must reproduce.
    pub reproducible_digest: String,
}

/// The sizes that decide whether the reject path is reachable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSummary {
    pub context_len: u64,
    pub prefill_pool_tokens: u64,
    pub decode_pool_tokens: u64,
    pub page_size: u32,
    pub max_req_input_len: u64,
    pub free_list: FreeListPolicy,
    pub seed: u64,
}

/// What the run came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerdictSummary {
    pub leak: bool,
    pub http_status: u16,
    pub foreign_pages_read: u64,
    pub canaries_leaked: Vec<String>,
    pub correct_answer: bool,
    pub outcome: Outcome,
    /// Tenant of the probed request.
    pub tenant: Option<String>,
    /// Tenants whose canary the probed request's answer carried.
    pub tenants_leaked: Vec<String>,
    /// Virtual microseconds until the client got its answer.
    pub latency_us: u64,
}

impl VerdictSummary {
    /// The summary of a run's verdict.
    pub fn of(p: &ProbePredicate) -> VerdictSummary {
        let v = &p.verdict;
        VerdictSummary {
            leak: v.leak,
            http_status: v.http_status,
            foreign_pages_read: v.foreign_pages_read,
            canaries_leaked: v.canaries_leaked.clone(),
            correct_answer: v.correct_answer,
            outcome: v.outcome,
            tenant: p
                .requests
                .iter()
                .find(|r| r.probed)
                .map(|r| r.tenant.clone()),
            tenants_leaked: v.tenants_leaked.clone(),
            latency_us: v.latency_us,
        }
    }
}

impl IndexEntry {
    /// The entry for a verified receipt stored at `file`.
    pub fn for_receipt(file: &str, receipt: &VerifiedReceipt) -> IndexEntry {
        let p = &receipt.predicate;
        let c = &p.config;
        IndexEntry {
            file: file.to_string(),
            name: receipt.name.clone(),
            probe: p.probe.clone(),
            scale: c.scale,
            fixes: c.fixes.clone(),
            poison_on_free: c.poison_on_free,
            config: ConfigSummary {
                context_len: c.context_len,
                prefill_pool_tokens: c.prefill_pool_tokens,
                decode_pool_tokens: c.decode_pool_tokens,
                page_size: c.page_size,
                max_req_input_len: c.prefill_input_cap(),
                free_list: c.free_list,
                seed: c.seed,
            },
            verdict: VerdictSummary::of(p),
            predicate_sha256: receipt.predicate_sha256.clone(),
            reproducible_digest: receipt.reproducible_digest.clone(),
        }
    }
}
