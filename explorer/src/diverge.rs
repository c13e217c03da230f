//! Where two runs part ways.
//!
//! The compare view puts two receipts side by side; what a reader wants first
//! is the earliest step at which they differ. Two steps are the same when
//! what the request went through is the same: its state at the door, the
//! page picture and the claims. Event timestamps are left out on purpose,
//! since a defense that adds a check shifts every later time without changing
//! what happens.

use kvw_evidence::{ProbePredicate, Step};

/// Whether two steps tell the same story.
pub fn same_step(a: &Step, b: &Step) -> bool {
    a.facts == b.facts && a.state == b.state && a.pages == b.pages
}

/// The number (1..=7) of the first step where the runs differ, or `None`
/// when every step matches.
pub fn first_divergence(a: &ProbePredicate, b: &ProbePredicate) -> Option<u8> {
    let longest = a.steps.len().max(b.steps.len());
    (0..longest)
        .find(|&i| match (a.steps.get(i), b.steps.get(i)) {
            (Some(x), Some(y)) => !same_step(x, y),
            _ => true,
        })
        .map(|i| {
            a.steps
                .get(i)
                .or(b.steps.get(i))
                .map_or(i as u8 + 1, |s| s.step)
        })
}
