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

    /// Write the gates page and every scenario replay in each language, and
    /// the receipts; returns the number of pages written.
    pub fn write_pages(
        &self,
        out: &Path,
        write: impl Fn(&Path, String) -> Result<(), SiteError>,
    ) -> Result<usize, SiteError> {
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
                write(&dir.join(GATES_PAGE), page(lang, title, GATES_PAGE, &body))?;
                pages += 1;
            }
            for (stem, _, p) in &self.scenarios {
                let (stem_owned, predicate) = (stem.clone(), p.clone());
                let gates_href = has_gates.then(|| GATES_PAGE.to_string());
                let body = Owner::new().with(|| {
                    view! { <ScenarioView stem=stem_owned predicate=predicate lang=lang gates_href=gates_href/> }
                        .to_html()
                });
                let title = format!(
                    "{} — {}",
                    p.scenario.name,
                    lang.pick("scenario", "scenario")
                );
                let file = format!("{stem}.html");
                write(&dir.join(&file), page(lang, &title, &file, &body))?;
                pages += 1;
            }
            for (stem, _, p) in &self.fuzz {
                let (stem_owned, predicate) = (stem.clone(), p.clone());
                let body = Owner::new().with(|| {
                    view! { <FuzzView stem=stem_owned predicate=predicate lang=lang/> }.to_html()
                });
                let file = format!("{stem}.html");
                write(&dir.join(&file), page(lang, stem, &file, &body))?;
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

/// A complete static page in `lang`, with a link to the same page in the
/// other language (`file` in its folder) and a link that skips to the
/// content for keyboard readers.
pub fn page(lang: Lang, title: &str, file: &str, body: &str) -> String {
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
        "<!DOCTYPE html>\n<html lang=\"{code}\" class=\"kvw-site\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n{head}\n<link rel=\"icon\" href=\"data:,\">\n<link rel=\"stylesheet\" href=\"../style.css\">\n</head>\n<body><a class=\"skip\" href=\"#main\">{skip}</a><header class=\"site\"><p class=\"brand\"><a href=\"../index.html\">kvwitness</a></p><nav class=\"langs\" aria-label=\"{langword}\">{langs}</nav></header><main id=\"main\" class=\"kvw-main\">{body}</main></body>\n</html>\n",
        code = lang.code(),
        langword = lang.pick("Language", "Lingua"),
        skip = lang.pick("Skip to content", "Vai al contenuto"),
    )
}
