//! Scenario and gates receipts in a site: reading them from the verified
//! bundle and writing their pages.
//!
//! The site builder hands every receipt here first ([`LoadedResults::take`]);
//! a scenario, gates or fuzz receipt that verifies with the bundle key under its
//! file name is kept, and every other receipt goes on to its own path. Then
//! [`LoadedResults::write_pages`] writes, per language, `gates.html` (every
//! gates receipt's table, [`crate::gates_page`]) and one replay per scenario
//! receipt and randomized-run receipt (`<stem>.html`,
//! [`crate::scenario_page`], [`crate::fuzz_page`]), plus the receipts
//! themselves under `receipts/`. The pages are static and need no script.

use std::collections::BTreeSet;
use std::path::Path;

use kvw_evidence::keys::PublicKey;
use kvw_evidence::scenario::{
    FuzzPredicate, ScenarioPredicate, FUZZ_PREDICATE_TYPE, GATES_PREDICATE_TYPE,
    SCENARIO_PREDICATE_TYPE,
};
use leptos::prelude::*;

use crate::fuzz_page::FuzzView;
use crate::gates_page::{GatesTable, GatesView};
use crate::i18n::Lang;
use crate::scenario_page::ScenarioView;
use crate::site::SiteError;

/// File name of the gates page in each language folder.
pub const GATES_PAGE: &str = "gates.html";

/// The scenario and gates receipts of a bundle, verified.
#[derive(Debug, Clone, Default)]
pub struct LoadedResults {
    /// Gates receipts with their envelope as stored.
    pub gates: Vec<(GatesTable, Vec<u8>)>,
    /// Scenario receipts: stem, envelope as stored, predicate.
    pub scenarios: Vec<(String, Vec<u8>, ScenarioPredicate)>,
    /// Randomized-run receipts: stem, envelope as stored, predicate.
    pub fuzz: Vec<(String, Vec<u8>, FuzzPredicate)>,
}

impl LoadedResults {
    /// Keep `receipts/<stem>.json` if it is a scenario or gates receipt that
    /// verifies with the bundle key under that name; `false` for any other.
    pub fn take(&mut self, stem: &str, envelope: &[u8], public_key_json: &str) -> bool {
        let Ok(key) = PublicKey::from_json(public_key_json.as_bytes()) else {
            return false;
        };
        let Ok(statement) = kvw_evidence::receipt::verify_statement(envelope, &key) else {
            return false;
        };
        if statement.name != format!("{stem}.json") {
            return false;
        }
        match statement.predicate_type.as_str() {
            GATES_PREDICATE_TYPE => match statement.parse() {
                Ok(predicate) => {
                    let table = GatesTable {
                        stem: stem.to_string(),
                        predicate,
                    };
                    self.gates.push((table, envelope.to_vec()));
                    true
                }
                Err(_) => false,
            },
            SCENARIO_PREDICATE_TYPE => match statement.parse() {
                Ok(p) => {
                    self.scenarios
                        .push((stem.to_string(), envelope.to_vec(), p));
                    true
                }
                Err(_) => false,
            },
            FUZZ_PREDICATE_TYPE => match statement.parse() {
                Ok(p) => {
                    self.fuzz.push((stem.to_string(), envelope.to_vec(), p));
                    true
                }
                Err(_) => false,
            },
            _ => false,
        }
    }

    /// The same scenario's receipt under other fixes (the first other one,
    /// in bundle order), to compare with.
    fn twin_of(&self, stem: &str, p: &ScenarioPredicate) -> Option<(String, ScenarioPredicate)> {
        self.scenarios
            .iter()
            .find(|(s, _, q)| s != stem && q.scenario.name == p.scenario.name && q.fixes != p.fixes)
            .map(|(s, _, q)| (s.clone(), q.clone()))
    }

    /// Write the gates page and every scenario replay in each language, and
    /// the receipts; returns the number of pages written.
    pub fn write_pages(
        &self,
        out: &Path,
        public_key_json: &str,
        write: impl Fn(&Path, String) -> Result<(), SiteError>,
    ) -> Result<usize, SiteError> {
        let gates_receipts: Vec<(&str, &[u8])> = self
            .gates
            .iter()
            .map(|(t, e)| (t.stem.as_str(), e.as_slice()))
            .collect();
        let mut pages = 0;
        let has_gates = !self.gates.is_empty();
        let scenarios: BTreeSet<(String, String)> = self
            .scenarios
            .iter()
            .map(|(stem, _, p)| (stem.clone(), p.trace_sha256.clone()))
            .collect();
        for lang in Lang::ALL {
            let dir = out.join(lang.code());
            if has_gates {
                let tables: Vec<GatesTable> = self.gates.iter().map(|(t, _)| t.clone()).collect();
                let scenarios = scenarios.clone();
                let body = Owner::new().with(|| {
                    view! { <GatesView tables=tables scenarios=scenarios lang=lang/> }.to_html()
                });
                let title = lang.pick("Acceptance gates", "Gate di accettazione");
                let shows = Shows {
                    public_key_json,
                    receipts: &gates_receipts,
                };
                write(
                    &dir.join(GATES_PAGE),
                    page(lang, title, GATES_PAGE, &body, &shows),
                )?;
                pages += 1;
            }
            for (stem, envelope, p) in &self.scenarios {
                let (stem_owned, predicate) = (stem.clone(), p.clone());
                let gates_href = has_gates.then(|| GATES_PAGE.to_string());
                let twin = self.twin_of(stem, p);
                let body = Owner::new().with(|| {
                    view! { <ScenarioView stem=stem_owned predicate=predicate lang=lang gates_href=gates_href twin=twin/> }
                        .to_html()
                });
                let title = format!(
                    "{} — {}",
                    p.scenario.name,
                    lang.pick("scenario", "scenario")
                );
                let file = format!("{stem}.html");
                let receipts = [(stem.as_str(), envelope.as_slice())];
                let shows = Shows {
                    public_key_json,
                    receipts: &receipts,
                };
                write(&dir.join(&file), page(lang, &title, &file, &body, &shows))?;
                pages += 1;
            }
            for (stem, envelope, p) in &self.fuzz {
                let (stem_owned, predicate) = (stem.clone(), p.clone());
                let body = Owner::new().with(|| {
                    view! { <FuzzView stem=stem_owned predicate=predicate lang=lang/> }.to_html()
                });
                let file = format!("{stem}.html");
                let receipts = [(stem.as_str(), envelope.as_slice())];
                let shows = Shows {
                    public_key_json,
                    receipts: &receipts,
                };
                write(&dir.join(&file), page(lang, stem, &file, &body, &shows))?;
                pages += 1;
            }
        }
        let envelopes = self
            .gates
            .iter()
            .map(|(t, e)| (&t.stem, e))
            .chain(self.scenarios.iter().map(|(s, e, _)| (s, e)))
            .chain(self.fuzz.iter().map(|(s, e, _)| (s, e)));
        for (stem, envelope) in envelopes {
            let path = out.join("receipts").join(format!("{stem}.json"));
            write(&path, String::from_utf8_lossy(envelope).into_owned())?;
        }
        Ok(pages)
    }
}

/// The receipts a static page reports and the key they verify with. The
/// site builder checked them; in the browser the page checks them again
/// (`results_check.js`): each file the page links is fetched and its
/// SHA-256 and signature are checked with WebCrypto, so a file altered after
/// the build gets the warning here as it does on a replay page.
#[derive(Debug, Clone, Copy)]
pub struct Shows<'a> {
    /// The bundle's `kvw.pub.json`.
    pub public_key_json: &'a str,
    /// `(stem, envelope as stored)` of each receipt the page reports.
    pub receipts: &'a [(&'a str, &'a [u8])],
}

/// The first 16 hex digits of a digest, enough to compare by eye.
fn short(hex: &str) -> String {
    hex.get(..16).unwrap_or(hex).to_string()
}

/// `(stem, SHA-256 of the file as stored)` of each receipt a page reports.
fn digests<'a>(shows: &Shows<'a>) -> Vec<(&'a str, String)> {
    shows
        .receipts
        .iter()
        .map(|(stem, envelope)| (*stem, kvw_evidence::canonical::sha256_hex(envelope)))
        .collect()
}

/// The `#kvw-results` data and the inline check, for `<head>`.
fn check_head(shows: &Shows<'_>, digests: &[(&str, String)]) -> String {
    let receipts: Vec<serde_json::Value> = digests
        .iter()
        .map(|(stem, sha256)| serde_json::json!({ "stem": stem, "sha256": sha256 }))
        .collect();
    let data = serde_json::json!({
        "root": "../",
        "public_key": shows.public_key_json,
        "receipts": receipts,
    });
    let json = data.to_string().replace('<', "\\u003c");
    format!(
        "<script type=\"application/json\" id=\"kvw-results\">{json}</script>\n<script>{}{}</script>",
        crate::site::RECEIPT_VERIFY,
        RESULTS_CHECK
    )
}

/// The browser check of a static result page's receipts.
const RESULTS_CHECK: &str = include_str!("results_check.js");

/// One banner per receipt: what the site builder checked, turned by the
/// browser's check into the badge or the warning (the style sheet picks the
/// words from `data-kvw-verdict`).
fn banners(lang: Lang, shows: &Shows<'_>, digests: &[(&str, String)]) -> String {
    let keyid = kvw_evidence::keys::PublicKey::from_json(shows.public_key_json.as_bytes())
        .map(|k| k.keyid())
        .unwrap_or_default();
    let index = format!("../{}", crate::site::receipts_index_path(lang));
    digests
        .iter()
        .map(|(stem, sha256)| {
            let (id, href, file) = (
                format!("kvw-trust-{stem}"),
                format!("../receipts/{stem}.json"),
                format!("{stem}.json"),
            );
            let (keyid, index) = (keyid.clone(), index.clone());
            Owner::new().with(|| {
                view! {
                    <div class="trust result" id=id role="status">
                        <p>
                            <span class="when-built">{lang.pick("Checked when this site was built: ", "Controllata alla costruzione del sito: ")}</span>
                            <span class="when-ok"><span aria-hidden="true">"✔ "</span><strong>{lang.pick("Verified in this browser: ", "Verificata in questo browser: ")}</strong></span>
                            <span class="when-bad"><span aria-hidden="true">"⚠ "</span><strong>{lang.pick("Not verified: ", "Non verificata: ")}</strong></span>
                            <a href=href><code>{file}</code></a>" · sha256 "<code class="digest" title=sha256.clone()>{short(sha256)}</code>
                            {lang.pick(" · key ", " · chiave ")}<code class="keyid" title=keyid.clone()>{short(&keyid)}</code>
                        </p>
                        <p class="when-bad">
                            {lang.pick(
                                "This file is not the one the site was built from, or its signature does not verify, so what this page says about it is hidden. ",
                                "Questo file non è quello da cui è stato costruito il sito, o la sua firma non è valida: ciò che questa pagina ne dice è nascosto. ",
                            )}
                            <a href=index>{lang.pick("Back to the verified receipts", "Torna alle ricevute verificate")}</a>
                        </p>
                    </div>
                }
                .to_html()
            })
        })
        .collect()
}

/// A complete static page in `lang`, with a link to the same page in the
/// other language (`file` in its folder), a link that skips to the
/// content for keyboard readers, and the browser's check of the receipts
/// the page reports ([`Shows`]).
pub fn page(lang: Lang, title: &str, file: &str, body: &str, shows: &Shows<'_>) -> String {
    let digests = digests(shows);
    let title = title.to_string();
    let head =
        Owner::new().with(|| view! { <title>{format!("{title} — kvwitness")}</title> }.to_html());
    let langs = Lang::ALL
        .into_iter()
        .filter(|l| *l != lang)
        .map(|l| {
            let href = format!("../{}/{file}", l.code());
            Owner::new().with(|| {
                view! { <a href=href hreflang=l.code() lang=l.code()>{l.endonym()}</a> }.to_html()
            })
        })
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "<!DOCTYPE html>\n<html lang=\"{code}\" class=\"kvw-site\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n{head}\n<link rel=\"icon\" href=\"data:,\">\n{check}\n<link rel=\"stylesheet\" href=\"../style.css\">\n</head>\n<body><a class=\"skip\" href=\"#main\">{skip}</a><header class=\"site\"><p class=\"brand\"><a href=\"../index.html\">kvwitness</a></p><nav class=\"langs\" aria-label=\"{langword}\">{langs}</nav></header><main id=\"main\" class=\"kvw-main\">{banners}<div class=\"kvw-result-body\">{body}</div></main></body>\n</html>\n",
        code = lang.code(),
        check = check_head(shows, &digests),
        banners = banners(lang, shows, &digests),
        langword = lang.pick("Language", "Lingua"),
        skip = lang.pick("Skip to content", "Vai al contenuto"),
    )
}
