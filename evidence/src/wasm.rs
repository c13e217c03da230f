//! WebAssembly entry point: receipt verification for JavaScript.
//!
//! The browser explorer and Node scripts verify receipts with this crate
//! itself rather than with a second implementation, so a receipt that
//! `kvw verify` accepts is accepted there and vice versa. The export takes
//! and returns plain JSON strings to keep the JavaScript side trivial.

use serde::Serialize;
use wasm_bindgen::prelude::wasm_bindgen;

use crate::receipt::{verify_receipt, verify_statement, VerifiedReceipt};
use crate::signing::PublicKey;

#[derive(Serialize)]
struct Outcome {
    ok: bool,
    keyid: Option<String>,
    name: Option<String>,
    /// What the receipt says, as typed facts: a probe run's verdict, or
    /// another kind's [`crate::kinds::OtherFacts`]. Sentences are the
    /// reader's to render.
    facts: Option<serde_json::Value>,
    error: Option<String>,
}

/// Verify a receipt (DSSE envelope JSON) against a public key file's JSON.
///
/// Returns JSON `{"ok": bool, "keyid": string|null, "name": string|null,
/// "facts": object|null, "error": string|null}`; `facts` is the verdict,
/// `error` is one line.
impl Outcome {
    /// The JSON answer for a verification's result: the key id, the
    /// receipt's name and its facts, or one line of error.
    fn answer(result: Result<(String, String, Option<serde_json::Value>), String>) -> String {
        let outcome = match result {
            Ok((keyid, name, facts)) => Outcome {
                ok: true,
                keyid: Some(keyid),
                name: Some(name),
                facts,
                error: None,
            },
            Err(e) => Outcome {
                ok: false,
                keyid: None,
                name: None,
                facts: None,
                error: Some(e.replace('\n', " ")),
            },
        };
        serde_json::to_string(&outcome).unwrap_or_else(|_| {
            r#"{"ok":false,"keyid":null,"name":null,"facts":null,"error":"internal error"}"#.into()
        })
    }
}

/// Verify a receipt (DSSE envelope JSON) against a public key file's JSON.
///
/// Returns JSON `{"ok": bool, "keyid": string|null, "name": string|null,
/// "facts": object|null, "error": string|null}`; `facts` is the verdict,
/// `error` is one line.
#[wasm_bindgen]
pub fn verify_receipt_json(envelope_json: &str, public_key_json: &str) -> String {
    let result = PublicKey::from_json(public_key_json.as_bytes())
        .and_then(|key| {
            let receipt = verify_receipt(envelope_json.as_bytes(), &key)?;
            let facts = serde_json::to_value(&receipt.predicate.verdict).ok();
            Ok((key.keyid(), receipt.name, facts))
        })
        .map_err(|e| e.to_string());
    Outcome::answer(result)
}

/// Verify a receipt of any kind the evidence crate knows (probe run, model
/// check, scenario, gates, fuzz) against a public key file's JSON; returns
/// the same JSON as [`verify_receipt_json`], `facts` being the kind's
/// facts ([`crate::kinds::describe`]).
#[wasm_bindgen]
pub fn verify_statement_json(envelope_json: &str, public_key_json: &str) -> String {
    let result = PublicKey::from_json(public_key_json.as_bytes())
        .map_err(|e| e.to_string())
        .and_then(|key| {
            let statement =
                verify_statement(envelope_json.as_bytes(), &key).map_err(|e| e.to_string())?;
            let name = statement.name.clone();
            let facts = if statement.predicate_type == crate::predicate::PREDICATE_TYPE {
                let receipt =
                    VerifiedReceipt::from_statement(statement).map_err(|e| e.to_string())?;
                serde_json::to_value(&receipt.predicate.verdict)
            } else {
                serde_json::to_value(crate::kinds::describe(&statement)?)
            };
            Ok((key.keyid(), name, facts.ok()))
        });
    Outcome::answer(result)
}
