//! What happened, recorded as typed events while it happens.
//!
//! The simulator's mechanics report facts here — a door decided, pages were
//! reserved, a write landed — for every request, with no step numbers and
//! no sentences. For the probed request they may also attach a page picture
//! to an event. [`crate::narrate`] later maps these events onto the seven
//! steps; readers' sentences are rendered from the receipt, never stored.

use kvw_evidence::{Event, EventKind, PageRange, PageView, ReqState};

use crate::req::Req;

/// Every event of a run, in order, with the index of its request.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub events: Vec<Event>,
    /// `requests[i]` is the request index of `events[i]`.
    pub requests: Vec<u32>,
    /// Page pictures of the probed request, keyed by event index.
    pub pictures: Vec<(usize, PageView)>,
}

impl Trace {
    pub fn new() -> Self {
        Self::default()
    }

    /// Record an event of request `req` (whose id is `rid`); returns its index.
    pub fn record(&mut self, req: u32, rid: &str, at_us: u64, kind: EventKind) -> usize {
        self.events.push(Event {
            at_us,
            rid: rid.to_string(),
            kind,
        });
        self.requests.push(req);
        self.events.len() - 1
    }

    /// Attach a page picture to event `index`.
    pub fn picture(&mut self, index: usize, view: PageView) {
        self.pictures.push((index, view));
    }
}

/// Snapshot of a `Req` at a door.
pub fn req_state(req: &Req, original_prompt_len: usize, door: &str, decision: &str) -> ReqState {
    ReqState {
        door: door.to_string(),
        to_finish: req.to_finish.as_ref().map(|r| r.to_string()),
        finished_reason: req.finished_reason.as_ref().map(|r| r.to_string()),
        finished: req.finished(),
        original_prompt_len: original_prompt_len as u64,
        origin_input_len: req.input_len() as u64,
        decision: decision.to_string(),
    }
}

/// Compress a page list (in table order) into ascending runs.
pub fn ranges(pages: &[u32]) -> Vec<PageRange> {
    let mut out: Vec<PageRange> = Vec::new();
    for &p in pages {
        let p = p as u64;
        match out.last_mut() {
            Some(r) if r.first + r.count == p => r.count += 1,
            _ => out.push(PageRange { first: p, count: 1 }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_compress_ascending_runs_only() {
        let r = ranges(&[5, 6, 7, 3, 2, 9]);
        let pairs: Vec<_> = r.iter().map(|r| (r.first, r.count)).collect();
        assert_eq!(pairs, vec![(5, 3), (3, 1), (2, 1), (9, 1)]);
        assert!(ranges(&[]).is_empty());
    }
}
