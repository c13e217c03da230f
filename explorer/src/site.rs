//! The static site builder: an evidence bundle in, a folder of HTML out.
//!
//! [`build_site`] reads the bundle with the evidence crate's bundle reader
//! (the layout rules of `kvw verify`: regular files only, no symbolic
//! links, opened without following links or blocking, size caps,
//! `SHA256SUMS`) and verifies it as `kvw verify` does (signed manifest,
//! index, README, strict receipt names, each receipt's subject name equal
//! to its file name), all before anything is written. A bundle that fails
//! as a whole is refused and nothing is written. It then renders one page
//! per receipt and language (so fix switches and language links are plain
//! links), a compare page per receipt against the run with no fixes, and
//! copies the receipts, the key and the browser build next to them. A
//! receipt that fails refuses the build; in the browser, a receipt that
//! fails its check there gets a warning, never a replay.
//!
//! The site is built in a temporary sibling of the output folder and
//! renamed into place: the output must be absent, empty, or an earlier site
//! (which is replaced); any other folder is refused. Every attribute in the
//! pages is written by the Leptos renderer, which escapes it.
//!
//! Layout of the output:
//!
//! ```text
//! index.html               default receipt, English
//! catalog.json             every receipt summarised, fetched once by the pages
//! en/<stem>.html           one page per receipt (and it/<stem>.html)
//! en/compare-<stem>.html   <stem> next to the run without fixes
//! receipts/<stem>.json     the DSSE envelopes, byte for byte
//! kvw.pub.json             the bundle's public key
//! pkg/                     hydrate build, English (kvw_explorer.js + .wasm), if given
//! pkg/it/                  the same, Italian (each build carries one language)
//! style.css, embed.js, embed-example.html, EMBED.md
//! *.gz, *.br               precompressed copies of the text files
//! ```

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use kvw_evidence::bundle::{read_bundle, verify_files, VerifyOptions, RECEIPTS_DIR};
use kvw_evidence::error::EvidenceError;
use kvw_evidence::keys::PUBLIC_KEY_FILE;
use leptos::prelude::*;

use kvw_evidence::canonical::sha256_hex;

use crate::catalog::{baseline_for, default_entry, entry_for};
use crate::components::compare::{CompareApp, ComparePage, ComparePair, COMPARE_PAIR_ID};
use crate::components::shell::SitePage;
use crate::components::ReplayCtx;
use crate::i18n::Lang;
use crate::links::DEFAULT_ENGINE_SOURCE_BASE;
use crate::markdown;
use crate::model::{
    page_href, page_title, run_label, CatalogEntry, PageData, Shown, CATALOG_FILE, PAGE_DATA_ID,
};
use crate::trust;

/// Static files that ship with every site.
const STYLE_CSS: &str = include_str!("../../site/style.css");
const EMBED_JS: &str = include_str!("../../site/embed.js");
const EMBED_EXAMPLE: &str = include_str!("../../site/embed-example.html");
const EMBED_MD: &str = include_str!("../../site/EMBED.md");

/// File names the hydrate build produces (see `scripts/build-wasm.sh`), in
/// its folder and, for the Italian build, in its `it/` subfolder
/// ([`crate::i18n::pkg_folder`]).
pub const WASM_JS: &str = "kvw_explorer.js";
pub const WASM_BIN: &str = "kvw_explorer_bg.wasm";

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
            wasm_dir: wasm_complete(&pkg).then_some(pkg),
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
    /// Receipts that verified and are replayed.
    pub verified: Vec<String>,
    /// Receipts that failed verification, with the reason.
    pub rejected: Vec<(String, String)>,
    /// Whether the browser build was copied (hydration available).
    pub wasm: bool,
    /// Path of the entry page.
    pub index: PathBuf,
    /// The precompressed copies written (`.gz`, `.br`).
    pub compressed: crate::compress::Compressed,
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
    #[error("{0} holds no receipts (receipts/*.json)")]
    NoReceipts(PathBuf),
    #[error("wasm folder {0} lacks {WASM_JS} or {WASM_BIN} (or it/ the same for Italian); run scripts/build-wasm.sh")]
    NoWasm(PathBuf),
    #[error("bundle refused: {0}")]
    Bundle(#[from] EvidenceError),
    #[error("bundle refused: {file}: {reason}")]
    Receipt { file: String, reason: String },
    #[error("output {0}")]
    Out(String),
    #[error("--source-base {0:?} is not a plain http(s) URL")]
    SourceBase(String),
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), SiteError> {
    let wrap = |source| SiteError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(wrap)?;
    }
    fs::write(path, bytes).map_err(|source| SiteError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// A receipt read from the bundle and checked.
struct Loaded {
    stem: String,
    /// The envelope as stored; empty when it was rejected (never published).
    envelope: Vec<u8>,
    shown: Shown,
}

/// A bundle read and verified as `kvw verify` does.
struct LoadedBundle {
    public_key: String,
    receipts: Vec<Loaded>,
    model_checks: Vec<crate::model_check_page::LoadedModelCheck>,
    results: crate::results_site::LoadedResults,
    /// `index.json`, `SHA256SUMS`, `README.md`, `manifest.json` as read.
    extras: Vec<(&'static str, Vec<u8>)>,
}

/// Read and verify the bundle (see the module documentation), sorted by name.
/// Any receipt that fails refuses the whole build: a site publishes only a
/// bundle that `kvw verify` accepts.
fn load_bundle(bundle: &Path) -> Result<LoadedBundle, SiteError> {
    let files = read_bundle(bundle)?;
    let report = verify_files(&files, &VerifyOptions::default())?;
    if let Some(line) = report.receipts.iter().find(|l| l.result.is_err()) {
        let reason = line.result.as_ref().err().cloned().unwrap_or_default();
        return Err(SiteError::Receipt {
            file: line.file.clone(),
            reason,
        });
    }
    let public_key = files
        .get(PUBLIC_KEY_FILE)
        .ok_or_else(|| SiteError::NoPublicKey(bundle.to_path_buf()))?;
    let public_key = String::from_utf8(public_key.to_vec())
        .map_err(|_| EvidenceError::Key("kvw.pub.json is not UTF-8".into()))?;
    let mut receipts = Vec::new();
    let mut model_checks = Vec::new();
    let mut results = crate::results_site::LoadedResults::default();
    for line in &report.receipts {
        let name = line
            .file
            .strip_prefix(RECEIPTS_DIR)
            .and_then(|n| n.strip_prefix('/'))
            .unwrap_or(&line.file);
        let stem = name.strip_suffix(".json").unwrap_or(name).to_string();
        let envelope = files.get(&line.file).unwrap_or_default().to_vec();
        if let Some(c) = crate::model_check_page::load_model_check(
            &stem,
            &String::from_utf8_lossy(&envelope),
            &public_key,
        ) {
            model_checks.push(c);
            continue;
        }
        if results.take(&stem, &envelope, &public_key) {
            continue;
        }
        // The same check the browser runs; after verify_files it passes.
        let shown = trust::check_bytes(&stem, &envelope, &public_key);
        let envelope = if shown.is_verified() {
            envelope
        } else {
            Vec::new()
        };
        receipts.push(Loaded {
            stem,
            envelope,
            shown,
        });
    }
    if receipts.is_empty() {
        return Err(SiteError::NoReceipts(bundle.to_path_buf()));
    }
    let extras = ["index.json", "SHA256SUMS", "README.md", "manifest.json"]
        .into_iter()
        .filter_map(|name| files.get(name).map(|b| (name, b.to_vec())))
        .collect();
    Ok(LoadedBundle {
        public_key,
        receipts,
        model_checks,
        results,
        extras,
    })
}

/// JSON safe to place inside a `<script>` element.
fn script_json(data: &PageData) -> String {
    serde_json::to_string(data)
        .unwrap_or_default()
        .replace('<', "\\u003c")
}

/// Text escaped for HTML, by the renderer.
fn escape(text: &str) -> String {
    let text = text.to_string();
    Owner::new().with(|| view! { {text} }.to_html())
}

/// Render the `<body>` content of a replay page.
pub fn render_replay_body(data: PageData, catalog: Vec<CatalogEntry>, shown: Shown) -> String {
    Owner::new().with(|| {
        ReplayCtx::provide(data, catalog, shown);
        view! { <SitePage/> }.to_html()
    })
}

/// Set before the first paint when scripts run, so the style sheet lays the
/// page out as the hydrated replay will (one step at a time) and hydration
/// moves nothing; without scripts the class never appears and every step
/// reads top to bottom.
pub const JS_FLAG: &str = "<script>document.documentElement.classList.add(\"kvw-js\")</script>";

/// The inline check that fetches the page's receipt at once and verifies it
/// with WebCrypto while the wasm downloads (see the file's opening comment).
/// It sits before the style sheet link: a classic script after a pending
/// style sheet would wait for it, a whole round trip on a slow link.
pub const EARLY_CHECK: &str = include_str!("early_check.js");
/// The WebCrypto receipt check both inline checks call.
pub const RECEIPT_VERIFY: &str = include_str!("receipt_verify.js");

/// A complete replay page.
pub fn render_replay_page(
    data: &PageData,
    catalog: &[CatalogEntry],
    shown: Shown,
    hydrate: bool,
) -> String {
    let lang = data.lang;
    let title = page_title(
        crate::model::entry(catalog, &data.receipt),
        &data.receipt,
        lang,
    );
    let alternates: String = Lang::ALL
        .into_iter()
        .map(|l| {
            let href = page_href(&data.root, l, &data.receipt);
            Owner::new()
                .with(|| view! { <link rel="alternate" hreflang=l.code() href=href/> }.to_html())
        })
        .collect();
    let (early, boot) = if hydrate {
        (
            format!("<script>{RECEIPT_VERIFY}{EARLY_CHECK}</script>\n"),
            boot_script(&data.root, lang, "hydrate"),
        )
    } else {
        (String::new(), String::new())
    };
    let body = render_replay_body(data.clone(), catalog.to_vec(), shown);
    let flag = if hydrate { JS_FLAG } else { "" };
    format!(
        "<!DOCTYPE html>\n<html lang=\"{lang}\" class=\"kvw-site\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n<link rel=\"icon\" href=\"data:,\">\n<script type=\"application/json\" id=\"{PAGE_DATA_ID}\">{json}</script>\n{early}<link rel=\"stylesheet\" href=\"{root}style.css\">\n{flag}\n{alternates}\n{boot}\n</head>\n<body>{body}</body>\n</html>\n",
        lang = lang.code(),
        title = escape(&title),
        root = data.root,
        json = script_json(data),
    )
}

/// The module script that starts the browser side: `entry` is `hydrate`
/// (replay pages) or `compare` (compare pages); the build loaded is the
/// one of the page's language.
///
/// On a replay page the wasm download waits until the inline check's
/// receipt has arrived (`window.kvwReceipt`), so on a slow link the two do
/// not share the bandwidth and the badge is not held up by the wasm.
fn boot_script(root: &str, lang: Lang, entry: &str) -> String {
    let pkg = format!("{root}pkg/{}", crate::i18n::pkg_folder(lang));
    format!(
        r#"<script type="module">import init, {{ {entry} }} from "{pkg}{WASM_JS}";
Promise.resolve(window.kvwReceipt).catch(() => {{}}).then(() => init({{ module_or_path: "{pkg}{WASM_BIN}" }})).then(() => {entry}()).catch((e) => {{ document.documentElement.dataset.kvwError = String(e); console.error(e); }});</script>"#
    )
}

/// A complete compare page: `pair` as verified at build time, redrawn in the
/// browser from the receipt files (and the picker's choice) when scripts run.
pub fn render_compare_page(
    data: &PageData,
    catalog: &[CatalogEntry],
    pair: &ComparePair,
    sides: (Shown, Shown),
    hydrate: bool,
) -> String {
    let (lang, root) = (data.lang, data.root.as_str());
    let label = |stem: &str| run_label(crate::model::entry(catalog, stem), stem, lang);
    let title = format!("{} ↔ {} — kvwitness", label(&pair.left), label(&pair.right));
    let other = Lang::ALL
        .into_iter()
        .filter(|l| *l != lang)
        .map(|l| {
            let href = format!("{root}{}/compare-{}.html", l.code(), pair.right);
            Owner::new().with(|| {
                view! { <a href=href hreflang=l.code() lang=l.code()>{l.endonym()}</a> }.to_html()
            })
        })
        .collect::<Vec<_>>()
        .join(" ");
    let app = CompareApp {
        data: data.clone(),
        catalog: catalog.to_vec(),
        left: sides.0,
        right: sides.1,
        browser_checked: false,
    };
    let body = Owner::new().with(|| view! { <ComparePage app=app/> }.to_html());
    let (flag, boot) = if hydrate {
        (JS_FLAG, boot_script(root, data.lang, "compare"))
    } else {
        ("", String::new())
    };
    let pair_json = serde_json::to_string(pair)
        .unwrap_or_default()
        .replace('<', "\\u003c");
    format!(
        "<!DOCTYPE html>\n<html lang=\"{code}\" class=\"kvw-site\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n<link rel=\"icon\" href=\"data:,\">\n<link rel=\"stylesheet\" href=\"{root}style.css\">\n{flag}\n<script type=\"application/json\" id=\"{PAGE_DATA_ID}\">{json}</script>\n<script type=\"application/json\" id=\"{COMPARE_PAIR_ID}\">{pair_json}</script>\n{boot}\n</head>\n<body><a class=\"skip\" href=\"#main\">{skip}</a><header class=\"site\"><p class=\"brand\"><a href=\"{root}index.html\">kvwitness</a></p><nav class=\"langs\" aria-label=\"{langword}\">{other}</nav></header><main id=\"main\" class=\"kvw-main\">{body}</main></body>\n</html>\n",
        code = lang.code(),
        title = escape(&title),
        json = script_json(data),
        skip = lang.pick("Skip to the comparison", "Vai al confronto"),
        langword = lang.pick("Language", "Lingua"),
    )
}

/// Where the receipts index of `lang` lives: `receipts/index.html` in
/// English (beside the receipts, since static servers list no folders),
/// `it/receipts.html` in Italian (beside the Italian pages).
pub fn receipts_index_path(lang: Lang) -> &'static str {
    match lang {
        Lang::En => "receipts/index.html",
        Lang::It => "it/receipts.html",
    }
}

/// Links from the receipts index of `lang` to the pages of the other kinds
/// a bundle carries (gate tables, scenario and randomized-run replays,
/// model-check counterexamples), relative to the index.
fn result_links(bundle: &LoadedBundle, lang: Lang) -> Vec<(String, String)> {
    let results = &bundle.results;
    let pages = match lang {
        Lang::En => "../en/",
        Lang::It => "",
    };
    let mut links = Vec::new();
    if !results.gates.is_empty() {
        links.push((
            format!("{pages}{}", crate::results_site::GATES_PAGE),
            lang.pick(
                "The four acceptance gates, with and without fixes",
                "I quattro gate di accettazione, con e senza correzioni",
            )
            .to_string(),
        ));
    }
    for c in &bundle.model_checks {
        let label = lang.pick("Model check", "Verifica del modello");
        links.push((
            format!("{pages}{}.html", c.stem),
            format!("{label}: {}", c.stem),
        ));
    }
    for (stem, _, _) in &results.fuzz {
        let label = lang.pick("Randomized runs", "Esecuzioni casuali");
        links.push((format!("{pages}{stem}.html"), format!("{label}: {stem}")));
    }
    for (stem, _, _) in &results.scenarios {
        links.push((format!("{pages}{stem}.html"), format!("Scenario: {stem}")));
    }
    links
}

/// The receipts index of `lang`: every probe receipt with its check and a
/// link to its replay, the public key, and the pages of the other kinds.
fn receipts_index(loaded: &[Loaded], others: &[(String, String)], lang: Lang) -> String {
    let (files, pages, root) = match lang {
        Lang::En => ("", "../en/", "../"),
        Lang::It => ("../receipts/", "", "../"),
    };
    let items: String = loaded
        .iter()
        .map(|l| {
            let status = match &l.shown {
                Shown::Verified { .. } => lang.pick("verified", "verificata").to_string(),
                Shown::Rejected { reason, .. } => {
                    format!("{}: {reason}", lang.pick("NOT VERIFIED", "NON VERIFICATA"))
                }
                Shown::Loading { .. } => String::new(),
            };
            let file = format!("{}.json", l.stem);
            let replay = format!("{pages}{}.html", l.stem);
            let link = (!l.envelope.is_empty()).then(|| format!("{files}{file}"));
            let replay_word = lang.pick("replay", "replica");
            Owner::new().with(|| {
                view! {
                    <li>
                        {match link {
                            Some(href) => view! { <a href=href><code>{file}</code></a> }.into_any(),
                            None => view! { <code>{file}</code> }.into_any(),
                        }}
                        " — " {status} " — " <a href=replay>{replay_word}</a>
                    </li>
                }
                .to_html()
            }) + "\n"
        })
        .collect();
    let other_items: String = others
        .iter()
        .map(|(href, label)| {
            let (href, label) = (href.clone(), label.clone());
            Owner::new().with(|| view! { <li><a href=href>{label}</a></li> }.to_html()) + "\n"
        })
        .collect();
    let other_section = if others.is_empty() {
        String::new()
    } else {
        format!(
            "<h2>{}</h2><ul>\n{other_items}</ul>",
            lang.pick(
                "Gates, scenarios and model checks",
                "Gate, scenari e verifiche del modello"
            )
        )
    };
    let other_lang = Lang::ALL.into_iter().find(|l| *l != lang).unwrap_or(lang);
    let other_href = format!("{root}{}", receipts_index_path(other_lang));
    let other_link = Owner::new().with(|| {
        view! { <a href=other_href hreflang=other_lang.code() lang=other_lang.code()>{other_lang.endonym()}</a> }
            .to_html()
    });
    format!(
        "<!DOCTYPE html>\n<html lang=\"{code}\" class=\"kvw-site\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{title} — kvwitness</title><link rel=\"icon\" href=\"data:,\"><link rel=\"stylesheet\" href=\"{root}style.css\"></head><body><a class=\"skip\" href=\"#main\">{skip}</a><header class=\"site\"><p class=\"brand\"><a href=\"{root}index.html\">kvwitness</a></p><nav class=\"langs\" aria-label=\"{langword}\">{other_link}</nav></header><main id=\"main\" class=\"kvw-main\"><h1>{title}</h1><p>{key}: <a href=\"{root}kvw.pub.json\"><code>kvw.pub.json</code></a></p>{other_section}<h2>{probes}</h2><ul>\n{items}</ul></main></body></html>\n",
        code = lang.code(),
        title = lang.pick("Receipts", "Ricevute"),
        skip = lang.pick("Skip to content", "Vai al contenuto"),
        langword = lang.pick("Language", "Lingua"),
        key = lang.pick("Public key", "Chiave pubblica"),
        probes = lang.pick("Probe runs", "Esecuzioni della sonda"),
    )
}

/// `embed-example.html` showing the receipt `stem`; the element is written
/// by the renderer, so its attributes are escaped.
fn embed_example(stem: &str) -> String {
    let src = format!("receipts/{stem}.json");
    let page = format!("en/{stem}.html");
    let element = Owner::new().with(|| {
        view! {
            <kvw-replay id="embedded" src=src lang="en">
                <p data-kvw-fallback=""><a href=page>"Open the replay"</a>" (this link is what readers without JavaScript see)."</p>
            </kvw-replay>
        }
        .to_html()
    });
    let start = EMBED_EXAMPLE.find("<kvw-replay").unwrap_or(0);
    let end = EMBED_EXAMPLE
        .find("</kvw-replay>")
        .map_or(start, |e| e + "</kvw-replay>".len());
    format!(
        "{}{element}{}",
        &EMBED_EXAMPLE[..start],
        &EMBED_EXAMPLE[end..]
    )
}

/// Refuse a source base that is not a plain `http(s)://` URL (a
/// `javascript:` base would turn every source link into script).
pub fn check_source_base(base: &str) -> Result<(), SiteError> {
    let plain = (base.starts_with("https://") || base.starts_with("http://"))
        && base.len() <= 400
        && base.len() > "https://".len()
        && !base
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "\"'<>`\\".contains(c));
    if plain {
        Ok(())
    } else {
        Err(SiteError::SourceBase(base.to_string()))
    }
}

/// What the output folder holds now.
enum OutState {
    Absent,
    Empty,
    OldSite,
}

/// Names a site built here may hold at its top.
const SITE_NAMES: [&str; 13] = [
    "index.html",
    "catalog.json",
    "compare.html",
    "en",
    "it",
    "receipts",
    "kvw.pub.json",
    "bundle",
    "pkg",
    "style.css",
    "embed.js",
    "embed-example.html",
    "EMBED.md",
];

fn inspect_out(out: &Path) -> Result<OutState, SiteError> {
    let meta = match out.symlink_metadata() {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(OutState::Absent),
        Err(source) => {
            return Err(SiteError::Read {
                path: out.to_path_buf(),
                source,
            })
        }
    };
    if !meta.is_dir() {
        return Err(SiteError::Out(format!(
            "{} exists and is not a folder (a link, file or other); refusing to replace it",
            out.display()
        )));
    }
    let names: BTreeSet<String> = fs::read_dir(out)
        .map_err(|source| SiteError::Read {
            path: out.to_path_buf(),
            source,
        })?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if names.is_empty() {
        return Ok(OutState::Empty);
    }
    let old_site = names.contains("index.html")
        && names.contains("embed.js")
        && names.iter().all(|n| {
            let plain = n
                .strip_suffix(".gz")
                .or_else(|| n.strip_suffix(".br"))
                .unwrap_or(n);
            SITE_NAMES.contains(&plain)
        });
    if old_site {
        Ok(OutState::OldSite)
    } else {
        Err(SiteError::Out(format!(
            "{} is a non-empty folder that is not a kvwitness site; refusing to write into it",
            out.display()
        )))
    }
}

/// Removes a temporary folder unless disarmed.
struct TempDir(Option<PathBuf>);

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = fs::remove_dir_all(path);
        }
    }
}

fn sibling(out: &Path, tag: &str) -> Result<PathBuf, SiteError> {
    let base = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| SiteError::Out(format!("{} does not name a folder", out.display())))?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    Ok(parent.join(format!(".{base}.{tag}-{}-{nanos}", std::process::id())))
}

/// Move the finished site from `tmp` to `out`, replacing an old site.
fn place(tmp: &Path, out: &Path, state: OutState) -> Result<(), SiteError> {
    let wrap = |source| SiteError::Write {
        path: out.to_path_buf(),
        source,
    };
    match state {
        OutState::Absent => fs::rename(tmp, out).map_err(wrap),
        OutState::Empty => {
            fs::remove_dir(out).map_err(wrap)?;
            fs::rename(tmp, out).map_err(wrap)
        }
        OutState::OldSite => {
            let old = sibling(out, "old")?;
            fs::rename(out, &old).map_err(wrap)?;
            if let Err(e) = fs::rename(tmp, out) {
                let _ = fs::rename(&old, out);
                return Err(wrap(e));
            }
            let _ = fs::remove_dir_all(&old);
            Ok(())
        }
    }
}

/// The browser build's files, one pair per language, relative to its folder.
fn wasm_files() -> impl Iterator<Item = String> {
    Lang::ALL.into_iter().flat_map(|lang| {
        [WASM_JS, WASM_BIN].map(|name| format!("{}{name}", crate::i18n::pkg_folder(lang)))
    })
}

/// Whether `dir` holds the browser build of every language.
fn wasm_complete(dir: &Path) -> bool {
    wasm_files().all(|name| dir.join(name).is_file())
}

/// Copy the browser build into `out/pkg`; `Ok(false)` when none is given.
fn copy_wasm(wasm_dir: Option<&Path>, out: &Path) -> Result<bool, SiteError> {
    let Some(dir) = wasm_dir else {
        return Ok(false);
    };
    if !wasm_complete(dir) {
        return Err(SiteError::NoWasm(dir.to_path_buf()));
    }
    for name in wasm_files() {
        let bytes = fs::read(dir.join(&name)).map_err(|source| SiteError::Read {
            path: dir.join(&name),
            source,
        })?;
        write(&out.join("pkg").join(&name), bytes)?;
    }
    Ok(true)
}

/// Build the site described by `opts`.
pub fn build_site(opts: &SiteOptions) -> Result<SiteReport, SiteError> {
    check_source_base(&opts.engine_source_base)?;
    let state = inspect_out(&opts.out)?;
    let bundle = load_bundle(&opts.bundle)?;
    let tmp_path = sibling(&opts.out, "partial")?;
    if let Some(parent) = tmp_path.parent() {
        fs::create_dir_all(parent).map_err(|source| SiteError::Write {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    fs::create_dir(&tmp_path).map_err(|source| SiteError::Write {
        path: tmp_path.clone(),
        source,
    })?;
    let mut tmp = TempDir(Some(tmp_path.clone()));
    let mut report = render_site(opts, &bundle, &tmp_path)?;
    place(&tmp_path, &opts.out, state)?;
    tmp.0 = None;
    report.index = opts.out.join("index.html");
    Ok(report)
}

/// Render every page and copy every file of the site into `out`.
fn render_site(
    opts: &SiteOptions,
    bundle: &LoadedBundle,
    out: &Path,
) -> Result<SiteReport, SiteError> {
    let public_key = &bundle.public_key;
    let loaded = &bundle.receipts;
    let wasm = copy_wasm(opts.wasm_dir.as_deref(), out)?;

    let catalog: Vec<CatalogEntry> = loaded
        .iter()
        .filter_map(|l| l.shown.predicate().map(|p| entry_for(&l.stem, p)))
        .collect();
    let default_stem =
        default_entry(&catalog).map_or_else(|| loaded[0].stem.clone(), |e| e.stem.clone());
    let catalog_json = serde_json::to_vec(&catalog).unwrap_or_default();
    let catalog_sha256 = sha256_hex(&catalog_json);
    write(&out.join(CATALOG_FILE), &catalog_json)?;
    let mut pages = 0;

    for lang in Lang::ALL {
        let narratives =
            markdown::narratives(lang, opts.narratives_dir.as_deref()).map_err(|source| {
                SiteError::Read {
                    path: opts.narratives_dir.clone().unwrap_or_default(),
                    source,
                }
            })?;
        for l in loaded {
            let mut data = PageData {
                lang,
                root: "../".to_string(),
                receipt: l.stem.clone(),
                narratives: narratives.clone(),
                engine_source_base: opts.engine_source_base.clone(),
                receipt_sha256: sha256_hex(&l.envelope),
                catalog_sha256: catalog_sha256.clone(),
                public_key: public_key.clone(),
            };
            write(
                &out.join(lang.code()).join(format!("{}.html", l.stem)),
                render_replay_page(&data, &catalog, l.shown.clone(), wasm),
            )?;
            pages += 1;
            if lang == Lang::En && l.stem == default_stem {
                data.root = "./".to_string();
                write(
                    &out.join("index.html"),
                    render_replay_page(&data, &catalog, l.shown.clone(), wasm),
                )?;
                pages += 1;
            }
        }
        let compare_data = |right: &str| PageData {
            lang,
            root: "../".to_string(),
            receipt: right.to_string(),
            narratives: Vec::new(),
            engine_source_base: opts.engine_source_base.clone(),
            receipt_sha256: String::new(),
            catalog_sha256: catalog_sha256.clone(),
            public_key: public_key.clone(),
        };
        let shown = |stem: &str| {
            loaded
                .iter()
                .find(|l| l.stem == stem)
                .map(|l| l.shown.clone())
        };
        let mut first_pair = None;
        for entry in &catalog {
            let Some(base) = baseline_for(&catalog, entry).filter(|b| b.stem != entry.stem) else {
                continue;
            };
            let pair = ComparePair {
                left: base.stem.clone(),
                right: entry.stem.clone(),
            };
            if let (Some(left), Some(right)) = (shown(&pair.left), shown(&pair.right)) {
                let page = render_compare_page(
                    &compare_data(&pair.right),
                    &catalog,
                    &pair,
                    (left, right),
                    wasm,
                );
                if first_pair.is_none() {
                    // The picker's own page opens on the first pair.
                    write(&out.join(lang.code()).join("compare.html"), &page)?;
                    pages += 1;
                    first_pair = Some(());
                }
                write(
                    &out.join(lang.code())
                        .join(format!("compare-{}.html", entry.stem)),
                    page,
                )?;
                pages += 1;
            }
        }
    }

    pages += crate::model_check_page::write_model_check_pages(
        &bundle.model_checks,
        out,
        public_key,
        write,
    )?;
    pages += bundle.results.write_pages(out, public_key, write)?;
    for l in loaded.iter().filter(|l| !l.envelope.is_empty()) {
        write(
            &out.join("receipts").join(format!("{}.json", l.stem)),
            &l.envelope,
        )?;
    }
    for lang in Lang::ALL {
        write(
            &out.join(receipts_index_path(lang)),
            receipts_index(loaded, &result_links(bundle, lang), lang),
        )?;
    }
    write(&out.join("kvw.pub.json"), public_key)?;
    for (name, bytes) in &bundle.extras {
        write(&out.join("bundle").join(name), bytes)?;
    }
    write(&out.join("style.css"), STYLE_CSS)?;
    write(&out.join("embed.js"), EMBED_JS)?;
    write(
        &out.join("embed-example.html"),
        embed_example(&default_stem),
    )?;
    write(&out.join("EMBED.md"), EMBED_MD)?;

    Ok(SiteReport {
        pages,
        verified: catalog.iter().map(|e| e.stem.clone()).collect(),
        rejected: loaded
            .iter()
            .filter_map(|l| match &l.shown {
                Shown::Rejected { stem, reason } => Some((stem.clone(), reason.clone())),
                _ => None,
            })
            .collect(),
        wasm,
        index: out.join("index.html"),
        compressed: crate::compress::precompress(out).map_err(|source| SiteError::Write {
            path: out.to_path_buf(),
            source,
        })?,
    })
}
