//! Bounded file reading.
//!
//! A verifier reads files it does not trust; reading one must not be able to
//! exhaust memory. Every read in this crate goes through [`read_limited`],
//! which refuses a file over its limit before (and while) reading it.

use std::io::Read as _;
use std::path::Path;

use crate::error::EvidenceError;

/// Read all of `path`, refusing it if it holds more than `limit` bytes.
pub fn read_limited(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, EvidenceError> {
    let file = std::fs::File::open(path).map_err(|e| EvidenceError::io("open", path, e))?;
    let size = file
        .metadata()
        .map_err(|e| EvidenceError::io("read", path, e))?
        .len();
    if size > limit {
        return Err(EvidenceError::TooLarge { what, size, limit }.in_file(path));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| EvidenceError::io("read", path, e))?;
    if bytes.len() as u64 > limit {
        return Err(EvidenceError::TooLarge {
            what,
            size: bytes.len() as u64,
            limit,
        }
        .in_file(path));
    }
    Ok(bytes)
}
