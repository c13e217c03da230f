//! Canonical JSON: the one byte string a value hashes to.
//!
//! Digests in a receipt (the subject digest, `trace_sha256`, the
//! reproducible digest) must not depend on how some serializer happened to
//! order or space its output, or on which serde_json features another crate
//! in the build switched on. So every digest is taken over this form:
//!
//! * the value is first turned into plain JSON by its serde implementation
//!   (struct fields by name, `None` as `null`, enums by their renamed tags);
//! * object members are written sorted by key, comparing the keys' UTF-8
//!   bytes (which is the same as comparing Unicode code points);
//! * no whitespace anywhere;
//! * strings and numbers are written exactly as `serde_json` writes them:
//!   strings as UTF-8 with only `"`, `\` and control characters escaped,
//!   integers in decimal, floats in their shortest round-trip form (`300.0`,
//!   `0.25`).
//!
//! For the values kvwitness produces this equals Python's
//! `json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`,
//! which `scripts/ci/dsse_verify.py` uses to recompute subject digests
//! independently. (The two differ only for floats that need an exponent,
//! which no receipt field holds in practice.)

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Canonical JSON bytes of `value` (see the module documentation).
pub fn to_canonical_json<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let value = serde_json::to_value(value)?;
    let mut out = Vec::new();
    write_canonical(&value, &mut out)?;
    Ok(out)
}

/// Lowercase hex SHA-256 of the canonical JSON of `value`.
pub fn canonical_sha256<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    Ok(sha256_hex(&to_canonical_json(value)?))
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    match value {
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (key, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key)?;
                out.push(b':');
                write_canonical(item, out)?;
            }
            out.push(b'}');
        }
        scalar => serde_json::to_writer(&mut *out, scalar)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sorted_no_whitespace() {
        let v = serde_json::json!({"b": [1, {"z": null, "a": true}], "a": "x\"y", "é": 0.25, "B": 300.0});
        let got = String::from_utf8(to_canonical_json(&v).unwrap()).unwrap();
        assert_eq!(
            got,
            r#"{"B":300.0,"a":"x\"y","b":[1,{"a":true,"z":null}],"é":0.25}"#
        );
    }
}
