//! What the probed request lived through, recorded as it happens.
//!
//! The simulator reports every event here with the step of the incident it
//! belongs to. For the probed request it also records the state of its `Req`
//! at each door, the page picture at the steps that touch pages, the source
//! lines that made each decision and a sentence or two per step. The probe
//! turns this log into the seven receipt steps.

use kvw_evidence::{Event, PageRange, PageView, ReqState, SourceOrigin, SourceRef};

use crate::req::Req;

/// Point at the engine line that calls this macro.
#[macro_export]
macro_rules! engine_ref {
    ($label:expr) => {
        kvw_evidence::SourceRef {
            origin: kvw_evidence::SourceOrigin::Engine,
            path: file!().to_string(),
            line_start: Some(line!()),
            line_end: None,
            label: $label.to_string(),
        }
    };
}

/// Point at lines of the pinned upstream tree.
pub fn upstream_ref(path: &str, lines: Option<(u32, u32)>, label: &str) -> SourceRef {
    SourceRef {
        origin: SourceOrigin::Upstream,
        path: path.to_string(),
        line_start: lines.map(|l| l.0),
        line_end: lines.map(|l| l.1),
        label: label.to_string(),
    }
}

/// Everything recorded for one step of the probed request.
#[derive(Debug, Clone, Default)]
pub struct StepLog {
    pub reached: bool,
    pub state: Option<ReqState>,
    pub pages: Option<PageView>,
    pub sources: Vec<SourceRef>,
    pub events: Vec<Event>,
    pub sentences: Vec<String>,
}

/// The run's log. Index 0 is unused so `steps[n]` is step n.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub steps: [StepLog; 8],
    /// The step the probed request reached last; other requests' events
    /// land in it (step 1 before the probed request arrives).
    pub current: u8,
}

impl Trace {
    pub fn new() -> Self {
        Trace {
            current: 1,
            ..Default::default()
        }
    }

    /// Record an event in `step` (or in the current step when `None`).
    pub fn event(
        &mut self,
        step: Option<u8>,
        t_us: u64,
        actor: &str,
        rid: &str,
        kind: &str,
        detail: String,
    ) {
        let s = step.unwrap_or(self.current) as usize;
        self.steps[s].events.push(Event {
            t_us,
            actor: actor.to_string(),
            rid: rid.to_string(),
            kind: kind.to_string(),
            detail,
        });
    }

    /// The probed request reached `step`.
    pub fn reach(&mut self, step: u8) {
        self.steps[step as usize].reached = true;
        self.current = self.current.max(step);
    }

    pub fn say(&mut self, step: u8, sentence: impl Into<String>) {
        self.steps[step as usize].sentences.push(sentence.into());
    }

    pub fn source(&mut self, step: u8, src: SourceRef) {
        let s = &mut self.steps[step as usize].sources;
        if !s.contains(&src) {
            s.push(src);
        }
    }

    /// The probed request reached `step` at a door: record both.
    pub fn at_door(
        &mut self,
        step: u8,
        req: &Req,
        original_prompt_len: usize,
        door: &str,
        decision: &str,
    ) {
        self.reach(step);
        self.state(step, req, original_prompt_len, door, decision);
    }

    pub fn state(
        &mut self,
        step: u8,
        req: &Req,
        original_prompt_len: usize,
        door: &str,
        decision: &str,
    ) {
        self.steps[step as usize].state = Some(req_state(req, original_prompt_len, door, decision));
    }

    pub fn pages(&mut self, step: u8, view: PageView) {
        self.steps[step as usize].pages = Some(view);
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
