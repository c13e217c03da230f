//! Check one configuration and print the report: a quick way to see a
//! bound's size before choosing it for a test or CI.
//!
//! `cargo run --release -p kvw-check --example count -- all 3 all dfs`
//! (fixes, requests, faults, strategy `bfs`/`dfs`).

use kvw_check::{parse_faults, run, CheckOptions, Strategy};
use kvw_evidence::FixSet;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_string());
    let opts = match (|| -> Result<CheckOptions, String> {
        Ok(CheckOptions {
            fixes: arg(0, "none")
                .parse::<FixSet>()
                .map_err(|e| e.to_string())?
                .list(),
            requests: arg(1, "2")
                .parse()
                .map_err(|_| "requests must be a number")?,
            faults: parse_faults(&arg(2, "none")).map_err(|e| e.to_string())?,
            strategy: if arg(3, "bfs") == "dfs" {
                Strategy::DfsSymmetry
            } else {
                Strategy::Bfs
            },
            threads: 2,
            decode_pages: std::env::var("PAGES")
                .ok()
                .and_then(|p| p.parse().ok())
                .unwrap_or(8),
            ..CheckOptions::default()
        })
    })() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    match run(&opts, &mut |_| {}) {
        Ok(r) => {
            println!(
                "states {} unique {} depth {} time {:.2}s complete {}",
                r.states,
                r.unique_states,
                r.max_depth,
                r.elapsed.as_secs_f64(),
                r.complete
            );
            for p in &r.properties {
                println!("  {:<28} {:?}", p.name, p.status);
            }
            if let Some((name, path)) = &r.counterexample {
                println!("counterexample for {name}:");
                for (i, a) in path.clone().into_actions().iter().enumerate() {
                    println!("  {:>2}. {a:?}", i + 1);
                }
                println!("  violations: {:?}", path.last_state().violations);
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
