//! `kvw site build`: turn an evidence bundle into the explorer's static site.
//!
//! The work happens in `kvw_explorer::site`; this module only maps flags to
//! [`SiteOptions`] and prints what was built, so the same build is available
//! to tests and examples without the binary.

use std::path::PathBuf;

use anyhow::Context;

use crate::out::clean;
use kvw_explorer::links::DEFAULT_ENGINE_SOURCE_BASE;
use kvw_explorer::site::{build_site, SiteOptions};

/// `kvw site …`
#[derive(Debug, clap::Args)]
pub struct SiteArgs {
    #[command(subcommand)]
    pub command: SiteCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum SiteCommand {
    /// Build the static explorer site from a bundle folder.
    Build(SiteBuildArgs),
}

/// `kvw site build --bundle DIR --out DIR`
#[derive(Debug, clap::Args)]
pub struct SiteBuildArgs {
    /// Bundle folder (receipts/*.json and kvw.pub.json), e.g. from `kvw bundle`.
    #[arg(long)]
    pub bundle: PathBuf,
    /// Output folder for the site.
    #[arg(long)]
    pub out: PathBuf,
    /// Folder with the browser build (kvw_explorer.js, kvw_explorer_bg.wasm;
    /// the Italian build in it/) from scripts/build-wasm.sh. Default: site/pkg
    /// of this checkout, if built.
    #[arg(long, conflicts_with = "no_wasm")]
    pub wasm: Option<PathBuf>,
    /// Build a site without the browser build (static pages only).
    #[arg(long)]
    pub no_wasm: bool,
    /// Folder overriding the built-in narratives (<lang>/step-N.md).
    #[arg(long)]
    pub narratives: Option<PathBuf>,
    /// Base URL of the engine repository for source links.
    #[arg(long, default_value = DEFAULT_ENGINE_SOURCE_BASE)]
    pub source_base: String,
}

/// Run `kvw site …`.
pub fn run(args: SiteArgs) -> anyhow::Result<()> {
    match args.command {
        SiteCommand::Build(build) => run_build(build),
    }
}

fn run_build(args: SiteBuildArgs) -> anyhow::Result<()> {
    let mut opts = SiteOptions::new(&args.bundle, &args.out);
    if args.no_wasm {
        opts.wasm_dir = None;
    } else if let Some(wasm) = args.wasm {
        opts.wasm_dir = Some(wasm);
    }
    opts.narratives_dir = args.narratives;
    opts.engine_source_base = args.source_base;
    let report = build_site(&opts)
        .with_context(|| format!("building the site from {}", args.bundle.display()))?;
    outln!("site: {}", report.summary())?;
    for note in &report.notes {
        outln!("note: {}", clean(note))?;
    }
    let c = report.compressed;
    outln!(
        "precompressed {} files: {} bytes → {} gzip, {} brotli",
        c.files,
        c.raw,
        c.gzip,
        c.brotli
    )?;
    outln!("open {}", report.index.display())?;
    Ok(())
}
