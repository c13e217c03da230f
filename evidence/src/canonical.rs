//! Canonical JSON: the one byte string a value hashes to.
//!
//! Digests in a receipt (the subject digest, `trace_sha256`, the
//! reproducible digest) and the DSSE payload itself are RFC 8785 JSON
//! Canonicalization Scheme (JCS) bytes, so any JCS implementation (for
//! example Python's `rfc8785`, which `scripts/ci/dsse_verify.py` uses)
//! recomputes them:
//!
//! * the value is first turned into plain JSON by its serde implementation
//!   (struct fields by name, `None` as `null`, enums by their renamed tags);
//! * object members are sorted by key, comparing the keys' UTF-16 code units;
//! * no whitespace anywhere;
//! * strings escape only `"`, `\` and control characters (`\b \t \n \f \r`
//!   short forms, `\u00xx` otherwise), everything else is literal UTF-8;
//! * numbers are written as ECMAScript's `Number.prototype.toString` writes
//!   an IEEE-754 double: `300` not `300.0`, `1e+21`, `0.25`.
//!
//! The writing itself is done by the `serde_json_canonicalizer` crate. JCS
//! numbers are doubles, so an integer outside ±(2^53 − 1) (I-JSON's safe
//! range) cannot be represented exactly; rather than round it silently, as
//! a double would, [`to_canonical_json`] refuses it, as Python's `rfc8785`
//! does.

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Largest integer magnitude JCS represents exactly (2^53 − 1).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Canonical (RFC 8785) JSON bytes of `value` (see the module documentation).
pub fn to_canonical_json<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let value = serde_json::to_value(value)?;
    check_numbers(&value)?;
    serde_json_canonicalizer::to_vec(&value)
}

/// Lowercase hex SHA-256 of the canonical JSON of `value`.
pub fn canonical_sha256<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    Ok(sha256_hex(&to_canonical_json(value)?))
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Refuse numbers JCS cannot write exactly: integers beyond
/// ±[`MAX_SAFE_INTEGER`] and non-finite floats.
fn check_numbers(value: &Value) -> Result<(), serde_json::Error> {
    use serde::ser::Error as _;
    match value {
        Value::Number(n) => {
            let exact = if let Some(u) = n.as_u64() {
                u <= MAX_SAFE_INTEGER
            } else if let Some(i) = n.as_i64() {
                i.unsigned_abs() <= MAX_SAFE_INTEGER
            } else {
                n.as_f64().is_some_and(f64::is_finite)
            };
            if exact {
                Ok(())
            } else {
                Err(serde_json::Error::custom(format!(
                    "number {n} is outside the range canonical JSON (RFC 8785) represents exactly"
                )))
            }
        }
        Value::Array(items) => items.iter().try_for_each(check_numbers),
        Value::Object(map) => map.values().try_for_each(check_numbers),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jcs(v: &Value) -> String {
        String::from_utf8(to_canonical_json(v).unwrap()).unwrap()
    }

    #[test]
    fn keys_sorted_no_whitespace_numbers_as_ecmascript() {
        let v = serde_json::json!({"b": [1, {"z": null, "a": true}], "a": "x\"y", "é": 0.25, "B": 300.0});
        assert_eq!(
            jcs(&v),
            r#"{"B":300,"a":"x\"y","b":[1,{"a":true,"z":null}],"é":0.25}"#
        );
    }

    #[test]
    fn rfc8785_examples() {
        // RFC 8785 §3.2.3: keys sorted by UTF-16 code units.
        let v: Value = serde_json::from_str(
            r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}"#,
        )
        .unwrap();
        let text = jcs(&v);
        let positions: Vec<usize> = ["\\r", "1", "\u{80}", "ö", "€", "😀", "\u{fb33}"]
            .iter()
            .map(|k| text.find(&format!("\"{k}\":")).unwrap())
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
        // §3.2.2.3 numbers.
        let n: Value = serde_json::from_str("[333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001, -0.0, 1e21, 1e20]").unwrap();
        assert_eq!(
            jcs(&n),
            "[333333333.3333333,1e+30,4.5,0.002,1e-27,0,1e+21,100000000000000000000]"
        );
        // §3.2.2.2 strings.
        let s = Value::String("\u{20ac}$\u{f}\nA'B\"\\\\\"/".into());
        assert_eq!(jcs(&s), "\"€$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"");
    }

    #[test]
    fn refuses_unsafe_integers() {
        assert!(to_canonical_json(&serde_json::json!({"seed": MAX_SAFE_INTEGER})).is_ok());
        assert!(to_canonical_json(&serde_json::json!({"seed": MAX_SAFE_INTEGER + 1})).is_err());
        assert!(to_canonical_json(&serde_json::json!([-(1i64 << 60)])).is_err());
    }
}
