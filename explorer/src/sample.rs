//! A sample bundle for tests and previews, made from the evidence crate's
//! hand-made predicates and signed with a fixed, public test key.
//!
//! It lets the explorer be built, tested and looked at without running the
//! engine. The predicates are illustrations (see `kvw_evidence::sample`),
//! and the key is derived from a constant seed: never trust it for anything.

use std::path::Path;

use kvw_evidence::bundle::{write_bundle, WrittenBundle};
use kvw_evidence::error::EvidenceError;
use kvw_evidence::keys::Signer;
use kvw_evidence::receipt::sign_predicate;
use kvw_evidence::sample::{sample_config, sample_name, sample_predicate};
use kvw_evidence::{Fix, KvCanaryMode, Scale};

/// Seed of the sample bundle's signing key (public on purpose).
pub const SAMPLE_SEED: [u8; 32] = [7; 32];

/// The fix combinations the sample bundle holds, per scale.
pub fn sample_matrix() -> Vec<(Scale, Vec<Fix>)> {
    vec![
        (Scale::Walkthrough, vec![]),
        (Scale::Walkthrough, vec![Fix::RetireAbortedPrefillResult]),
        (Scale::Walkthrough, vec![Fix::RetireUnadmittedReject]),
        (
            Scale::Walkthrough,
            vec![Fix::RetireAbortedPrefillResult, Fix::RetireUnadmittedReject],
        ),
        (Scale::Walkthrough, vec![Fix::PageTags]),
        (Scale::Incident, vec![]),
        (Scale::Incident, vec![Fix::RetireUnadmittedReject]),
    ]
}

/// Write the sample bundle into `dir`.
pub fn write_sample_bundle(dir: &Path) -> Result<WrittenBundle, EvidenceError> {
    let signer = Signer::from_seed(&SAMPLE_SEED);
    let mut receipts = Vec::new();
    for (scale, fixes) in sample_matrix() {
        let config = sample_config(scale, &fixes, KvCanaryMode::Off, 42);
        let name = sample_name(&config);
        let predicate = sample_predicate(config);
        let envelope = sign_predicate(&name, &predicate, &signer)?;
        receipts.push((name, envelope, predicate));
    }
    write_bundle(dir, receipts, &signer)
}
