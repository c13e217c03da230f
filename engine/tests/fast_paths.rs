//! The fast paths sign the facts the plain path signs. For every row of the
//! published matrix at both scales, the predicate `probe::run_many` gives
//! (rows continued from a shared warm-up, decode reading a long prompt's
//! full splits once for every step) equals the one of a run of that row
//! alone on [`Backend::CpuPerStep`] (its own warm-up, every page read at
//! every step), and so does its reproducible digest.

use kvw_engine::backend::Backend;
use kvw_engine::matrix::{rows, MatrixSize};
use kvw_engine::probe;
use kvw_evidence::{reproducible_digest, Scale};
use rayon::prelude::*;

#[test]
fn every_row_signs_the_same_facts_on_the_fast_paths_and_alone() {
    let rows = rows(
        &[Scale::Walkthrough, Scale::Incident],
        kvw_engine::config::DEFAULT_SEED,
        MatrixSize::Full,
    )
    .unwrap();
    assert_eq!(rows.len(), 2 * 67);
    let configs: Vec<_> = rows.iter().map(|r| r.config.clone()).collect();
    let fast = probe::run_many(&configs, &|_| {});
    let differ: Vec<String> = rows
        .par_iter()
        .zip(fast)
        .filter_map(|(row, fast)| {
            let fast = fast.unwrap();
            let alone = probe::run_on(&row.config, &Backend::CpuPerStep).unwrap();
            let same = fast == alone && reproducible_digest(&fast) == reproducible_digest(&alone);
            (!same).then(|| row.name.clone())
        })
        .collect();
    assert!(differ.is_empty(), "rows whose receipts differ: {differ:?}");
}
