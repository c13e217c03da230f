//! Internally tagged enums on the wire, externally tagged in the derive.
//!
//! A receipt writes an event or a claim as one flat object whose `kind`
//! names the variant: `{"kind": "reserve", "pages": [...], "tokens": 64}`.
//! serde can derive that form itself (`#[serde(tag = "kind")]`), but its
//! reader buffers each object into a private tree first and instantiates
//! every variant's visitor for that tree as well as for the real reader; in
//! the explorer's WebAssembly those two deserializers were the largest
//! single pieces of code. Here the enums derive serde's default, externally
//! tagged form (`{"reserve": {"pages": [...], "tokens": 64}}`), and the
//! types that hold them move the `kind` key in and out through a
//! [`serde_json::Value`]. The bytes a receipt signs are unchanged: they are
//! canonical JSON (RFC 8785), whose keys are sorted whatever order they were
//! written in, and the round-trip tests below pin the flat form.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// An object of one member (`insert`, not `from_iter`: collecting sorts, and
/// a sort is more code in the browser build than one insert).
fn one(key: String, value: Value) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert(key, value);
    map
}

fn invalid(message: impl std::fmt::Display) -> serde_json::Error {
    serde_json::Error::custom(message)
}

/// The key that names the variant.
pub const TAG: &str = "kind";

/// The flat object for `value`: its variant's fields plus [`TAG`].
pub fn flatten<T: Serialize>(value: &T) -> Result<Map<String, Value>, serde_json::Error> {
    match serde_json::to_value(value)? {
        // A unit variant.
        Value::String(name) => Ok(one(TAG.to_string(), Value::String(name))),
        Value::Object(outer) if outer.len() == 1 => {
            let Some((name, Value::Object(mut fields))) = outer.into_iter().next() else {
                return Err(invalid("a tagged variant must have named fields"));
            };
            put(&mut fields, TAG, Value::String(name))?;
            Ok(fields)
        }
        _ => Err(invalid("not an enum variant")),
    }
}

/// Read the variant a flat object names, refusing a missing or non-string
/// [`TAG`] and, through the enum's own derive, unknown variants and fields.
pub fn unflatten<T: DeserializeOwned>(
    mut fields: Map<String, Value>,
) -> Result<T, serde_json::Error> {
    let name = match fields.remove(TAG) {
        Some(Value::String(name)) => name,
        Some(_) => return Err(invalid(format!("`{TAG}` must be a string"))),
        None => return Err(serde_json::Error::missing_field(TAG)),
    };
    if fields.is_empty() {
        // A unit variant reads from its name alone; a variant with fields
        // that are all optional reads from an empty object.
        if let Ok(value) = T::deserialize(&Value::String(name.clone())) {
            return Ok(value);
        }
    }
    T::deserialize(&Value::Object(one(name, Value::Object(fields))))
}

/// Remove field `key` of a flat object and read it as a `T`.
pub fn take<T: DeserializeOwned>(
    fields: &mut Map<String, Value>,
    key: &'static str,
) -> Result<T, serde_json::Error> {
    let value = fields
        .remove(key)
        .ok_or_else(|| serde_json::Error::missing_field(key))?;
    T::deserialize(&value)
}

/// Add field `key` to a flat object, refusing a variant field of that name.
pub fn put(
    fields: &mut Map<String, Value>,
    key: &'static str,
    value: Value,
) -> Result<(), serde_json::Error> {
    match fields.insert(key.to_string(), value) {
        None => Ok(()),
        Some(_) => Err(invalid(format!("field `{key}` is written twice"))),
    }
}

/// `#[serde(with = "crate::tagged")]` for a field that holds a tagged enum.
pub fn serialize<T: Serialize, S: Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    flatten(value)
        .map_err(serde::ser::Error::custom)?
        .serialize(serializer)
}

/// `#[serde(with = "crate::tagged")]` for a field that holds a tagged enum.
pub fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    unflatten(Map::deserialize(deserializer)?).map_err(D::Error::custom)
}

#[cfg(test)]
mod tests {
    use crate::canonical::to_canonical_json;
    use crate::predicate::{Claim, Event, EventKind, Fact, PageRange, Provenance, Worker};

    fn event(kind: EventKind) -> Event {
        Event {
            at_us: 7,
            rid: "umbrella-0".into(),
            kind,
        }
    }

    #[test]
    fn events_are_flat_objects_with_their_kind() {
        let e = event(EventKind::Reserve {
            pages: vec![PageRange {
                first: 7,
                count: 3,
                down: true,
            }],
            tokens: 64,
        });
        let text = String::from_utf8(to_canonical_json(&e).unwrap()).unwrap();
        assert_eq!(
            text,
            r#"{"at_us":7,"kind":"reserve","pages":[{"count":3,"down":true,"first":7}],"rid":"umbrella-0","tokens":64}"#
        );
        assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), e);
    }

    #[test]
    fn claims_with_and_without_fields_round_trip() {
        for claim in [
            Claim::NothingReserved,
            Claim::InputRejected {
                worker: Worker::Prefill,
                input_len: 9,
                cap: 8,
            },
        ] {
            let fact = Fact {
                claim,
                provenance: Provenance::UpstreamCode,
                basis: "PR #1".into(),
            };
            let text = serde_json::to_string(&fact).unwrap();
            assert!(
                text.contains(r#""claim":{"#) && text.contains(r#""kind":""#),
                "{text}"
            );
            assert_eq!(serde_json::from_str::<Fact>(&text).unwrap(), fact);
        }
        let unit =
            r#"{"claim":{"kind":"nothing_reserved"},"provenance":"upstream-code","basis":"x"}"#;
        assert_eq!(
            serde_json::from_str::<Fact>(unit).unwrap().claim,
            Claim::NothingReserved
        );
    }

    #[test]
    fn unknown_fields_variants_and_bad_tags_are_refused() {
        let cases = [
            (
                r#"{"at_us":1,"rid":"r","kind":"handshake","room":3,"extra":1}"#,
                "unknown field `extra`",
            ),
            (
                r#"{"at_us":1,"rid":"r","kind":"teleport","room":3}"#,
                "unknown variant `teleport`",
            ),
            (r#"{"at_us":1,"rid":"r","room":3}"#, "missing field `kind`"),
            (
                r#"{"at_us":1,"rid":"r","kind":4,"room":3}"#,
                "`kind` must be a string",
            ),
            (
                r#"{"rid":"r","kind":"handshake","room":3}"#,
                "missing field `at_us`",
            ),
            (
                r#"{"at_us":1,"rid":"r","kind":"handshake"}"#,
                "missing field `room`",
            ),
        ];
        for (json, says) in cases {
            let err = serde_json::from_str::<Event>(json).unwrap_err().to_string();
            assert!(err.contains(says), "{json}: {err}");
        }
        let claim = r#"{"claim":{"kind":"result_retired","pages":1},"provenance":"upstream-code","basis":"x"}"#;
        assert!(serde_json::from_str::<Fact>(claim).is_err());
    }
}
