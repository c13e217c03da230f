//! Write the sample bundle (hand-made predicates, public test key) to a folder:
//! `cargo run -p kvw-explorer --example fixture_bundle -- DIR`.

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "explorer/tests/fixtures/bundle".into());
    match kvw_explorer::sample::write_sample_bundle(std::path::Path::new(&dir)) {
        Ok(written) => println!(
            "{} receipts in {} (key {})",
            written.receipts,
            written.dir.display(),
            written.keyid
        ),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
