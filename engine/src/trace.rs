//! What happened, recorded as typed events while it happens.
//!
//! The simulator's mechanics report facts here — a door decided, pages were
//! reserved, a write landed — for every request, with no step numbers and
//! no sentences. For the probed request they may also attach a page picture
//! to an event. [`crate::narrate`] later maps these events onto the seven
//! steps; readers' sentences are rendered from the receipt, never stored.

use kvw_evidence::{DoorDecision, DoorName, Event, EventKind, PageRange, PageView, ReqState};

use crate::req::{FinishReason, Req};

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
    ///
    /// A landing right after a landing of the same request (no event of any
    /// request in between) joins that event: the transfer lands page by
    /// page, and one event per page would make an incident-scale receipt
    /// megabytes long without saying more. Event order is unchanged.
    pub fn record(&mut self, req: u32, rid: &str, at_us: u64, kind: EventKind) -> usize {
        if let EventKind::KvLanded { pages, .. } = &kind {
            if let Some(i) = self.extend_landing(req, at_us, pages) {
                return i;
            }
        }
        self.events.push(Event {
            at_us,
            rid: rid.to_string(),
            kind,
        });
        self.requests.push(req);
        self.events.len() - 1
    }

    /// Join `pages`, landed at `at_us`, to the last event if it is a landing
    /// of the same request; returns that event's index.
    fn extend_landing(&mut self, req: u32, at_us: u64, pages: &[PageRange]) -> Option<usize> {
        let i = self.events.len().checked_sub(1)?;
        if self.requests[i] != req {
            return None;
        }
        let EventKind::KvLanded {
            pages: landed,
            until_us,
        } = &mut self.events[i].kind
        else {
            return None;
        };
        for p in pages.iter().flat_map(PageRange::pages) {
            push_page(landed, p);
        }
        *until_us = Some(at_us);
        Some(i)
    }

    /// Attach a page picture to event `index`.
    pub fn picture(&mut self, index: usize, view: PageView) {
        self.pictures.push((index, view));
    }
}

/// Snapshot of a `Req` at a door.
pub fn req_state(
    req: &Req,
    original_prompt_len: usize,
    door: DoorName,
    decision: DoorDecision,
) -> ReqState {
    ReqState {
        door,
        to_finish: req.to_finish.as_ref().map(FinishReason::signed),
        finished_reason: req.finished_reason.as_ref().map(FinishReason::signed),
        finished: req.finished(),
        original_prompt_len: original_prompt_len as u64,
        origin_input_len: req.input_len() as u64,
        decision,
    }
}

/// Compress a page list (in table order) into runs that count up or down.
pub fn ranges<P: Copy + Into<u64>>(pages: &[P]) -> Vec<PageRange> {
    let mut out: Vec<PageRange> = Vec::new();
    for &p in pages {
        push_page(&mut out, p.into());
    }
    out
}

/// Append page `p` to runs in table order, extending the last run when `p`
/// continues it.
fn push_page(out: &mut Vec<PageRange>, p: u64) {
    match out.last_mut() {
        Some(r) if r.count == 1 && r.first.checked_sub(1) == Some(p) => {
            *r = PageRange::down(r.first, 2)
        }
        Some(r) if !r.down && r.first + r.count == p => r.count += 1,
        Some(r) if r.down && r.first.checked_sub(r.count) == Some(p) => r.count += 1,
        _ => out.push(PageRange::up(p, 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_compress_runs_in_both_directions() {
        let r = ranges(&[5u32, 6, 7, 3, 2, 1, 9, 20, 19]);
        let runs: Vec<_> = r.iter().map(|r| (r.first, r.count, r.down)).collect();
        assert_eq!(
            runs,
            vec![(5, 3, false), (3, 3, true), (9, 1, false), (20, 2, true)]
        );
        let back: Vec<u64> = r.iter().flat_map(PageRange::pages).collect();
        assert_eq!(back, vec![5, 6, 7, 3, 2, 1, 9, 20, 19]);
        assert!(ranges::<u32>(&[]).is_empty());
    }

    #[test]
    fn consecutive_landings_of_one_request_are_one_event() {
        let land = |pages: &[u32]| EventKind::KvLanded {
            pages: ranges(pages),
            until_us: None,
        };
        let mut t = Trace::new();
        assert_eq!(t.record(0, "a-1", 10, land(&[7])), 0);
        assert_eq!(t.record(0, "a-1", 11, land(&[6])), 0);
        assert_eq!(t.record(1, "b-2", 12, land(&[3])), 1);
        assert_eq!(t.record(0, "a-1", 13, land(&[5])), 2);
        assert_eq!(t.events.len(), 3);
        match &t.events[0].kind {
            EventKind::KvLanded { pages, until_us } => {
                assert_eq!(pages, &vec![PageRange::down(7, 2)]);
                assert_eq!(*until_us, Some(11));
            }
            other => panic!("not a landing: {other:?}"),
        }
        assert_eq!(t.events[0].at_us, 10);
    }
}
