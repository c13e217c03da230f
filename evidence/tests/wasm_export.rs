//! The WebAssembly export, exercised natively (`--features wasm`).
#![cfg(feature = "wasm")]

use kvw_evidence::sample::{sample_config, sample_predicate};
use kvw_evidence::wasm::verify_receipt_json;
use kvw_evidence::{sign_predicate, PoisonMode, Scale, Signer};

#[test]
fn verifies_and_refuses_as_json() {
    let signer = Signer::from_seed(&[5u8; 32]);
    let p = sample_predicate(sample_config(Scale::Walkthrough, &[], PoisonMode::Off, 2));
    let envelope = sign_predicate("r.json", &p, &signer)
        .unwrap()
        .to_json_pretty();
    let key = signer.public().to_json();

    let ok: serde_json::Value =
        serde_json::from_str(&verify_receipt_json(&envelope, &key)).unwrap();
    assert_eq!(ok["ok"], true);
    assert_eq!(ok["keyid"], signer.keyid());
    assert!(ok["error"].is_null());

    let other = Signer::from_seed(&[6u8; 32]).public().to_json();
    let bad: serde_json::Value =
        serde_json::from_str(&verify_receipt_json(&envelope, &other)).unwrap();
    assert_eq!(bad["ok"], false);
    assert!(bad["error"]
        .as_str()
        .unwrap()
        .contains("no signature by key"));

    let junk: serde_json::Value = serde_json::from_str(&verify_receipt_json("{", &key)).unwrap();
    assert_eq!(junk["ok"], false);
    let nokey: serde_json::Value =
        serde_json::from_str(&verify_receipt_json(&envelope, "")).unwrap();
    assert!(nokey["error"].as_str().unwrap().contains("public key file"));
}
