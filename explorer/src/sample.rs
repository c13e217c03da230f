//! A sample bundle for tests and previews, made from the evidence crate's
//! hand-made predicates and signed with a fixed, public test key.
//!
//! It lets the explorer be built, tested and looked at without running the
//! engine. The predicates are illustrations (see `kvw_evidence::sample`),
//! and the key is derived from a constant seed: never trust it for anything.

use std::path::Path;

use kvw_evidence::bundle::{write_bundle, WrittenBundle};
use kvw_evidence::error::EvidenceError;
use kvw_evidence::receipt::sign_predicate;
use kvw_evidence::sample::{sample_config, sample_name, sample_predicate};
use kvw_evidence::signing::Signer;
use kvw_evidence::{Envelope, Fix, PoisonMode, ProbePredicate, Scale};

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

/// The sample probe receipts (name, envelope, predicate), signed by `signer`.
pub fn sample_receipts(
    signer: &Signer,
) -> Result<Vec<(String, Envelope, ProbePredicate)>, EvidenceError> {
    sample_matrix()
        .into_iter()
        .map(|(scale, fixes)| {
            let config = sample_config(scale, &fixes, PoisonMode::Off, 42);
            let name = sample_name(&config);
            let predicate = sample_predicate(config);
            let envelope = sign_predicate(&name, &predicate, signer)?;
            Ok((name, envelope, predicate))
        })
        .collect()
}

/// Write the sample bundle into `dir`.
pub fn write_sample_bundle(dir: &Path) -> Result<WrittenBundle, EvidenceError> {
    let signer = Signer::from_seed(&SAMPLE_SEED);
    write_bundle(dir, sample_receipts(&signer)?, &signer)
}
