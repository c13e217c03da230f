//! `kvw`: see `kvw --help`.
fn main() -> std::process::ExitCode {
    kvw_engine::cli::main()
}
