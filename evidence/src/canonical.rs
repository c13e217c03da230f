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
//! The writing itself is done by the `serde_json_canonicalizer` crate, or,
//! on native targets when every object's keys already come in UTF-16 order
//! (serde_json's maps iterate sorted by UTF-8 bytes, which is the same
//! order unless a key holds a character from U+E000 up), by serde_json's own
//! compact writer with ECMAScript numbers ([`JcsNumbers`]): the same bytes
//! without the crate's buffering and re-sorting of every object, which
//! dominated verification. JCS numbers are doubles, so an integer outside ±(2^53 − 1) (I-JSON's safe
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
    canonical_json_of(&serde_json::to_value(value)?)
}

/// [`to_canonical_json`] of a value already in JSON form, without copying
/// it first.
pub fn canonical_json_of(value: &Value) -> Result<Vec<u8>, serde_json::Error> {
    check_numbers(value)?;
    #[cfg(not(target_arch = "wasm32"))]
    if keys_in_jcs_order(value) {
        let mut out = Vec::with_capacity(4096);
        value.serialize(&mut serde_json::Serializer::with_formatter(
            &mut out, JcsNumbers,
        ))?;
        return Ok(out);
    }
    serde_json_canonicalizer::to_vec(value)
}

/// serde_json's compact writer with numbers written as ECMAScript writes a
/// double (`ryu_js`), as JCS requires. Its string escapes are already
/// JCS's (`\b \t \n \f \r` short, other control characters `\u00xx` in
/// lower case, nothing else escaped), and integers within ±(2^53 − 1),
/// the only ones [`check_numbers`] lets through, are written the same as
/// the double they equal. Used only on values whose keys come in JCS order
/// (the writer does not sort).
#[cfg(not(target_arch = "wasm32"))]
struct JcsNumbers;

#[cfg(not(target_arch = "wasm32"))]
impl serde_json::ser::Formatter for JcsNumbers {
    fn write_f64<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: f64,
    ) -> std::io::Result<()> {
        if !value.is_finite() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "NaN and infinities have no JSON form",
            ));
        }
        writer.write_all(ryu_js::Buffer::new().format_finite(value).as_bytes())
    }

    fn write_f32<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: f32,
    ) -> std::io::Result<()> {
        self.write_f64(writer, f64::from(value))
    }
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

/// Whether every object in `value` iterates its keys strictly ascending
/// by UTF-16 code units, the order JCS writes them in.
#[cfg(not(target_arch = "wasm32"))]
fn keys_in_jcs_order(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.iter().all(keys_in_jcs_order),
        Value::Object(map) => {
            let mut keys = map.keys();
            let mut prev = keys.next();
            keys.all(|key| {
                let ascending = prev.is_some_and(|p| p.encode_utf16().lt(key.encode_utf16()));
                prev = Some(key);
                ascending
            }) && map.values().all(keys_in_jcs_order)
        }
        _ => true,
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

    /// The compact writer gives the canonicalizer's bytes: numbers of every
    /// magnitude and sign, integers up to the safe bound, strings with each
    /// kind of escape, nested objects, and a whole signed predicate. Keys
    /// from U+E000 up take the canonicalizer (`rfc8785_examples`), and the
    /// check sees them.
    #[test]
    fn the_compact_writer_writes_the_canonicalizers_bytes() {
        let mut numbers = vec![
            serde_json::json!(0.0),
            serde_json::json!(-0.0),
            serde_json::json!(MAX_SAFE_INTEGER),
            serde_json::json!(-(MAX_SAFE_INTEGER as i64)),
            serde_json::json!(1e21),
            serde_json::json!(1e-7),
            serde_json::json!(123456789.125),
            serde_json::json!(f64::MIN_POSITIVE),
            serde_json::json!(f64::MAX),
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let f = f64::from_bits(x);
            if f.is_finite() {
                numbers.push(serde_json::json!(f));
            }
            numbers.push(serde_json::json!(x >> 11));
            numbers.push(serde_json::json!(-((x >> 12) as i64)));
            numbers.push(serde_json::json!((x % 100_000) as f64 / 64.0));
        }
        let strings: Vec<Value> = (0u32..0x80)
            .filter_map(char::from_u32)
            .chain(['é', '€', '\u{2028}', '\u{fb33}', '😀'])
            .map(|c| Value::String(format!("a{c}b/\"")))
            .collect();
        let sample = crate::sample::sample_predicate(crate::sample::sample_config(
            crate::Scale::Walkthrough,
            &[],
            crate::PoisonMode::Off,
            7,
        ));
        let values = [
            Value::Array(numbers),
            Value::Array(strings),
            serde_json::json!({"": {}, "a": [], "a\u{0}": 1, "ab": {"z": [null, true, false]}, "é": "\u{7f}"}),
            serde_json::to_value(&sample).unwrap(),
        ];
        for v in &values {
            assert!(keys_in_jcs_order(v));
            assert_eq!(
                to_canonical_json(v).unwrap(),
                serde_json_canonicalizer::to_vec(v).unwrap()
            );
        }
        let late_key = serde_json::json!({"\u{e000}": 1, "😀": 2});
        assert!(!keys_in_jcs_order(&late_key));
        assert_eq!(
            String::from_utf8(to_canonical_json(&late_key).unwrap()).unwrap(),
            "{\"😀\":2,\"\u{e000}\":1}"
        );
    }

    #[test]
    fn refuses_unsafe_integers() {
        assert!(to_canonical_json(&serde_json::json!({"seed": MAX_SAFE_INTEGER})).is_ok());
        assert!(to_canonical_json(&serde_json::json!({"seed": MAX_SAFE_INTEGER + 1})).is_err());
        assert!(to_canonical_json(&serde_json::json!([-(1i64 << 60)])).is_err());
    }
}
