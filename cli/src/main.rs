//! `kvw`, the kvwitness command line: a thin layer over the library crates.
//!
//! Every command parses its flags, calls into the engine, evidence or
//! explorer crates, and prints. Errors end the process with one line on
//! stderr and a non-zero exit code — never a panic, never a partial file.

#[macro_use]
mod out;

mod audit;
mod audit_bundle;
mod bench;
mod budget;
mod bundle;
mod check;
mod fuzz;
mod gates;
mod keygen;
mod probe;
mod scenario;
mod serve;
mod sign;
mod site;
mod upstream;
mod verify;
mod verify_results;
mod write;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator: in a `perf` profile of `kvw
/// verify`, about a third of the time was glibc's malloc and free.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// kvwitness: reproduce, prove and publish KV-cache isolation failures in
/// prefill/decode disaggregated inference.
#[derive(Debug, Parser)]
#[command(name = "kvw", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a probe and print (or sign) what happened.
    #[command(subcommand)]
    Probe(probe::ProbeCommand),
    /// Run the whole fix matrix and write a signed, verifiable bundle.
    Bundle(bundle::BundleArgs),
    /// Verify a bundle folder or a single receipt (optionally re-running it).
    Verify(verify::VerifyArgs),
    /// Build the static explorer site from a bundle.
    Site(site::SiteArgs),
    /// Serve a built site and the probe API on 127.0.0.1, or (--openai) a multi-tenant OpenAI-compatible endpoint.
    Serve(serve::ServeArgs),
    /// Write a new ed25519 signing key pair.
    Keygen(keygen::KeygenArgs),
    /// Measure the engine and print each figure with its target: the incident probe, CPU attention, verification, randomized runs, `kvw bundle` and the model check.
    Bench(bench::BenchArgs),
    /// Model-check the PD handoff exhaustively (stateright) under a set of fixes.
    Check(check::CheckArgs),
    /// List the scenarios or run one (exit 1 when its assertion fails).
    #[command(subcommand)]
    Scenario(scenario::ScenarioCommand),
    /// Run every scenario, grouped by the four acceptance gates.
    Gates(gates::GatesArgs),
    /// Randomized runs with invariants checked after every event.
    Fuzz(fuzz::FuzzArgs),
    /// Audit an OpenAI-compatible endpoint: capacity, isolation, status and prefix-cache gates.
    Audit(audit::AuditArgs),
    /// Run the probes on real SGLang releases and compare with the engine.
    #[command(subcommand)]
    Upstream(upstream::UpstreamCommand),
}

/// Parse arguments and run; errors become one line and exit code 1 (2 for usage).
fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                use std::io::Write as _;
                let text = e.render().to_string();
                let mut stdout = std::io::stdout().lock();
                if stdout
                    .write_all(text.as_bytes())
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    errln!("error: cannot write to standard output");
                    return ExitCode::FAILURE;
                }
                return ExitCode::SUCCESS;
            }
            let text = e.to_string();
            let line = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid arguments");
            errln!("{}", out::clean(line.trim()));
            return ExitCode::from(2);
        }
    };
    init_tracing();
    let result = match cli.command {
        Command::Probe(cmd) => probe::run(cmd),
        Command::Bundle(args) => bundle::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Keygen(args) => keygen::run(args),
        Command::Site(args) => site::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Check(args) => check::run(args),
        Command::Scenario(cmd) => scenario::run(cmd),
        Command::Gates(args) => gates::run(args),
        Command::Fuzz(args) => fuzz::run(args),
        Command::Audit(args) => return audit::run(args),
        Command::Upstream(cmd) => upstream::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("error: {}", out::clean(&one_line(&e)));
            ExitCode::FAILURE
        }
    }
}

/// An error chain on one line.
pub fn one_line(e: &anyhow::Error) -> String {
    e.chain()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(": ")
        .replace('\n', " ")
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("KVW_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
