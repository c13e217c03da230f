//! `manifest.json`: the signed list of a bundle's receipts.
//!
//! Each receipt is signed, but a folder of signed receipts can still lie by
//! omission: delete a leak receipt (and its index entry and checksum line)
//! and what is left verifies. The manifest closes that. It is a DSSE
//! envelope, signed like a receipt, whose payload is an in-toto Statement v1
//! of type [`MANIFEST_PREDICATE_TYPE`]:
//!
//! ```json
//! {"_type": "https://in-toto.io/Statement/v1",
//!  "subject": [{"name": "index.json", "digest": {"sha256": "<hex of the file>"}},
//!              {"name": "receipts/<name>.json", "digest": {"sha256": "<hex of the file>"}}, ...],
//!  "predicateType": "https://kvwitness.dev/attestation/bundle-manifest/v1",
//!  "predicate": {"format": "kvwitness-bundle/v1", "keyid": "<hex>", "receipts": <count>}}
//! ```
//!
//! Subjects are sorted by name and digest the files' bytes, so a third party
//! can check it with any in-toto tooling and `sha256sum`. Verification
//! requires the receipts present in the folder to be exactly the manifest's.
//! As for receipts, the payload must be the RFC 8785 canonical JSON of the
//! statement it parses to.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{bundle_err, receipt_name_of, BUNDLE_FORMAT, INDEX_FILE, MANIFEST_FILE};
use crate::canonical::{sha256_hex, to_canonical_json};
use crate::dsse::Envelope;
use crate::error::EvidenceError;
use crate::receipt::{check_receipt_name, PAYLOAD_TYPE};
use crate::signing::{PublicKey, Signer};
use crate::statement::{DigestSet, Statement, Subject, STATEMENT_TYPE};

/// `predicateType` of a bundle manifest.
pub const MANIFEST_PREDICATE_TYPE: &str = "https://kvwitness.dev/attestation/bundle-manifest/v1";

/// The manifest's predicate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestPredicate {
    /// [`BUNDLE_FORMAT`].
    pub format: String,
    /// Key id of the key that signed the bundle.
    pub keyid: String,
    /// Number of receipts.
    pub receipts: u64,
}

/// Sign the manifest of `files` (bundle path → bytes): every receipt and the
/// index become subjects. Returns the envelope's JSON text.
pub fn sign(files: &BTreeMap<String, Vec<u8>>, signer: &Signer) -> Result<String, EvidenceError> {
    let subjects: Vec<Subject> = files
        .iter()
        .filter(|(path, _)| path.as_str() == INDEX_FILE || receipt_name_of(path).is_some())
        .map(|(path, bytes)| Subject {
            name: path.clone(),
            digest: DigestSet {
                sha256: sha256_hex(bytes),
            },
        })
        .collect();
    let receipts = subjects.iter().filter(|s| s.name != INDEX_FILE).count() as u64;
    let predicate = ManifestPredicate {
        format: BUNDLE_FORMAT.to_string(),
        keyid: signer.keyid(),
        receipts,
    };
    let statement = Statement {
        statement_type: STATEMENT_TYPE.to_string(),
        subject: subjects,
        predicate_type: MANIFEST_PREDICATE_TYPE.to_string(),
        predicate: serde_json::to_value(&predicate)
            .map_err(|e| EvidenceError::json("manifest", e))?,
    };
    let payload = to_canonical_json(&statement).map_err(|e| EvidenceError::json("manifest", e))?;
    Ok(Envelope::sign(PAYLOAD_TYPE, &payload, signer).to_json_pretty())
}

/// Verify `manifest.json` with `key` and return its subjects (bundle path →
/// sha256 hex). Errors name the manifest.
pub fn verify(bytes: &[u8], key: &PublicKey) -> Result<BTreeMap<String, String>, EvidenceError> {
    verify_inner(bytes, key).map_err(|e| e.in_file(MANIFEST_FILE))
}

fn verify_inner(bytes: &[u8], key: &PublicKey) -> Result<BTreeMap<String, String>, EvidenceError> {
    let (statement, _) = crate::receipt::open_statement(bytes, key, "manifest statement")?;
    if statement.predicate_type != MANIFEST_PREDICATE_TYPE {
        return Err(EvidenceError::UnknownPredicate {
            found: statement.predicate_type,
            expected: MANIFEST_PREDICATE_TYPE,
        });
    }
    let predicate: ManifestPredicate = serde_json::from_value(statement.predicate)
        .map_err(|e| EvidenceError::json("manifest predicate", e))?;
    if predicate.format != BUNDLE_FORMAT {
        return Err(bundle_err(format!(
            "format is {:?}, expected {BUNDLE_FORMAT:?}",
            predicate.format
        )));
    }
    if predicate.keyid != key.keyid() {
        return Err(bundle_err(format!(
            "names key {}, but was verified with key {}",
            predicate.keyid,
            key.keyid()
        )));
    }
    let mut subjects = BTreeMap::new();
    for s in statement.subject {
        if s.name != INDEX_FILE {
            let name = receipt_name_of(&s.name)
                .ok_or_else(|| bundle_err(format!("subject {:?} is not a receipt", s.name)))?;
            check_receipt_name(name)?;
        }
        if s.digest.sha256.len() != 64
            || !s
                .digest
                .sha256
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(bundle_err(format!(
                "subject {} has a malformed sha256",
                s.name
            )));
        }
        if subjects.insert(s.name.clone(), s.digest.sha256).is_some() {
            return Err(bundle_err(format!("subject {} is listed twice", s.name)));
        }
    }
    let receipts = subjects.keys().filter(|n| *n != INDEX_FILE).count() as u64;
    if receipts != predicate.receipts {
        return Err(bundle_err(format!(
            "says {} receipts but lists {receipts}",
            predicate.receipts
        )));
    }
    if !subjects.contains_key(INDEX_FILE) {
        return Err(bundle_err(format!("does not list {INDEX_FILE}")));
    }
    Ok(subjects)
}
