//! How a scenario row's reason names what it saw.
//!
//! A row's "why" is read on the gates page and in `kvw gates`: it names
//! doors, answers and resources the way the receipts and upstream do
//! (`DecodePreallocQueue.add`, `HTTP 400`, `metadata_buffer_index`), never as
//! Rust debug values.

use kvw_evidence::{DoorDecision, DoorName, ResourceKind, Worker};

/// A door's decision as the receipts spell it.
pub(crate) fn decided(d: Option<DoorDecision>) -> &'static str {
    match d {
        None => "nothing (the request never reached it)",
        Some(DoorDecision::Admitted) => "admitted",
        Some(DoorDecision::Retired) => "retired",
        Some(DoorDecision::Dropped) => "dropped",
        Some(DoorDecision::SentLastChunk) => "sent_last_chunk",
        Some(DoorDecision::Aborted) => "aborted",
    }
}

/// A door by its upstream function (`DecodePreallocQueue.add`).
pub(crate) fn door(d: DoorName) -> &'static str {
    kvw_evidence::render::door_name(d)
}

/// A worker as the events name it.
pub(crate) fn worker(w: Worker) -> &'static str {
    kvw_evidence::render::worker(w, kvw_evidence::render::Lang::En)
}

/// A per-request resource by its upstream field.
pub(crate) fn resource(k: ResourceKind) -> &'static str {
    kvw_evidence::render::resource_name(k, kvw_evidence::render::Lang::En)
}

/// The client's status: `HTTP 400`, or `no answer`.
pub(crate) fn status(s: Option<u16>) -> String {
    s.map_or_else(|| "no answer".to_string(), |s| format!("HTTP {s}"))
}

/// A worker's answers with their finish reasons, or `no answer`.
pub(crate) fn answers(a: &[(u16, String)]) -> String {
    if a.is_empty() {
        return "no answer".to_string();
    }
    let each: Vec<String> = a
        .iter()
        .map(|(s, reason)| format!("HTTP {s} ({reason})"))
        .collect();
    each.join(", ")
}

/// An event of the run by its index, or `no event`.
pub(crate) fn event(i: Option<usize>) -> String {
    i.map_or_else(|| "no event".to_string(), |i| format!("event {i}"))
}

/// Writes that landed in pages their writer no longer held.
pub(crate) fn stale(writes: &[(u32, u32)]) -> String {
    let each: Vec<String> = writes
        .iter()
        .map(|(req, page)| format!("page {page} (request {})", req + 1))
        .collect();
    each.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_as_words() {
        assert_eq!(status(Some(400)), "HTTP 400");
        assert_eq!(status(None), "no answer");
        assert_eq!(answers(&[(500, "abort".into())]), "HTTP 500 (abort)");
        assert_eq!(answers(&[]), "no answer");
        assert_eq!(
            stale(&[(0, 5), (2, 7)]),
            "page 5 (request 1), page 7 (request 3)"
        );
        assert_eq!(
            door(DoorName::DecodePreallocQueue),
            "DecodePreallocQueue.add"
        );
    }
}
