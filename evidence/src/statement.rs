//! in-toto Statement v1: what a receipt's payload says and about what.
//!
//! The DSSE payload of a receipt is an in-toto Statement
//! (<https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md>),
//! the format third-party attestation tooling expects:
//!
//! ```json
//! {"_type": "https://in-toto.io/Statement/v1",
//!  "subject": [{"name": "<receipt name>", "digest": {"sha256": "<hex>"}}],
//!  "predicateType": "https://kvwitness.dev/attestation/probe/v1",
//!  "predicate": { ...the probe predicate... }}
//! ```
//!
//! A probe run produces no external artifact, so the subject is the run's
//! own record: `name` is the receipt's file name (without folder) and
//! `digest.sha256` is the SHA-256 of the **canonical JSON of the predicate**
//! (RFC 8785, see [`crate::canonical`]). A verifier
//! recomputes it from the predicate it parsed, so the subject pins exactly
//! that predicate.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::canonical_sha256;

/// `_type` of an in-toto Statement v1.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";

/// An in-toto Statement v1 as it appears in the payload. The predicate is
/// kept as raw JSON so the `predicateType` can be checked before the
/// predicate is parsed as a particular version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Statement {
    #[serde(rename = "_type")]
    pub statement_type: String,
    pub subject: Vec<Subject>,
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    pub predicate: Value,
}

#[cfg(not(target_arch = "wasm32"))]
impl Statement {
    /// The statement `json` holds, its predicate moved rather than copied
    /// (a receipt's predicate is most of its bytes).
    pub fn from_json(mut json: Value) -> Result<Statement, serde_json::Error> {
        let predicate = json
            .as_object_mut()
            .and_then(|members| members.get_mut("predicate"))
            .map(Value::take);
        let mut statement: Statement = serde_json::from_value(json)?;
        if let Some(predicate) = predicate {
            statement.predicate = predicate;
        }
        Ok(statement)
    }
}

/// What the statement is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    pub name: String,
    pub digest: DigestSet,
}

/// Digests of the subject; kvwitness uses SHA-256 only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DigestSet {
    /// Lowercase hex.
    pub sha256: String,
}

/// Lowercase hex SHA-256 of the canonical JSON of a predicate: the subject
/// digest of its receipt.
pub fn predicate_sha256<P: Serialize>(predicate: &P) -> String {
    // Plain data types with string keys always serialize.
    canonical_sha256(predicate).unwrap_or_default()
}

impl Statement {
    /// The statement a receipt named `name` makes about `predicate`, of
    /// type `predicate_type`.
    pub fn for_predicate<P: Serialize>(
        name: &str,
        predicate_type: &str,
        predicate: &P,
    ) -> Result<Statement, serde_json::Error> {
        let predicate = serde_json::to_value(predicate)?;
        Ok(Statement {
            statement_type: STATEMENT_TYPE.to_string(),
            subject: vec![Subject {
                name: name.to_string(),
                digest: DigestSet {
                    sha256: canonical_sha256(&predicate)?,
                },
            }],
            predicate_type: predicate_type.to_string(),
            predicate,
        })
    }
}
