//! The members of a canonical JSON object as the exact bytes they hold.
//!
//! Canonical JSON (RFC 8785) writes a member's value inside its object
//! exactly as it writes that value alone, so once an object's bytes are known
//! to be canonical, the canonical JSON of each member is a slice of them, and
//! the canonical JSON of an object made of some of its members (keys in
//! order) is those slices joined. On native targets verification takes its
//! digests this way instead of writing the JSON again; the browser build,
//! where code size counts, writes it again ([`crate::canonical`]). Both give
//! the same bytes (the tests of [`crate::receipt`]).

use std::collections::BTreeMap;

use serde_json::value::RawValue;

/// Key → value bytes of the canonical JSON object `bytes`; `None` if it is
/// not an object or a key would need unescaping.
pub(crate) fn members(bytes: &[u8]) -> Option<BTreeMap<&str, &[u8]>> {
    let raw: BTreeMap<&str, &RawValue> = serde_json::from_slice(bytes).ok()?;
    Some(
        raw.into_iter()
            .map(|(k, v)| (k, v.get().as_bytes()))
            .collect(),
    )
}

/// The canonical JSON of an object of `members`: keys plain ASCII needing no
/// escape, given in canonical (sorted) order, values canonical JSON.
pub(crate) fn object(members: &[(&str, &[u8])]) -> Vec<u8> {
    let len = members
        .iter()
        .map(|(k, v)| k.len() + v.len() + 4)
        .sum::<usize>();
    let mut out = Vec::with_capacity(len + 2);
    out.push(b'{');
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(value);
    }
    out.push(b'}');
    out
}
