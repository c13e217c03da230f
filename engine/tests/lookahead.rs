//! Decode's lookahead over a long prompt's full splits gives the receipts a
//! read of every page at every step gives: for every incident-scale row of
//! the published matrix, the predicate of a run on [`Backend::Cpu`] (which
//! looks ahead) equals the one on [`Backend::CpuPerStep`], and so does its
//! reproducible digest.

use kvw_engine::backend::Backend;
use kvw_engine::matrix::{rows, MatrixSize};
use kvw_engine::probe;
use kvw_evidence::{reproducible_digest, Scale};
use rayon::prelude::*;

#[test]
fn every_incident_row_signs_the_same_facts_with_and_without_lookahead() {
    let rows = rows(
        &[Scale::Incident],
        kvw_engine::config::DEFAULT_SEED,
        MatrixSize::Full,
    )
    .unwrap();
    assert_eq!(rows.len(), 67);
    let differ: Vec<String> = rows
        .par_iter()
        .filter_map(|row| {
            let fast = probe::run_on(&row.config, &Backend::Cpu).unwrap();
            let slow = probe::run_on(&row.config, &Backend::CpuPerStep).unwrap();
            let same = fast == slow && reproducible_digest(&fast) == reproducible_digest(&slow);
            (!same).then(|| row.name.clone())
        })
        .collect();
    assert!(differ.is_empty(), "rows whose receipts differ: {differ:?}");
}
