//! What a run may cost before it starts: the budgets of `kvw verify
//! --reproduce` and the default limits of `kvw probe`.
//!
//! A receipt names the work its re-run takes (a probe's pools and decode
//! length, a fuzz receipt's runs). A hostile receipt can name hours of it,
//! so every re-run is sized first and refused, in one line, when it exceeds
//! a budget. The defaults re-run everything the project publishes; each is
//! raised by its own flag.

use kvw_evidence::scenario::{FuzzFault, FuzzPredicate};
use kvw_evidence::ProbeConfig;

/// Default `--max-pages`: pages in each pool of a probe. The incident's
/// pools at its 64-token pages are 10,645 and 16,384 pages; one token per
/// page would be a million.
pub const DEFAULT_MAX_PAGES: u64 = 65_536;
/// Default `--max-attended-tokens`: new tokens times context tokens, what
/// decoding attends to. The incident (20 tokens over a 1,048,576-token
/// context) is 20,971,520.
pub const DEFAULT_MAX_ATTENDED: u64 = 1 << 25;
/// Default `--max-runs`: fuzz runs one `--reproduce` re-runs (about five
/// seconds at 2,000 runs/s).
pub const DEFAULT_MAX_RUNS: u64 = 10_000;
/// Requests a fuzz counterexample may hold (the runs draw 1 to 4).
pub const MAX_CASE_REQUESTS: usize = 64;
/// Faults one counterexample request may carry.
pub const MAX_CASE_FAULTS: usize = 16;
/// Decode peers one request's pages may be spread over.
pub const MAX_FAN_OUT: u32 = 64;

/// The sizes a probe may take.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct ProbeBudget {
    /// Refuse a probe whose prefill or decode pool holds more pages than
    /// this (pool tokens / page size).
    #[arg(long, value_name = "PAGES", default_value_t = DEFAULT_MAX_PAGES,
          value_parser = clap::value_parser!(u64).range(1..=(1 << 21)))]
    pub max_pages: u64,
    /// Refuse a probe whose new tokens times context tokens exceed this.
    #[arg(long, value_name = "TOKENS", default_value_t = DEFAULT_MAX_ATTENDED,
          value_parser = clap::value_parser!(u64).range(1..=(1 << 40)))]
    pub max_attended_tokens: u64,
}

impl Default for ProbeBudget {
    fn default() -> Self {
        ProbeBudget {
            max_pages: DEFAULT_MAX_PAGES,
            max_attended_tokens: DEFAULT_MAX_ATTENDED,
        }
    }
}

impl ProbeBudget {
    /// Refuse `c` when it exceeds the budget; the reason names the flag.
    pub fn check(&self, c: &ProbeConfig) -> Result<(), String> {
        let page = u64::from(c.page_size.max(1));
        for (pool, tokens) in [
            ("prefill", c.prefill_pool_tokens),
            ("decode", c.decode_pool_tokens),
        ] {
            let pages = tokens.div_ceil(page);
            if pages > self.max_pages {
                return Err(format!(
                    "its {pool} pool of {tokens} tokens is {pages} pages of {page} token(s), over the \
                     budget of {} pages (raise it with --max-pages)",
                    self.max_pages
                ));
            }
        }
        let attended = u64::from(c.max_new_tokens).saturating_mul(c.context_len);
        if attended > self.max_attended_tokens {
            return Err(format!(
                "{} new tokens over a {}-token context attend to {attended} tokens, over the budget \
                 of {} (raise it with --max-attended-tokens)",
                c.max_new_tokens, c.context_len, self.max_attended_tokens
            ));
        }
        Ok(())
    }
}

/// The budget of one `kvw verify --reproduce`.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct ReproduceBudget {
    #[command(flatten)]
    pub probe: ProbeBudget,
    /// Refuse to re-run a fuzz receipt of more runs than this.
    #[arg(long, value_name = "RUNS", default_value_t = DEFAULT_MAX_RUNS,
          value_parser = clap::value_parser!(u64).range(1..=kvw_engine::fuzz_campaign::MAX_RUNS))]
    pub max_runs: u64,
}

impl ReproduceBudget {
    /// Refuse a fuzz receipt whose re-run exceeds the budget, or whose
    /// counterexample is larger than any run draws.
    pub fn check_fuzz(&self, p: &FuzzPredicate) -> Result<(), String> {
        if p.runs > self.max_runs {
            return Err(format!(
                "{} runs, over the budget of {} (raise it with --max-runs, at most {})",
                p.runs,
                self.max_runs,
                kvw_engine::fuzz_campaign::MAX_RUNS
            ));
        }
        let Some(c) = &p.counterexample else {
            return Ok(());
        };
        if c.requests.len() > MAX_CASE_REQUESTS {
            return Err(format!(
                "its counterexample holds {} requests, over the {MAX_CASE_REQUESTS} a case may hold",
                c.requests.len()
            ));
        }
        for r in &c.requests {
            if r.faults.len() > MAX_CASE_FAULTS {
                return Err(format!(
                    "a counterexample request carries {} faults, over the {MAX_CASE_FAULTS} a request may carry",
                    r.faults.len()
                ));
            }
            for f in &r.faults {
                if let FuzzFault::FanOut { peers } = f {
                    if *peers > MAX_FAN_OUT {
                        return Err(format!(
                            "a counterexample request fans out to {peers} decode peers, over the {MAX_FAN_OUT} a request may use"
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}
