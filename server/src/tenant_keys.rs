//! API keys and the tenants they name.
//!
//! `--key K` (repeatable) makes `K` a key whose tenant is `K` itself;
//! `--keys-file F` reads one `tenant:key` (or bare `key`) per line, `#`
//! comments and blank lines skipped. A request's `Authorization: Bearer`
//! key selects the tenant; an unknown or missing key is refused with 401.
//! With no key configured the endpoint is open: any well-formed bearer key
//! is accepted and names its own tenant (a local demo; still loopback only).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context};

/// Largest keys file read: 1 MiB holds thousands of `tenant:key` lines.
pub const MAX_KEYS_FILE_BYTES: u64 = 1024 * 1024;

/// Key → tenant; empty means open (every well-formed key is its own tenant).
#[derive(Debug, Clone, Default)]
pub struct Keys(HashMap<String, String>);

impl Keys {
    /// Build from `--key` values and an optional keys file.
    pub fn load(keys: &[String], file: Option<&Path>) -> anyhow::Result<Keys> {
        let mut map = HashMap::new();
        for k in keys {
            add(&mut map, k, k)?;
        }
        if let Some(path) = file {
            // Bounded and regular files only: a FIFO or /dev/zero is refused.
            let text = kvw_evidence::fsutil::read_text(path, MAX_KEYS_FILE_BYTES, "keys file")
                .map_err(|e| anyhow::anyhow!("--keys-file: {e}"))?;
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let (tenant, key) = line.split_once(':').unwrap_or((line, line));
                add(&mut map, tenant.trim(), key.trim())
                    .with_context(|| format!("{} line {}", path.display(), n + 1))?;
            }
        }
        Ok(Keys(map))
    }

    /// The tenant an `Authorization` header value names.
    pub fn tenant<'a>(&'a self, authorization: Option<&'a str>) -> Option<&'a str> {
        let key = authorization?.strip_prefix("Bearer ")?.trim();
        if self.0.is_empty() {
            return well_formed(key).then_some(key);
        }
        self.0.get(key).map(String::as_str)
    }

    /// Whether any well-formed key is accepted.
    pub fn is_open(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// 1-128 letters, digits, `-`, `_` or `.`.
fn well_formed(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

fn add(map: &mut HashMap<String, String>, tenant: &str, key: &str) -> anyhow::Result<()> {
    if !well_formed(key) || !well_formed(tenant) {
        bail!("keys and tenant names are 1-128 letters, digits, '-', '_' or '.'");
    }
    map.insert(key.to_string(), tenant.to_string());
    Ok(())
}
