//! The static site builder: an evidence bundle in, a folder of HTML out.
//!
//! [`build_site`] reads the bundle with the evidence crate's bundle reader
//! (the layout rules of `kvw verify`: regular files only, no symbolic
//! links, opened without following links or blocking, size caps,
//! `SHA256SUMS`) and verifies it as `kvw verify` does (signed manifest,
//! index, README, strict receipt names, each receipt's subject name equal
//! to its file name), all before anything is written. A bundle that fails,
//! as a whole or in one receipt, is refused and nothing is written; so is a
//! receipt named after a page of the site ([`layout::reserved`]). It then
//! renders one page per receipt and language (so fix switches and language
//! links are plain links), a compare page per probe run against the run
//! with no fixes, and copies the receipts, the key and the browser build
//! next to them. In the browser, a receipt that fails its check there gets
//! a warning, never a replay.
//!
//! One concern per module: [`load`] reads and verifies (each signature
//! once) and sorts the receipts by kind; [`pages`] decides which pages the
//! site has; [`document`], [`result_doc`] and [`index_page`] are the HTML
//! documents around the components; [`layout`] names every file; [`write`]
//! owns the output folder (what may be replaced, files written create-new,
//! the swap into place). Every attribute in the pages is written by the
//! Leptos renderer, which escapes it, and every page carries the
//! Content-Security-Policy of [`crate::csp`].
//!
//! Layout of the output:
//!
//! ```text
//! index.html               default probe run, English
//! catalog.json             every receipt summarised, fetched once by the pages
//! en/<stem>.html           one page per receipt (and it/<stem>.html)
//! en/compare-<stem>.html   probe run <stem> next to the run without fixes
//! en/compare.html          the compare picker
//! en/gates.html            the gates tables, when the bundle has gates receipts
//! receipts/index.html      the receipts index (it/receipts.html in Italian)
//! receipts/<stem>.json     the DSSE envelopes, byte for byte
//! kvw.pub.json             the bundle's public key
//! pkg/                     hydrate build, English (kvw_explorer.js + .wasm), if given
//! pkg/it/                  the same, Italian (each build carries one language)
//! style.css, embed.js, embed-example.html, EMBED.md
//! *.gz, *.br               precompressed copies of the text files
//! ```

mod document;
mod index_page;
mod intro;
pub mod layout;
mod load;
mod pages;
mod result_doc;
mod ribbon;
mod write;

use std::path::{Path, PathBuf};

use kvw_evidence::error::EvidenceError;

pub use crate::csp::{WASM_BIN, WASM_JS};
use crate::links::DEFAULT_ENGINE_SOURCE_BASE;
pub use document::{render_compare_page, render_replay_body, render_replay_page};
pub use write::MAX_BYTES_PER_RECEIPT;

/// What to build.
#[derive(Debug, Clone)]
pub struct SiteOptions {
    /// Bundle folder: `receipts/*.json` and `kvw.pub.json`.
    pub bundle: PathBuf,
    /// Output folder: absent, empty, or an earlier site (replaced whole).
    pub out: PathBuf,
    /// Folder holding the hydrate build; without it the site works, static.
    pub wasm_dir: Option<PathBuf>,
    /// Folder overriding the built-in narratives (`<lang>/step-N.md`).
    pub narratives_dir: Option<PathBuf>,
    /// Base URL of the engine repository for source links.
    pub engine_source_base: String,
}

impl SiteOptions {
    /// Options with the defaults: the wasm build in `site/pkg` of this
    /// checkout if present, built-in narratives, the public repository.
    pub fn new(bundle: impl Into<PathBuf>, out: impl Into<PathBuf>) -> SiteOptions {
        let pkg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../site/pkg");
        SiteOptions {
            bundle: bundle.into(),
            out: out.into(),
            wasm_dir: write::wasm_complete(&pkg).then_some(pkg),
            narratives_dir: None,
            engine_source_base: DEFAULT_ENGINE_SOURCE_BASE.to_string(),
        }
    }
}

/// What was built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteReport {
    /// HTML pages written.
    pub pages: usize,
    /// Probe runs that verified and are replayed.
    pub verified: Vec<String>,
    /// Receipts of each kind published, in bundle order of the kinds
    /// (`probe run`, `scenario`, `audit`, ...).
    pub kinds: Vec<(&'static str, usize)>,
    /// What the reader of the build should know: pages cut short at the
    /// page limits, addresses shown as text rather than linked.
    pub notes: Vec<String>,
    /// Whether the browser build was copied (hydration available).
    pub wasm: bool,
    /// Path of the entry page.
    pub index: PathBuf,
    /// The precompressed copies written (`.gz`, `.br`).
    pub compressed: crate::compress::Compressed,
}

impl SiteReport {
    /// What was built, in one line: pages, receipts by kind, browser build.
    pub fn summary(&self) -> String {
        let total: usize = self.kinds.iter().map(|(_, n)| n).sum();
        let kinds: Vec<String> = self
            .kinds
            .iter()
            .map(|(kind, n)| format!("{n} × {kind}"))
            .collect();
        format!(
            "{} pages, {total} receipts verified and published ({}); browser build {}",
            self.pages,
            kinds.join(", "),
            if self.wasm {
                "included"
            } else {
                "absent (static pages only)"
            }
        )
    }
}

/// Why a site could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} has no kvw.pub.json: not a bundle folder")]
    NoPublicKey(PathBuf),
    #[error("{0} holds no probe run and no audit receipt (receipts/*.json)")]
    NoReceipts(PathBuf),
    #[error("wasm folder {0} lacks {WASM_JS} or {WASM_BIN} (or it/ the same for Italian); run scripts/build-wasm.sh")]
    NoWasm(PathBuf),
    #[error("bundle refused: {0}")]
    Bundle(#[from] EvidenceError),
    #[error("bundle refused: {file}: {reason}")]
    Receipt { file: String, reason: String },
    #[error("output {0}")]
    Out(String),
    #[error("bundle refused: {file}: the name is taken by the site's own page {page} (rename the receipt)")]
    Reserved { file: String, page: String },
    #[error(
        "two files of the site would be written to {0}; refusing to overwrite one with the other"
    )]
    Collision(String),
    #[error("bundle refused: receipts/{stem}.json: its pages would exceed {limit} bytes")]
    TooLarge { stem: String, limit: u64 },
    #[error("--source-base {0:?} is not a plain http(s) URL")]
    SourceBase(String),
}

/// Refuse a source base that is not a plain `http(s)://` URL (a
/// `javascript:` base would turn every source link into script).
pub fn check_source_base(base: &str) -> Result<(), SiteError> {
    match crate::links::web_href(base) {
        Some(_) => Ok(()),
        None => Err(SiteError::SourceBase(base.to_string())),
    }
}

/// Build the site described by `opts`.
pub fn build_site(opts: &SiteOptions) -> Result<SiteReport, SiteError> {
    check_source_base(&opts.engine_source_base)?;
    let found = write::inspect_out(&opts.out)?;
    let bundle = load::load_bundle(&opts.bundle)?;
    if let Some((l, page)) = bundle
        .receipts
        .iter()
        .find_map(|l| layout::reserved(&l.stem).map(|page| (l, page)))
    {
        return Err(SiteError::Reserved {
            file: layout::receipt_file(&l.stem),
            page,
        });
    }
    let staged = write::stage(&opts.out, found)?;
    let mut w = write::SiteWriter::new(staged.path());
    let wasm = write::copy_wasm(opts.wasm_dir.as_deref(), &mut w)?;
    let rendered = pages::render_site(opts, &bundle, wasm, &mut w)?;
    let compressed = crate::compress::precompress(w.root()).map_err(|source| SiteError::Write {
        path: opts.out.clone(),
        source,
    })?;
    staged.commit().map_err(|e| SiteError::Out(e.to_string()))?;
    let mut kinds: Vec<(&'static str, usize)> = Vec::new();
    for l in &bundle.receipts {
        match kinds.iter_mut().find(|(k, _)| *k == l.kind.word()) {
            Some((_, n)) => *n += 1,
            None => kinds.push((l.kind.word(), 1)),
        }
    }
    Ok(SiteReport {
        pages: rendered.pages,
        verified: rendered.verified,
        kinds,
        notes: rendered.notes,
        wasm,
        index: opts.out.join("index.html"),
        compressed,
    })
}
