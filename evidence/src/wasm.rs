//! WebAssembly entry point: receipt verification for JavaScript.
//!
//! The browser explorer and Node scripts verify receipts with this crate
//! itself rather than with a second implementation, so a receipt that
//! `kvw verify` accepts is accepted there and vice versa. The export takes
//! and returns plain JSON strings to keep the JavaScript side trivial.

use serde::Serialize;
use wasm_bindgen::prelude::wasm_bindgen;

use crate::keys::PublicKey;
use crate::receipt::verify_receipt;

#[derive(Serialize)]
struct Outcome {
    ok: bool,
    keyid: Option<String>,
    name: Option<String>,
    outcome: Option<String>,
    error: Option<String>,
}

/// Verify a receipt (DSSE envelope JSON) against a public key file's JSON.
///
/// Returns JSON `{"ok": bool, "keyid": string|null, "name": string|null,
/// "outcome": string|null, "error": string|null}`; `error` is one line.
#[wasm_bindgen]
pub fn verify_receipt_json(envelope_json: &str, public_key_json: &str) -> String {
    let result = PublicKey::from_json(public_key_json.as_bytes()).and_then(|key| {
        verify_receipt(envelope_json.as_bytes(), &key).map(|receipt| (key, receipt))
    });
    let outcome = match result {
        Ok((key, receipt)) => Outcome {
            ok: true,
            keyid: Some(key.keyid()),
            name: Some(receipt.name),
            outcome: Some(crate::render::outcome_line(
                &receipt.predicate,
                crate::render::Lang::En,
            )),
            error: None,
        },
        Err(e) => Outcome {
            ok: false,
            keyid: None,
            name: None,
            outcome: None,
            error: Some(e.to_string()),
        },
    };
    serde_json::to_string(&outcome).unwrap_or_else(|_| {
        r#"{"ok":false,"keyid":null,"name":null,"outcome":null,"error":"internal error"}"#.into()
    })
}
