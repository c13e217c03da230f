//! The static site builder: an evidence bundle in, a folder of HTML out.
//!
//! [`build_site`] verifies every receipt of a bundle with the bundle's key,
//! renders one page per receipt and language (so fix switches and language
//! links are plain links), a compare page per receipt against the run with no
//! fixes, and copies the receipts, the key and the browser build next to
//! them. A receipt that fails verification still gets a page, but that page
//! is a warning, never a replay.
//!
//! Layout of the output:
//!
//! ```text
//! index.html               default receipt, English
//! en/<stem>.html           one page per receipt (and it/<stem>.html)
//! en/compare-<stem>.html   <stem> next to the run without fixes
//! receipts/<stem>.json     the DSSE envelopes, byte for byte
//! kvw.pub.json             the bundle's public key
//! pkg/                     hydrate build (kvw_explorer.js + .wasm), if given
//! style.css, embed.js, embed-example.html, EMBED.md
//! ```

use std::fs;
use std::path::{Path, PathBuf};

use leptos::prelude::*;

use crate::catalog::{baseline_for, default_entry, entry_for};
use crate::components::compare::{CompareView, Side};
use crate::components::shell::SitePage;
use crate::components::ReplayCtx;
use crate::i18n::Lang;
use crate::links::DEFAULT_ENGINE_SOURCE_BASE;
use crate::markdown;
use crate::model::{page_href, CatalogEntry, PageData, Shown, PAGE_DATA_ID};
use crate::trust;

/// Static files that ship with every site.
const STYLE_CSS: &str = include_str!("../../site/style.css");
const EMBED_JS: &str = include_str!("../../site/embed.js");
const EMBED_EXAMPLE: &str = include_str!("../../site/embed-example.html");
const EMBED_MD: &str = include_str!("../../site/EMBED.md");

/// File names the hydrate build produces (see `scripts/build-wasm.sh`).
pub const WASM_JS: &str = "kvw_explorer.js";
pub const WASM_BIN: &str = "kvw_explorer_bg.wasm";

/// What to build.
#[derive(Debug, Clone)]
pub struct SiteOptions {
    /// Bundle folder: `receipts/*.json` and `kvw.pub.json`.
    pub bundle: PathBuf,
    /// Output folder; created if missing, files inside are overwritten.
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
            wasm_dir: pkg.join(WASM_BIN).is_file().then_some(pkg),
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
    #[error("wasm folder {0} lacks {WASM_JS} or {WASM_BIN}; run scripts/build-wasm.sh")]
    NoWasm(PathBuf),
}

fn read(path: &Path) -> Result<String, SiteError> {
    fs::read_to_string(path).map_err(|source| SiteError::Read {
        path: path.to_path_buf(),
        source,
    })
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
    envelope: String,
    shown: Shown,
}

/// Read and verify every `receipts/*.json` of a bundle (regular files only,
/// never following links out of the folder), sorted by name.
fn load_bundle(bundle: &Path) -> Result<(String, Vec<Loaded>), SiteError> {
    let key_path = bundle.join("kvw.pub.json");
    if !key_path.is_file() {
        return Err(SiteError::NoPublicKey(bundle.to_path_buf()));
    }
    let public_key = read(&key_path)?;
    let dir = bundle.join("receipts");
    let entries = fs::read_dir(&dir).map_err(|source| SiteError::Read {
        path: dir.clone(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(SiteError::NoReceipts(bundle.to_path_buf()));
    }
    let mut loaded = Vec::new();
    for path in paths {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let envelope = read(&path)?;
        let shown = trust::check(&stem, &envelope, &public_key);
        loaded.push(Loaded {
            stem,
            envelope,
            shown,
        });
    }
    Ok((public_key, loaded))
}

/// JSON safe to place inside a `<script>` element.
fn script_json(data: &PageData) -> String {
    serde_json::to_string(data)
        .unwrap_or_default()
        .replace('<', "\\u003c")
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Render the `<body>` content of a replay page.
pub fn render_replay_body(data: PageData, shown: Shown) -> String {
    Owner::new().with(|| {
        ReplayCtx::provide(data, shown);
        view! { <SitePage/> }.to_html()
    })
}

/// A complete replay page.
pub fn render_replay_page(data: &PageData, shown: Shown, hydrate: bool) -> String {
    let lang = data.lang;
    let title = format!("{} — kvwitness", data.receipt);
    let alternates: String = Lang::ALL
        .into_iter()
        .map(|l| {
            format!(
                r#"<link rel="alternate" hreflang="{}" href="{}">"#,
                l.code(),
                page_href(&data.root, l, &data.receipt)
            )
        })
        .collect();
    let boot = if hydrate {
        format!(
            r#"<script type="module">import init, {{ hydrate }} from "{root}pkg/{WASM_JS}";
init({{ module_or_path: "{root}pkg/{WASM_BIN}" }}).then(() => hydrate()).catch((e) => {{ document.documentElement.dataset.kvwError = String(e); console.error(e); }});</script>"#,
            root = data.root
        )
    } else {
        String::new()
    };
    let body = render_replay_body(data.clone(), shown);
    format!(
        "<!DOCTYPE html>\n<html lang=\"{lang}\" class=\"kvw-site\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n<link rel=\"icon\" href=\"data:,\">\n<link rel=\"stylesheet\" href=\"{root}style.css\">\n{alternates}\n<script type=\"application/json\" id=\"{PAGE_DATA_ID}\">{json}</script>\n{boot}\n</head>\n<body>{body}</body>\n</html>\n",
        lang = lang.code(),
        title = escape(&title),
        root = data.root,
        json = script_json(data),
    )
}

/// A complete compare page (static, no scripts).
pub fn render_compare_page(lang: Lang, root: &str, left: Side, right: Side) -> String {
    let title = format!("{} ↔ {} — kvwitness", left.stem, right.stem);
    let other = Lang::ALL
        .into_iter()
        .filter(|l| *l != lang)
        .map(|l| {
            format!(
                r#"<a href="{root}{}/compare-{}.html" hreflang="{}" lang="{}">{}</a>"#,
                l.code(),
                right.stem,
                l.code(),
                l.code(),
                l.endonym()
            )
        })
        .collect::<Vec<_>>()
        .join(" ");
    let body =
        Owner::new().with(|| view! { <CompareView left=left right=right lang=lang/> }.to_html());
    format!(
        "<!DOCTYPE html>\n<html lang=\"{code}\" class=\"kvw-site\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n<link rel=\"icon\" href=\"data:,\">\n<link rel=\"stylesheet\" href=\"{root}style.css\">\n</head>\n<body><a class=\"skip\" href=\"#main\">{skip}</a><header class=\"site\"><p class=\"brand\"><a href=\"{root}index.html\">kvwitness</a></p><nav class=\"langs\" aria-label=\"{langword}\">{other}</nav></header><main id=\"main\" class=\"kvw-main\">{body}</main></body>\n</html>\n",
        code = lang.code(),
        title = escape(&title),
        skip = lang.pick("Skip to the comparison", "Vai al confronto"),
        langword = lang.pick("Language", "Lingua"),
    )
}

/// A plain listing of the receipts, since static servers list no folders.
fn receipts_index(loaded: &[Loaded]) -> String {
    let items: String = loaded
        .iter()
        .map(|l| {
            let status = match &l.shown {
                Shown::Verified { .. } => "verified".to_string(),
                Shown::Rejected { reason, .. } => format!("NOT VERIFIED: {}", escape(reason)),
                Shown::Loading { .. } => String::new(),
            };
            format!("<li><a href=\"{s}.json\">{s}.json</a> — {status} — <a href=\"../en/{s}.html\">replay</a></li>\n", s = escape(&l.stem))
        })
        .collect();
    format!("<!DOCTYPE html>\n<html lang=\"en\" class=\"kvw-site\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Receipts — kvwitness</title><link rel=\"icon\" href=\"data:,\"><link rel=\"stylesheet\" href=\"../style.css\"></head><body><main id=\"main\" class=\"kvw-main\"><h1>Receipts</h1><p>Public key: <a href=\"../kvw.pub.json\">kvw.pub.json</a></p><ul>\n{items}</ul></main></body></html>\n")
}

/// Copy the browser build into `out/pkg`; `Ok(false)` when none is given.
fn copy_wasm(wasm_dir: Option<&Path>, out: &Path) -> Result<bool, SiteError> {
    let Some(dir) = wasm_dir else {
        return Ok(false);
    };
    if !dir.join(WASM_JS).is_file() || !dir.join(WASM_BIN).is_file() {
        return Err(SiteError::NoWasm(dir.to_path_buf()));
    }
    for name in [WASM_JS, WASM_BIN] {
        let bytes = fs::read(dir.join(name)).map_err(|source| SiteError::Read {
            path: dir.join(name),
            source,
        })?;
        write(&out.join("pkg").join(name), bytes)?;
    }
    Ok(true)
}

/// Build the site described by `opts`.
pub fn build_site(opts: &SiteOptions) -> Result<SiteReport, SiteError> {
    let (public_key, loaded) = load_bundle(&opts.bundle)?;
    let out = &opts.out;
    let wasm = copy_wasm(opts.wasm_dir.as_deref(), out)?;

    let catalog: Vec<CatalogEntry> = loaded
        .iter()
        .filter_map(|l| l.shown.predicate().map(|p| entry_for(&l.stem, p)))
        .collect();
    let default_stem =
        default_entry(&catalog).map_or_else(|| loaded[0].stem.clone(), |e| e.stem.clone());
    let mut pages = 0;

    for lang in Lang::ALL {
        let narratives =
            markdown::narratives(lang, opts.narratives_dir.as_deref()).map_err(|source| {
                SiteError::Read {
                    path: opts.narratives_dir.clone().unwrap_or_default(),
                    source,
                }
            })?;
        for l in &loaded {
            let mut data = PageData {
                lang,
                root: "../".to_string(),
                receipt: l.stem.clone(),
                catalog: catalog.clone(),
                narratives: narratives.clone(),
                engine_source_base: opts.engine_source_base.clone(),
                envelope: l.envelope.clone(),
                public_key: public_key.clone(),
            };
            write(
                &out.join(lang.code()).join(format!("{}.html", l.stem)),
                render_replay_page(&data, l.shown.clone(), wasm),
            )?;
            pages += 1;
            if lang == Lang::En && l.stem == default_stem {
                data.root = "./".to_string();
                write(
                    &out.join("index.html"),
                    render_replay_page(&data, l.shown.clone(), wasm),
                )?;
                pages += 1;
            }
        }
        for entry in &catalog {
            let Some(base) = baseline_for(&catalog, entry).filter(|b| b.stem != entry.stem) else {
                continue;
            };
            let side = |stem: &str| {
                let l = loaded.iter().find(|l| l.stem == stem)?;
                Some(Side {
                    stem: stem.to_string(),
                    href: format!("{stem}.html"),
                    predicate: l.shown.predicate()?.clone(),
                })
            };
            if let (Some(left), Some(right)) = (side(&base.stem), side(&entry.stem)) {
                write(
                    &out.join(lang.code())
                        .join(format!("compare-{}.html", entry.stem)),
                    render_compare_page(lang, "../", left, right),
                )?;
                pages += 1;
            }
        }
    }

    for l in &loaded {
        write(
            &out.join("receipts").join(format!("{}.json", l.stem)),
            &l.envelope,
        )?;
    }
    write(
        &out.join("receipts").join("index.html"),
        receipts_index(&loaded),
    )?;
    write(&out.join("kvw.pub.json"), &public_key)?;
    for extra in ["index.json", "SHA256SUMS", "README.md"] {
        let path = opts.bundle.join(extra);
        if path.is_file() {
            write(&out.join("bundle").join(extra), read(&path)?)?;
        }
    }
    write(&out.join("style.css"), STYLE_CSS)?;
    write(&out.join("embed.js"), EMBED_JS)?;
    write(
        &out.join("embed-example.html"),
        EMBED_EXAMPLE.replace("{{RECEIPT}}", &default_stem),
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
    })
}
