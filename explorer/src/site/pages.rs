//! Which pages a site has, rendered from the verified bundle.
//!
//! Per language: one replay page per probe run (and `index.html`, the
//! default run in English), a compare page per run against the run without
//! fixes (and the picker, `compare.html`), the gates table, one static page
//! per scenario, randomized-run, model-check and audit receipt, and the
//! receipts index. Then the receipts byte for byte, the key, the bundle's
//! own files, the style sheet and the embed files. Each receipt's pages and
//! copy are counted against the writer's per-receipt budget; the page
//! modules keep far below it ([`crate::limits`]).

use std::collections::BTreeSet;

use kvw_evidence::canonical::sha256_hex;
use kvw_evidence::scenario::ScenarioPredicate;
use kvw_evidence::upstream_run::DOOR_CASES;
use leptos::prelude::*;

use super::document::{render_compare_page, render_replay_page};
use super::index_page::{embed_example, receipts_index};
use super::intro;
use super::layout::{
    compare_page, receipt_file, receipt_page, receipts_index_path, COMPARE_PAGE, GATES_PAGE,
};
use super::load::{Kind, Loaded, LoadedBundle};
use super::result_doc::{page, report_page, Shows};
use super::write::SiteWriter;
use super::{SiteError, SiteOptions};
use crate::audit_page::AuditView;
use crate::catalog::{baseline_for, default_entry, entry_for, showcase_pair};
use crate::components::compare::ComparePair;
use crate::fuzz_page::FuzzView;
use crate::gates_page::{GatesTable, GatesView};
use crate::i18n::Lang;
use crate::limits::truncation_line;
use crate::markdown;
use crate::model_check_page::ModelCheckView;
use crate::page_data::{CatalogEntry, PageData, Shown, UpstreamDoor, CATALOG_FILE};
use crate::report_page::{sorted, ReportExchanges, ReportFindings, ReportGate, REPORT_PAGE};
use crate::scenario_page::ScenarioView;
use crate::upstream_run_page::UpstreamRunView;

/// Static files that ship with every site.
const STYLE_CSS: &str = include_str!("../../../site/style.css");
const EMBED_JS: &str = include_str!("../../../site/embed.js");
const EMBED_MD: &str = include_str!("../../../site/EMBED.md");

/// What rendering came to.
pub struct Rendered {
    pub pages: usize,
    /// The probe runs replayed.
    pub verified: Vec<String>,
    /// Lines for the reader of the build: pages cut short, links not made.
    pub notes: Vec<String>,
}

/// Render every page and copy every file of the site through `w`.
pub fn render_site(
    opts: &SiteOptions,
    bundle: &LoadedBundle,
    wasm: bool,
    w: &mut SiteWriter,
) -> Result<Rendered, SiteError> {
    let probes: Vec<(&Loaded, &Shown)> = bundle.probes().collect();
    let catalog: Vec<CatalogEntry> = probes
        .iter()
        .filter_map(|(l, shown)| shown.predicate().map(|p| entry_for(&l.stem, p)))
        .collect();
    let default_stem = default_entry(&catalog)
        .map(|e| e.stem.clone())
        .or_else(|| probes.first().map(|(l, _)| l.stem.clone()))
        .unwrap_or_default();
    let catalog_json = serde_json::to_vec(&catalog).unwrap_or_default();
    let catalog_sha256 = sha256_hex(&catalog_json);
    w.put(CATALOG_FILE, &catalog_json)?;
    let mut pages = 0;

    let narratives: Vec<(Lang, Vec<String>)> = Lang::ALL
        .into_iter()
        .map(|lang| {
            markdown::narratives(lang, opts.narratives_dir.as_deref())
                .map(|n| (lang, n))
                .map_err(|source| SiteError::Read {
                    path: opts.narratives_dir.clone().unwrap_or_default(),
                    source,
                })
        })
        .collect::<Result<_, _>>()?;
    let upstream_doors = upstream_doors(bundle);
    let page_data = |lang: Lang, stem: &str, narratives: Vec<String>, sha256: String| PageData {
        lang,
        root: "../".to_string(),
        receipt: stem.to_string(),
        narratives,
        engine_source_base: opts.engine_source_base.clone(),
        receipt_sha256: sha256,
        catalog_sha256: catalog_sha256.clone(),
        public_key: bundle.public_key.clone(),
        upstream_doors: upstream_doors.clone(),
    };

    // Probe runs: a replay per language, the entry page, the receipt.
    let runs: Vec<intro::Run> = probes
        .iter()
        .filter_map(|(l, shown)| {
            shown.predicate().map(|p| intro::Run {
                stem: &l.stem,
                predicate: p,
            })
        })
        .collect();
    for (l, shown) in &probes {
        let keyid = match shown {
            Shown::Verified { keyid, .. } => keyid.clone(),
            _ => String::new(),
        };
        pages += w.for_receipt(&l.stem, |w| {
            let mut pages = 0;
            for (lang, narratives) in &narratives {
                let sha256 = sha256_hex(&l.envelope);
                let mut data = page_data(*lang, &l.stem, narratives.clone(), sha256);
                let islands = intro::islands(&runs, &l.stem, &keyid, &data.root, *lang);
                let html = render_replay_page(&data, &catalog, (*shown).clone(), islands, wasm);
                w.put(&receipt_page(*lang, &l.stem), html)?;
                pages += 1;
                if *lang == Lang::En && l.stem == default_stem {
                    data.root = "./".to_string();
                    let islands = intro::islands(&runs, &l.stem, &keyid, &data.root, *lang);
                    let html = render_replay_page(&data, &catalog, (*shown).clone(), islands, wasm);
                    w.put("index.html", html)?;
                    pages += 1;
                }
            }
            w.put(&receipt_file(&l.stem), &l.envelope)?;
            Ok(pages)
        })?;
    }

    // Compare pages: each run against its baseline, and the picker.
    for lang in Lang::ALL {
        let shown = |stem: &str| {
            probes
                .iter()
                .find(|(l, _)| l.stem == stem)
                .map(|(_, s)| (*s).clone())
        };
        let showcase = showcase_pair(&catalog).map(|(a, b)| ComparePair {
            left: a.stem.clone(),
            right: b.stem.clone(),
        });
        let mut first = None;
        for entry in &catalog {
            let Some(base) = baseline_for(&catalog, entry).filter(|b| b.stem != entry.stem) else {
                continue;
            };
            let pair = ComparePair {
                left: base.stem.clone(),
                right: entry.stem.clone(),
            };
            let (Some(left), Some(right)) = (shown(&pair.left), shown(&pair.right)) else {
                continue;
            };
            let data = page_data(lang, &pair.right, Vec::new(), String::new());
            let html = render_compare_page(&data, &catalog, &pair, (left, right), wasm);
            w.put(&compare_page(lang, &entry.stem), html)?;
            pages += 1;
            first.get_or_insert(pair);
        }
        // The picker's own page opens on the pair that shows what the fixes
        // change (else on the first pair drawn above).
        if let Some(pair) = showcase.or(first) {
            if let (Some(left), Some(right)) = (shown(&pair.left), shown(&pair.right)) {
                let data = page_data(lang, &pair.right, Vec::new(), String::new());
                let html = render_compare_page(&data, &catalog, &pair, (left, right), wasm);
                w.put(&format!("{}/{COMPARE_PAGE}", lang.code()), html)?;
                pages += 1;
            }
        }
    }

    let (result_pages, notes) = render_results(bundle, w)?;
    pages += result_pages;
    pages += render_report(bundle, probes.is_empty(), w)?;
    for lang in Lang::ALL {
        w.put(receipts_index_path(lang), receipts_index(bundle, lang))?;
        pages += 1;
    }
    w.put("kvw.pub.json", &bundle.public_key)?;
    for (name, bytes) in &bundle.extras {
        w.put(&format!("bundle/{name}"), bytes)?;
    }
    w.put("style.css", STYLE_CSS)?;
    w.put("embed.js", EMBED_JS)?;
    w.put("embed-example.html", embed_example(&default_stem))?;
    w.put("EMBED.md", EMBED_MD)?;
    Ok(Rendered {
        pages,
        verified: catalog.iter().map(|e| e.stem.clone()).collect(),
        notes,
    })
}

/// Render `view` to HTML under its own reactive owner.
fn html<V: IntoView + 'static>(view: impl FnOnce() -> V) -> String {
    Owner::new().with(|| view().into_view().to_html())
}

/// The gates page and the static page of every scenario, randomized-run,
/// model-check and audit receipt, in each language, with the receipts;
/// returns the pages written and the build's notes about them.
fn render_results(
    bundle: &LoadedBundle,
    w: &mut SiteWriter,
) -> Result<(usize, Vec<String>), SiteError> {
    let public_key_json = bundle.public_key.as_str();
    let mut pages = 0;
    let mut notes = Vec::new();
    let gates: Vec<(&Loaded, GatesTable)> = bundle
        .receipts
        .iter()
        .filter_map(|l| match &l.kind {
            Kind::Gates(p) => Some((
                l,
                GatesTable {
                    stem: l.stem.clone(),
                    predicate: (**p).clone(),
                },
            )),
            _ => None,
        })
        .collect();
    let scenarios: Vec<(&Loaded, &ScenarioPredicate)> = bundle
        .receipts
        .iter()
        .filter_map(|l| match &l.kind {
            Kind::Scenario(p) => Some((l, &**p)),
            _ => None,
        })
        .collect();

    if let Some((first, _)) = gates.first() {
        let digests: BTreeSet<(String, String)> = scenarios
            .iter()
            .map(|(l, p)| (l.stem.clone(), p.trace_sha256.clone()))
            .collect();
        let receipts: Vec<(&str, &[u8])> = gates
            .iter()
            .map(|(l, _)| (l.stem.as_str(), l.envelope.as_slice()))
            .collect();
        let shows = Shows {
            public_key_json,
            receipts: &receipts,
        };
        pages += w.for_receipt(&first.stem, |w| {
            for lang in Lang::ALL {
                let tables: Vec<GatesTable> = gates.iter().map(|(_, t)| t.clone()).collect();
                let scenarios = digests.clone();
                let body = html(
                    move || view! { <GatesView tables=tables scenarios=scenarios lang=lang/> },
                );
                let title = lang.pick("Acceptance gates", "Gate di accettazione");
                w.put(
                    &format!("{}/{GATES_PAGE}", lang.code()),
                    page(lang, title, GATES_PAGE, &body, &shows),
                )?;
            }
            for (l, _) in &gates {
                w.put(&receipt_file(&l.stem), &l.envelope)?;
            }
            Ok(Lang::ALL.len())
        })?;
    }

    let has_gates = !gates.is_empty();
    for l in &bundle.receipts {
        let stem = l.stem.clone();
        if matches!(l.kind, Kind::Probe(_) | Kind::Gates(_)) {
            continue;
        }
        notes.extend(notes_on(l));
        let receipts = [(stem.as_str(), l.envelope.as_slice())];
        let shows = Shows {
            public_key_json,
            receipts: &receipts,
        };
        pages += w.for_receipt(&stem, |w| {
            let mut pages = 0;
            for lang in Lang::ALL {
                let Some((title, body)) = result_body(l, lang, has_gates, &scenarios) else {
                    continue;
                };
                let file = format!("{stem}.html");
                w.put(
                    &receipt_page(lang, &stem),
                    page(lang, &title, &file, &body, &shows),
                )?;
                pages += 1;
            }
            w.put(&receipt_file(&stem), &l.envelope)?;
            Ok(pages)
        })?;
    }
    Ok((pages, notes))
}

/// The report of the bundle's audit receipts, in each language
/// (`<lang>/report.html`), and as the site's `index.html` (English) when
/// the bundle holds no probe run to open on; returns the pages written.
fn render_report(
    bundle: &LoadedBundle,
    entry: bool,
    w: &mut SiteWriter,
) -> Result<usize, SiteError> {
    let audits: Vec<(&Loaded, ReportGate)> = bundle
        .audits()
        .map(|(l, p)| {
            (
                l,
                ReportGate {
                    stem: l.stem.clone(),
                    predicate: p.clone(),
                },
            )
        })
        .collect();
    let Some((first, _)) = audits.first() else {
        return Ok(0);
    };
    let receipts: Vec<(&str, &[u8])> = audits
        .iter()
        .map(|(l, _)| (l.stem.as_str(), l.envelope.as_slice()))
        .collect();
    let shows = Shows {
        public_key_json: bundle.public_key.as_str(),
        receipts: &receipts,
    };
    let gates = sorted(audits.iter().map(|(_, g)| g.clone()).collect());
    w.for_receipt(&first.stem, |w| {
        let mut pages = 0;
        for lang in Lang::ALL {
            let mut places = vec![(format!("{}/{REPORT_PAGE}", lang.code()), "../", "")];
            if entry && lang == Lang::En {
                places.push(("index.html".to_string(), "./", "en/"));
            }
            for (path, root, folder) in places {
                let (g, f) = (gates.clone(), folder.to_string());
                let findings = html(move || view! { <ReportFindings gates=g lang=lang pages=f/> });
                let (g, r) = (gates.clone(), root.to_string());
                let details = html(move || view! { <ReportExchanges gates=g lang=lang root=r/> });
                let title = lang.pick("Audit report", "Rapporto di audit");
                let html = report_page(
                    lang,
                    title,
                    (REPORT_PAGE, root),
                    (&findings, &details),
                    &shows,
                );
                w.put(&path, html)?;
                pages += 1;
            }
        }
        Ok(pages)
    })
}

/// What the real releases did at the incident's doors, from the bundle's
/// upstream-run receipts of [`DOOR_CASES`], by step and then release.
fn upstream_doors(bundle: &LoadedBundle) -> Vec<UpstreamDoor> {
    let mut doors: Vec<UpstreamDoor> = bundle
        .receipts
        .iter()
        .filter_map(|l| {
            let Kind::UpstreamRun(p) = &l.kind else {
                return None;
            };
            let (step, _) = DOOR_CASES.iter().find(|(_, case)| *case == p.case)?;
            Some(UpstreamDoor {
                step: *step,
                release: p.release.clone(),
                door: p.upstream.get("door")?.as_str()?.to_string(),
                stem: l.stem.clone(),
            })
        })
        .collect();
    doors.sort_by(|a, b| (a.step, &a.release).cmp(&(b.step, &b.release)));
    doors
}

/// What the build tells its reader about the page of receipt `l`: drawn
/// within the page limits, an address shown as text.
fn notes_on(l: &Loaded) -> Vec<String> {
    let file = receipt_file(&l.stem);
    let mut notes = Vec::new();
    let (steps, pictures) = match &l.kind {
        Kind::Probe(_) | Kind::Gates(_) => return notes,
        Kind::Scenario(p) => (p.events.len(), Some(p.pages.len())),
        Kind::Fuzz(p) => p
            .counterexample
            .as_ref()
            .map_or((0, Some(0)), |c| (c.events.len(), Some(c.pages.len()))),
        Kind::ModelCheck(p) => (p.counterexample.as_ref().map_or(0, |c| c.steps.len()), None),
        Kind::Audit(p) => (p.exchanges.len(), None),
        Kind::UpstreamRun(p) => (p.fields.len(), None),
    };
    if let Some(cut) = truncation_line(steps, pictures) {
        notes.push(format!("{file}: {cut}"));
    }
    if let Kind::Scenario(p) = &l.kind {
        if let Some(u) = &p.scenario.upstream {
            if crate::links::web_href(&u.url).is_none() {
                notes.push(format!(
                    "{file}: its upstream address {:?} is not a plain http(s) URL; shown as text, not linked",
                    u.url
                ));
            }
        }
    }
    notes
}

/// The title and rendered body of the static page of a scenario,
/// randomized-run, model-check or audit receipt in `lang`; `None` for the
/// kinds drawn elsewhere.
fn result_body(
    l: &Loaded,
    lang: Lang,
    has_gates: bool,
    scenarios: &[(&Loaded, &ScenarioPredicate)],
) -> Option<(String, String)> {
    let (s, stem) = (l.stem.clone(), l.stem.as_str());
    Some(match &l.kind {
        Kind::Scenario(p) => {
            let gates_href = has_gates.then(|| GATES_PAGE.to_string());
            let twin = twin_of(scenarios, stem, p);
            let predicate = (**p).clone();
            let title = format!(
                "{} — {}",
                p.scenario.name,
                lang.pick("scenario", "scenario")
            );
            let body = html(
                move || view! { <ScenarioView stem=s predicate=predicate lang=lang gates_href=gates_href twin=twin/> },
            );
            (title, body)
        }
        Kind::Fuzz(p) => {
            let predicate = (**p).clone();
            let body = html(move || view! { <FuzzView stem=s predicate=predicate lang=lang/> });
            (stem.to_string(), body)
        }
        Kind::ModelCheck(p) => {
            let predicate = (**p).clone();
            let body =
                html(move || view! { <ModelCheckView stem=s predicate=predicate lang=lang/> });
            let title = format!(
                "{stem} — {}",
                lang.pick("model check", "verifica del modello")
            );
            (title, body)
        }
        Kind::Audit(p) => {
            let predicate = (**p).clone();
            let body = html(move || view! { <AuditView stem=s predicate=predicate lang=lang/> });
            (format!("{stem} — audit"), body)
        }
        Kind::UpstreamRun(p) => {
            let predicate = (**p).clone();
            let title = format!("SGLang {} — {}", p.release, p.case);
            let body =
                html(move || view! { <UpstreamRunView stem=s predicate=predicate lang=lang/> });
            (title, body)
        }
        Kind::Probe(_) | Kind::Gates(_) => return None,
    })
}

/// The same scenario's receipt under other fixes (the first other one, in
/// bundle order), to compare with.
fn twin_of(
    scenarios: &[(&Loaded, &ScenarioPredicate)],
    stem: &str,
    p: &ScenarioPredicate,
) -> Option<(String, ScenarioPredicate)> {
    scenarios
        .iter()
        .find(|(l, q)| l.stem != stem && q.scenario.name == p.scenario.name && q.fixes != p.fixes)
        .map(|(l, q)| (l.stem.clone(), (*q).clone()))
}
