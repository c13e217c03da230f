//! `SHA256SUMS`: the bundle's file list in GNU `sha256sum` format, so
//! `sha256sum -c SHA256SUMS` checks a bundle with coreutils alone.
//!
//! Parsing is pure (no file system access): an entry must be a plain
//! relative path inside the bundle — not absolute, no `..`, no `.` or empty
//! component, no backslash — listed once, and never `SHA256SUMS` itself.

use std::collections::BTreeMap;

use super::{bundle_err, SUMS_FILE};
use crate::canonical::sha256_hex;
use crate::error::EvidenceError;

/// `SHA256SUMS` text for `files` (path → bytes), one `<hex>  <path>` line
/// each, sorted by path.
pub fn render(files: &BTreeMap<String, Vec<u8>>) -> String {
    files
        .iter()
        .map(|(path, bytes)| format!("{}  {path}\n", sha256_hex(bytes)))
        .collect()
}

/// Parse `SHA256SUMS` into path → lowercase hex digest.
pub fn parse(text: &str) -> Result<BTreeMap<String, String>, EvidenceError> {
    let mut entries = BTreeMap::new();
    for (n, line) in text.split('\n').enumerate() {
        let at = |msg: String| bundle_err(format!("{SUMS_FILE} line {}: {msg}", n + 1));
        if line.is_empty() {
            continue;
        }
        let (digest, rest) = match (line.get(..64), line.get(64..)) {
            (Some(d), Some(r)) if d.bytes().all(|b| b.is_ascii_hexdigit()) => (d, r),
            _ => return Err(at("not a `<sha256>  <file>` line".into())),
        };
        let Some(path) = rest.strip_prefix("  ").or_else(|| rest.strip_prefix(" *")) else {
            return Err(at("not a `<sha256>  <file>` line".into()));
        };
        if path.is_empty() {
            return Err(at("no file name".into()));
        }
        if path.starts_with('/') {
            return Err(at(format!(
                "{path} is an absolute path, outside the bundle"
            )));
        }
        if path.contains('\\') {
            return Err(at(format!("{path} contains a backslash")));
        }
        if path.split('/').any(|c| c == "..") {
            return Err(at(format!("{path} points outside the bundle")));
        }
        if path.split('/').any(|c| c.is_empty() || c == ".") {
            return Err(at(format!("{path} is not a plain relative path")));
        }
        if path.chars().any(char::is_control) {
            return Err(at("a file name holds a control character".into()));
        }
        if path == SUMS_FILE {
            return Err(at(format!("{SUMS_FILE} cannot list itself")));
        }
        if entries
            .insert(path.to_string(), digest.to_ascii_lowercase())
            .is_some()
        {
            return Err(at(format!("{path} is listed twice")));
        }
    }
    Ok(entries)
}
