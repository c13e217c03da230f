//! The data one page is rendered from.
//!
//! [`PageData`] is built on the native side, rendered to HTML, and embedded
//! in the page as JSON so the browser can rebuild exactly the same component
//! tree when it hydrates. It carries neither the envelope nor a decoded
//! predicate, only the SHA-256 of the receipt file the page links: the
//! browser fetches that file, verifies it, and replays only what it verified
//! itself, so the page and the file it calls "this receipt" cannot disagree.
//! The site's catalog (one file, `catalog.json`) is fetched the same way and
//! checked against its digest.

use std::sync::Arc;

use kvw_evidence::{ProbePredicate, Scale};
use serde::{Deserialize, Serialize};

use crate::i18n::Lang;

/// Id of the `<script type="application/json">` element holding [`PageData`].
pub const PAGE_DATA_ID: &str = "kvw-page";

/// Everything a replay page needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageData {
    pub lang: Lang,
    /// Relative path from this page to the site root (`""` or `"../"`).
    pub root: String,
    /// Stem of the receipt this page shows (`receipts/<stem>.json`).
    pub receipt: String,
    /// Rendered narrative HTML for steps 1..=7 in `lang` (may be empty).
    pub narratives: Vec<String>,
    /// Base URL of the engine's repository (`<base>/blob/<commit>/<path>`).
    pub engine_source_base: String,
    /// SHA-256 (hex) of `receipts/<receipt>.json` as the site was built from
    /// it, the same digest as the bundle's `SHA256SUMS` line.
    pub receipt_sha256: String,
    /// SHA-256 (hex) of the site's `catalog.json`.
    pub catalog_sha256: String,
    /// The bundle's `kvw.pub.json`.
    pub public_key: String,
    /// What real SGLang releases did at the doors of steps 2 and 5, from
    /// the bundle's upstream-run receipts (none when it carries none).
    #[serde(default)]
    pub upstream_doors: Vec<UpstreamDoor>,
}

/// One real release's decision at one of the incident's doors, as an
/// upstream-run receipt of the bundle records it
/// ([`kvw_evidence::upstream_run::DOOR_CASES`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamDoor {
    /// The replay step the door belongs to (2 or 5).
    pub step: u8,
    /// The SGLang release, e.g. `0.5.19`.
    pub release: String,
    /// What the released code decided: `admit`, `retire` or `refuse`.
    pub door: String,
    /// Stem of the upstream-run receipt that records it.
    pub stem: String,
}

/// File name of the site's catalog, at the site root.
pub const CATALOG_FILE: &str = "catalog.json";

/// The catalog entry of `stem`, if listed.
pub fn entry<'a>(catalog: &'a [CatalogEntry], stem: &str) -> Option<&'a CatalogEntry> {
    catalog.iter().find(|e| e.stem == stem)
}

impl PageData {
    /// URL of a receipt's page in this page's language, relative to this page.
    pub fn page_href(&self, stem: &str) -> String {
        page_href(&self.root, self.lang, stem)
    }

    /// URL of a receipt's envelope, relative to this page.
    pub fn receipt_href(&self, stem: &str) -> String {
        format!("{}receipts/{stem}.json", self.root)
    }

    /// URL of the site's catalog, relative to this page.
    pub fn catalog_href(&self) -> String {
        format!("{}{CATALOG_FILE}", self.root)
    }
}

/// URL of a receipt's page in `lang`, given the path to the site root.
pub fn page_href(root: &str, lang: Lang, stem: &str) -> String {
    format!("{root}{}/{stem}.html", lang.code())
}

/// One receipt of the site, summarised for switching and linking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogEntry {
    pub stem: String,
    /// Probe name, e.g. `incident`.
    pub probe: String,
    pub scale: Scale,
    /// Names of the switches that are on (see [`crate::catalog`]).
    pub switches: Vec<String>,
    pub http_status: u16,
    pub leak: bool,
    /// The outcome in words, one per language of [`Lang::ALL`].
    pub outcome: Vec<String>,
}

impl CatalogEntry {
    /// The outcome in words in `lang`.
    pub fn outcome(&self, lang: Lang) -> &str {
        let i = Lang::ALL.iter().position(|l| *l == lang).unwrap_or(0);
        self.outcome
            .get(i)
            .or(self.outcome.first())
            .map_or("", String::as_str)
    }
}

/// The receipt currently on screen and whether it may be replayed.
#[derive(Debug, Clone, PartialEq)]
pub enum Shown {
    /// The envelope verified with the bundle key; the predicate is authentic.
    Verified {
        stem: String,
        keyid: String,
        /// SHA-256 (hex) of the exact bytes verified.
        sha256: String,
        /// Shared, not copied: the replay, the compare view and the signals
        /// that hold it all read the one parsed predicate.
        predicate: Arc<ProbePredicate>,
    },
    /// The envelope did not verify: shown as a warning, never replayed.
    Rejected { stem: String, reason: String },
    /// A receipt is being fetched.
    Loading { stem: String },
}

impl Shown {
    /// Stem of the receipt concerned.
    pub fn stem(&self) -> &str {
        match self {
            Shown::Verified { stem, .. }
            | Shown::Rejected { stem, .. }
            | Shown::Loading { stem } => stem,
        }
    }

    /// The authentic predicate, if verified.
    pub fn predicate(&self) -> Option<&Arc<ProbePredicate>> {
        match self {
            Shown::Verified { predicate, .. } => Some(predicate),
            _ => None,
        }
    }

    /// What is on screen, as a key: the replay is drawn afresh when it
    /// changes (another file, another verdict, a load in progress).
    pub fn identity(&self) -> String {
        match self {
            Shown::Verified { stem, sha256, .. } => format!("verified:{stem}:{sha256}"),
            Shown::Rejected { stem, reason } => format!("rejected:{stem}:{reason}"),
            Shown::Loading { stem } => format!("loading:{stem}"),
        }
    }

    /// Whether the receipt verified.
    pub fn is_verified(&self) -> bool {
        matches!(self, Shown::Verified { .. })
    }
}

/// A run in words: its fixes and scale (`no fix · walkthrough`).
pub fn run_label(entry: Option<&CatalogEntry>, stem: &str, lang: Lang) -> String {
    let Some(e) = entry else {
        return stem.to_string();
    };
    format!("{} · {}", fixes_label(e, lang), scale_label(e.scale, lang))
}

/// The switches a run has on, in words: `no fix` or `a + b`.
pub fn fixes_label(e: &CatalogEntry, lang: Lang) -> String {
    if e.switches.is_empty() {
        no_fix(lang).to_string()
    } else {
        e.switches.join(" + ")
    }
}

/// A run with no switch on, in words.
pub fn no_fix(lang: Lang) -> &'static str {
    lang.pick("no fix", "nessuna correzione")
}

/// A run's scale in words.
pub fn scale_label(scale: Scale, lang: Lang) -> &'static str {
    match scale {
        Scale::Walkthrough => lang.pick("walkthrough", "dimostrativa"),
        Scale::Incident => lang.pick("incident scale", "scala dell'incidente"),
    }
}

/// The page title for receipt `stem`: its fixes, scale and outcome in words,
/// so tabs, history and bookmarks name the run shown.
pub fn page_title(entry: Option<&CatalogEntry>, stem: &str, lang: Lang) -> String {
    let Some(e) = entry else {
        return format!("{stem} — kvwitness");
    };
    let verdict = if e.leak {
        lang.pick("leak", "fuga")
    } else {
        lang.pick("no leak", "nessuna fuga")
    };
    // The tab says what the page is before which run it shows.
    let what = lang.pick(
        "SGLang PD KV-cache leak, signed replay",
        "Fuga di cache KV in SGLang PD, riproduzione firmata",
    );
    format!(
        "{what}: {} → HTTP {} {verdict} — kvwitness",
        run_label(entry, stem, lang),
        e.http_status
    )
}
