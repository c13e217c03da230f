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

/// [`to_canonical_json`] of a JSON value already held, without copying it
/// into a second tree first.
pub fn value_to_canonical_json(value: &Value) -> Result<Vec<u8>, serde_json::Error> {
    check_numbers(value)?;
    serde_json_canonicalizer::to_vec(value)
}

/// Canonical JSON of the object whose members are `members`, each value
/// given as its own canonical JSON. JCS writes an object member by member
/// (keys sorted by UTF-16 code units, each value canonical on its own), so
/// this is the same bytes as canonicalizing the whole object again.
pub fn canonical_object(members: &mut [(&str, &[u8])]) -> Result<Vec<u8>, serde_json::Error> {
    members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    let size: usize = members.iter().map(|(k, v)| k.len() + v.len() + 4).sum();
    let mut out = Vec::with_capacity(size + 2);
    out.push(b'{');
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json_canonicalizer::to_writer(key, &mut out)?;
        out.push(b':');
        out.extend_from_slice(value);
    }
    out.push(b'}');
    Ok(out)
}

/// The top-level members of the canonical JSON object `canonical`, each
/// value as the bytes it spans there: in canonical JSON those bytes are the
/// member value's own canonical JSON.
pub fn object_members(
    canonical: &[u8],
) -> Result<std::collections::BTreeMap<String, &[u8]>, serde_json::Error> {
    let members: std::collections::BTreeMap<String, &serde_json::value::RawValue> =
        serde_json::from_slice(canonical)?;
    Ok(members
        .into_iter()
        .map(|(k, v)| (k, v.get().as_bytes()))
        .collect())
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
pub(crate) fn check_numbers(value: &Value) -> Result<(), serde_json::Error> {
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

    #[test]
    fn an_object_put_together_from_canonical_members_is_its_canonical_json() {
        // Keys that sort differently by UTF-8 bytes and by UTF-16 units,
        // escapes, numbers JCS rewrites, nesting.
        let v = serde_json::json!({
            "\u{1F600}": 1, "\u{FB33}": [2.50, 1e21], "b\n": {"z": null, "a": "\u{1}"}, "a": true
        });
        let Value::Object(map) = &v else {
            unreachable!()
        };
        let values: Vec<(String, Vec<u8>)> = map
            .iter()
            .map(|(k, x)| (k.clone(), value_to_canonical_json(x).unwrap()))
            .collect();
        let mut members: Vec<(&str, &[u8])> = values
            .iter()
            .map(|(k, x)| (k.as_str(), x.as_slice()))
            .collect();
        let whole = to_canonical_json(&v).unwrap();
        assert_eq!(canonical_object(&mut members).unwrap(), whole);
        let spans = object_members(&whole).unwrap();
        for (k, x) in &values {
            assert_eq!(spans[k], x.as_slice(), "member {k:?}");
        }
    }
}
