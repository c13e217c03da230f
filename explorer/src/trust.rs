//! Checking a receipt before replaying it.
//!
//! The explorer never draws a predicate it has not authenticated: the DSSE
//! signature must verify with the bundle's public key, and the payload must be
//! an in-toto Statement of the kvwitness probe type whose subject digest
//! matches. All of that is the evidence crate's job; this module only turns
//! its answer into what the page shows ([`Shown`]). The same function runs at
//! site build time (natively) and in the browser (compiled to wasm32).

use std::sync::Arc;

use kvw_evidence::canonical::sha256_hex;
use kvw_evidence::receipt::{check_receipt_name, verify_receipt};
use kvw_evidence::signing::PublicKey;

use crate::page_data::Shown;

/// Verify an envelope (JSON text) with a public key (`kvw.pub.json` text),
/// as the receipt stored at `receipts/<stem>.json`: the statement's subject
/// name must be exactly that file name, so a genuine receipt copied under
/// another name (another fix set) is not shown as that one.
pub fn check(stem: &str, envelope_json: &str, public_key_json: &str) -> Shown {
    check_bytes(stem, envelope_json.as_bytes(), public_key_json)
}

/// [`check`] over the exact bytes of the file, whose SHA-256 the verdict
/// carries so a page can show which bytes it verified.
pub fn check_bytes(stem: &str, envelope: &[u8], public_key_json: &str) -> Shown {
    let rejected = |reason: String| Shown::Rejected {
        stem: stem.to_string(),
        reason,
    };
    let file_name = format!("{stem}.json");
    if let Err(e) = check_receipt_name(&file_name) {
        return rejected(e.to_string());
    }
    let key = match PublicKey::from_json(public_key_json.as_bytes()) {
        Ok(key) => key,
        Err(e) => return rejected(format!("public key unreadable: {e}")),
    };
    match verify_receipt(envelope, &key) {
        Ok(verified) if verified.name != file_name => rejected(format!(
            // Both names passed `check_receipt_name`: nothing to escape.
            "signed under the name \"{}\", stored as \"{file_name}\"",
            verified.name
        )),
        Ok(verified) => Shown::Verified {
            stem: stem.to_string(),
            keyid: verified.keyid,
            sha256: sha256_hex(envelope),
            predicate: Arc::new(verified.predicate),
        },
        Err(e) => rejected(e.to_string()),
    }
}

/// Whether `stem` may name a receipt file (`[A-Za-z0-9._-]+`), so a stem
/// taken from an address is never turned into a path elsewhere.
pub fn plain_stem(stem: &str) -> bool {
    check_receipt_name(&format!("{stem}.json")).is_ok()
}
