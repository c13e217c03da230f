//! The data one page is rendered from.
//!
//! [`PageData`] is built on the native side, rendered to HTML, and embedded
//! in the page as JSON so the browser can rebuild exactly the same component
//! tree when it hydrates. It deliberately carries the *signed envelope* and
//! the public key rather than a decoded predicate: the browser decodes the
//! predicate only out of an envelope it has verified itself.

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
    /// Every receipt of the site, for the fix switches.
    pub catalog: Vec<CatalogEntry>,
    /// Rendered narrative HTML for steps 1..=7 in `lang` (may be empty).
    pub narratives: Vec<String>,
    /// Base URL of the engine's repository (`<base>/blob/<commit>/<path>`).
    pub engine_source_base: String,
    /// The DSSE envelope exactly as stored in the bundle.
    pub envelope: String,
    /// The bundle's `kvw.pub.json`.
    pub public_key: String,
}

impl PageData {
    /// The catalog entry of the receipt shown, if listed.
    pub fn entry(&self, stem: &str) -> Option<&CatalogEntry> {
        self.catalog.iter().find(|e| e.stem == stem)
    }

    /// URL of a receipt's page in this page's language, relative to this page.
    pub fn page_href(&self, stem: &str) -> String {
        page_href(&self.root, self.lang, stem)
    }

    /// URL of a receipt's envelope, relative to this page.
    pub fn receipt_href(&self, stem: &str) -> String {
        format!("{}receipts/{stem}.json", self.root)
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
    pub outcome: String,
}

/// The receipt currently on screen and whether it may be replayed.
#[derive(Debug, Clone, PartialEq)]
pub enum Shown {
    /// The envelope verified with the bundle key; the predicate is authentic.
    Verified {
        stem: String,
        keyid: String,
        predicate: Box<ProbePredicate>,
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
    pub fn predicate(&self) -> Option<&ProbePredicate> {
        match self {
            Shown::Verified { predicate, .. } => Some(predicate),
            _ => None,
        }
    }
}
