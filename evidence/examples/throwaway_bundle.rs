//! Write a bundle of hand-made sample receipts, signed with a throw-away key.
//!
//! ```sh
//! cargo run -p kvw-evidence --example throwaway_bundle -- /tmp/sample-bundle
//! kvw verify /tmp/sample-bundle
//! ```
//!
//! The predicates come from [`kvw_evidence::sample`] (illustrations, not
//! engine output). The signing key lives only in memory: the bundle gets the
//! public key, the private half is dropped when the program ends. The
//! interop check `scripts/ci/evidence-interop.sh` runs against this bundle.

use std::path::PathBuf;

use kvw_evidence::sample::{sample_config, sample_name, sample_predicate};
use kvw_evidence::{sign_predicate, write_bundle, Fix, PoisonMode, Scale, Signer};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), kvw_evidence::EvidenceError> {
    let Some(out) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: throwaway_bundle OUT_DIR");
        std::process::exit(2);
    };
    let signer = Signer::generate();
    let rows: [(Scale, &[Fix], PoisonMode); 4] = [
        (Scale::Walkthrough, &[], PoisonMode::Off),
        (
            Scale::Walkthrough,
            &[Fix::RetireAbortedPrefillResult],
            PoisonMode::Off,
        ),
        (Scale::Incident, &[], PoisonMode::Off),
        (Scale::Incident, &Fix::ALL, PoisonMode::Log),
    ];
    let mut receipts = Vec::new();
    for (scale, fixes, canary) in rows {
        let predicate = sample_predicate(sample_config(scale, fixes, canary, 7));
        let name = sample_name(&predicate.config);
        let envelope = sign_predicate(&name, &predicate, &signer)?;
        receipts.push((name, envelope, predicate));
    }
    let written = write_bundle(&out, receipts, &signer)?;
    println!(
        "wrote {} receipts to {} (keyid {})",
        written.receipts,
        written.dir.display(),
        written.keyid
    );
    Ok(())
}
