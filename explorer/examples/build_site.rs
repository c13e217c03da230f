//! Build a static site from a bundle without the `kvw` binary:
//! `cargo run -p kvw-explorer --example build_site -- BUNDLE OUT [WASM_DIR]`.
//! `kvw site build` is the same call with flags.

use kvw_explorer::site::{build_site, SiteOptions};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bundle, out, rest @ ..] = args.as_slice() else {
        eprintln!("usage: build_site BUNDLE OUT [WASM_DIR]");
        std::process::exit(2);
    };
    let mut opts = SiteOptions::new(bundle, out);
    if let Some(wasm) = rest.first() {
        opts.wasm_dir = Some(wasm.into());
    }
    match build_site(&opts) {
        Ok(report) => {
            println!("{}: {}", report.summary(), report.index.display());
            for note in &report.notes {
                println!("  note: {note}");
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
