//! DSSE envelopes: the signed wrapper around every receipt.
//!
//! A receipt must be checkable by tools that know nothing about kvwitness,
//! so it uses the Dead Simple Signing Envelope
//! (<https://github.com/secure-systems-lab/dsse/blob/master/envelope.md>):
//! a JSON object with the `payloadType`, the base64 `payload` and a list of
//! `signatures`, each `{keyid, sig}` with `sig` the base64 signature over the
//! pre-authentication encoding ([`pae`]) of type and payload. Signing the PAE
//! rather than the raw payload binds the type to the bytes, so a payload can
//! not be reinterpreted under another type.
//!
//! Envelopes are written with standard base64 (with padding); reading also
//! accepts the URL-safe alphabet and missing padding, as the DSSE
//! specification asks of decoders. Unknown fields are refused.

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::error::EvidenceError;
use crate::signing::{PublicKey, Signer};

/// A DSSE envelope as it appears on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// Media type of the payload; `application/vnd.in-toto+json` for receipts.
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    /// Base64 of the payload bytes.
    pub payload: String,
    /// One or more signatures over `pae(payloadType, payload)`.
    pub signatures: Vec<Signature>,
}

/// One DSSE signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    /// Id of the key that made the signature (see [`crate::signing`]).
    pub keyid: String,
    /// Base64 of the 64-byte ed25519 signature.
    pub sig: String,
}

/// The DSSE pre-authentication encoding:
/// `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, where `LEN` is the
/// byte length in ASCII decimal without leading zeros and `SP` one space.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload_type.len() + payload.len() + 32);
    out.extend_from_slice(b"DSSEv1 ");
    out.extend_from_slice(payload_type.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload_type.as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload);
    out
}

/// Decode base64 in any of the alphabets DSSE readers must accept.
pub(crate) fn decode_base64(text: &str, what: &'static str) -> Result<Vec<u8>, EvidenceError> {
    [&STANDARD_ANY_PAD, &URL_SAFE_ANY_PAD]
        .into_iter()
        .find_map(|engine| engine.decode(text).ok())
        .ok_or(EvidenceError::Base64 { what })
}

/// Padding optional and, where present, canonical: what `STANDARD` and
/// `STANDARD_NO_PAD` accept between them, in one engine.
const ANY_PAD: GeneralPurposeConfig =
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
const STANDARD_ANY_PAD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, ANY_PAD);
const URL_SAFE_ANY_PAD: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, ANY_PAD);

impl Envelope {
    /// Sign `payload` of type `payload_type` with one key.
    pub fn sign(payload_type: &str, payload: &[u8], signer: &Signer) -> Envelope {
        let signature = signer.sign(&pae(payload_type, payload));
        Envelope {
            payload_type: payload_type.to_string(),
            payload: STANDARD.encode(payload),
            signatures: vec![Signature {
                keyid: signer.keyid(),
                sig: STANDARD.encode(signature),
            }],
        }
    }

    /// Parse an envelope from JSON bytes, refusing unknown fields.
    pub fn from_json(bytes: &[u8]) -> Result<Envelope, EvidenceError> {
        serde_json::from_slice(bytes).map_err(|e| EvidenceError::json("DSSE envelope", e))
    }

    /// Pretty JSON with a trailing newline, as receipts are stored.
    pub fn to_json_pretty(&self) -> String {
        // Two strings and a list of string pairs always serialize.
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// The decoded payload bytes (not yet authenticated).
    pub fn payload_bytes(&self) -> Result<Vec<u8>, EvidenceError> {
        decode_base64(&self.payload, "payload")
    }

    /// Check that a signature by `key` (matched by key id) verifies over the
    /// PAE of this envelope, and return the authenticated payload bytes.
    pub fn verify(&self, key: &PublicKey) -> Result<Vec<u8>, EvidenceError> {
        let keyid = key.keyid();
        let payload = self.payload_bytes()?;
        let message = pae(&self.payload_type, &payload);
        let mut matched = false;
        for signature in self.signatures.iter().filter(|s| s.keyid == keyid) {
            matched = true;
            let Ok(sig) = decode_base64(&signature.sig, "signature") else {
                continue;
            };
            if key.verify(&message, &sig) {
                return Ok(payload);
            }
        }
        if matched {
            Err(EvidenceError::BadSignature { keyid })
        } else {
            let found = if self.signatures.is_empty() {
                "nobody".to_string()
            } else {
                self.signatures
                    .iter()
                    .map(|s| s.keyid.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            Err(EvidenceError::NoSignatureForKey { keyid, found })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_matches_the_specification_example() {
        // Example from the DSSE protocol document.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ".to_vec());
    }

    #[test]
    fn base64_alphabets() {
        assert_eq!(decode_base64("+/8=", "x").unwrap(), vec![0xfb, 0xff]);
        assert_eq!(decode_base64("-_8", "x").unwrap(), vec![0xfb, 0xff]);
        assert!(decode_base64("*", "x").is_err());
        // Padding is optional in both alphabets, but never wrong or mixed.
        assert_eq!(decode_base64("+/8", "x").unwrap(), vec![0xfb, 0xff]);
        assert_eq!(decode_base64("-_8=", "x").unwrap(), vec![0xfb, 0xff]);
        assert!(decode_base64("+/8==", "x").is_err());
        assert!(decode_base64("+_8=", "x").is_err());
        assert!(decode_base64("+/9=", "x").is_err());
    }
}
