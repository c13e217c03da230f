//! The one error type of the evidence crate.
//!
//! A verifier's job is to say *what* is wrong, so every variant renders as a
//! single line that names the problem, and [`EvidenceError::in_file`] prefixes
//! the file when one is known. Callers print the error as is; nothing here
//! ever needs a backtrace to be understood. For the same reason no variant
//! exposes a `source()` chain: the one line already says everything, and
//! printers that walk the chain would repeat it.

use std::path::{Path, PathBuf};

/// Why signing, verification, a key or a bundle was refused.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    /// Another error, located in a file.
    #[error("{}: {inner}", path.display())]
    InFile {
        path: PathBuf,
        inner: Box<EvidenceError>,
    },

    /// The file system refused an operation.
    #[error("cannot {action} {}: {cause}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        cause: std::io::Error,
    },

    /// A path that is a link, FIFO, device, socket or folder where a
    /// regular file is expected.
    #[error("is {kind}, not a regular file")]
    NotRegularFile { kind: &'static str },

    /// A file that should hold text holds other bytes.
    #[error("{what} is not UTF-8 text")]
    NotText { what: &'static str },

    /// Input larger than the verifier accepts.
    #[error("{what} is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        what: &'static str,
        size: u64,
        limit: u64,
    },

    /// Input that is not JSON, or not JSON of the expected shape.
    #[error("{what} is not valid: {detail}")]
    Json { what: &'static str, detail: String },

    /// A base64 field that does not decode.
    #[error("{what} is not valid base64")]
    Base64 { what: &'static str },

    /// The DSSE `payloadType` is not the in-toto one.
    #[error("payloadType is {found:?}, expected {expected:?}")]
    PayloadType {
        found: String,
        expected: &'static str,
    },

    /// No signature in the envelope carries the verifying key's id.
    #[error("no signature by key {keyid} (signed by: {found})")]
    NoSignatureForKey { keyid: String, found: String },

    /// A signature with the right key id that does not verify.
    #[error("signature by key {keyid} does not verify (tampered payload or signature)")]
    BadSignature { keyid: String },

    /// The in-toto Statement `_type` is not Statement v1.
    #[error("statement _type is {found:?}, expected {expected:?}")]
    StatementType {
        found: String,
        expected: &'static str,
    },

    /// A `predicateType` this verifier does not know.
    #[error("unknown predicate version {found:?} (this verifier knows {expected:?})")]
    UnknownPredicate {
        found: String,
        expected: &'static str,
    },

    /// A signed payload that is not the canonical JSON of what it parses to.
    #[error(
        "payload is not canonical JSON (RFC 8785) of the statement it parses to \
         (duplicate keys, whitespace, key order or number spelling)"
    )]
    NotCanonical,

    /// The Statement's subject is malformed or does not match the predicate.
    #[error("subject: {0}")]
    Subject(String),

    /// `trace_sha256` does not match the steps.
    #[error("trace_sha256 is {found}, but the steps hash to {expected}")]
    TraceDigest { found: String, expected: String },

    /// The steps are not exactly steps 1..=7 in order.
    #[error("steps: {0}")]
    Steps(String),

    /// A key file or key that cannot be used.
    #[error("key: {0}")]
    Key(String),

    /// A bundle folder that is malformed, incomplete or tampered with.
    #[error("bundle: {0}")]
    Bundle(String),

    /// A name (receipt or file) that is not acceptable.
    #[error("name {name:?}: {reason}")]
    Name { name: String, reason: &'static str },
}

impl EvidenceError {
    /// Locate this error in `path` (the file it was found in).
    pub fn in_file(self, path: impl AsRef<Path>) -> EvidenceError {
        EvidenceError::InFile {
            path: path.as_ref().to_path_buf(),
            inner: Box::new(self),
        }
    }

    /// This error without its file location (for output that already names
    /// the file).
    pub fn unlocated(self) -> EvidenceError {
        match self {
            EvidenceError::InFile { inner, .. } => inner.unlocated(),
            other => other,
        }
    }

    pub(crate) fn json(what: &'static str, err: serde_json::Error) -> EvidenceError {
        EvidenceError::Json {
            what,
            detail: err.to_string(),
        }
    }

    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn io(action: &'static str, path: &Path, cause: std::io::Error) -> EvidenceError {
        EvidenceError::Io {
            action,
            path: path.to_path_buf(),
            cause,
        }
    }
}
