//! Model-checker throughput: the all-fixes model with the faults it
//! withstands (aborts and lost acks; a late write breaks it through the
//! release timeout), growing
//! the number of requests until the time budget (default 600 s, override
//! with `KVW_CHECK_BENCH_SECS`) runs out. Prints states/s per bound and the
//! largest bound checked completely. Printed, never asserted.
//!
//! `cargo bench -p kvw-check`

use std::time::{Duration, Instant};

use kvw_check::{run, CheckOptions, FaultBudget, Strategy};
use kvw_evidence::Fix;

fn main() {
    let budget = std::env::var("KVW_CHECK_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(600);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let start = Instant::now();
    let mut largest = None;
    println!("kvw-check bench: all fixes, faults aborts=1 lost-ack=1, 2 tenants, 8 decode pages, dfs + symmetry on {threads} thread(s), budget {budget} s");
    println!(
        "{:>8} {:>12} {:>12} {:>6} {:>9} {:>12}  result",
        "requests", "states", "unique", "depth", "seconds", "states/s"
    );
    for requests in 2..=6u32 {
        let left = Duration::from_secs(budget).saturating_sub(start.elapsed());
        if left.is_zero() {
            break;
        }
        let opts = CheckOptions {
            fixes: Fix::ALL.to_vec(),
            requests,
            tenants: 2,
            decode_pages: 8,
            faults: FaultBudget {
                aborts: 1,
                late_writes: 0,
                lost_acks: 1,
            },
            strategy: Strategy::DfsSymmetry,
            threads,
            timeout: Some(left),
            ..CheckOptions::default()
        };
        let r = match run(&opts, &mut |_| {}) {
            Ok(r) => r,
            Err(e) => {
                println!("{requests:>8} refused: {e}");
                break;
            }
        };
        let verdict = if !r.complete {
            "stopped by the time budget"
        } else if r.all_hold() {
            "complete, all properties hold"
        } else {
            "complete, a property fails"
        };
        println!(
            "{requests:>8} {:>12} {:>12} {:>6} {:>9.1} {:>12.0}  {verdict}",
            r.states,
            r.unique_states,
            r.max_depth,
            r.elapsed.as_secs_f64(),
            r.states_per_second()
        );
        if !r.complete {
            break;
        }
        largest = Some((requests, r.unique_states));
    }
    match largest {
        Some((n, unique)) => println!(
            "largest bound checked completely within {budget} s: {n} requests ({unique} unique states)"
        ),
        None => println!("no bound completed within {budget} s"),
    }
}
