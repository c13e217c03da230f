//! Write a bundle of the sample probe receipts plus a model check's
//! counterexample and a shrunk randomized run, signed with the sample key:
//! `cargo run -p kvw-explorer --example results_bundle -- DIR`. The browser
//! tests build a site from it to reach the page kinds the published bundle
//! does not carry.

#[path = "../tests/support/mod.rs"]
mod support;

use kvw_evidence::bundle::write_bundle_with_others;
use kvw_evidence::signing::Signer;
use kvw_explorer::sample::{sample_receipts, SAMPLE_SEED};

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: results_bundle DIR");
        std::process::exit(2);
    };
    let signer = Signer::from_seed(&SAMPLE_SEED);
    let (name, envelope, _) = support::model_check_receipt(&[], "model-check-none-1", &signer);
    let others = vec![(name, envelope), support::fuzz_receipt(&signer)];
    let written = sample_receipts(&signer).and_then(|probes| {
        write_bundle_with_others(std::path::Path::new(&dir), probes, others, &signer)
    });
    match written {
        Ok(w) => println!("{} receipts in {}", w.receipts, w.dir.display()),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
