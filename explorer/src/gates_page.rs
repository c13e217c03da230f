//! The gates page: the four acceptance gates as a table, one per set of
//! fixes the bundle carries (no fixes, every fix).
//!
//! A gates receipt (predicate `gates/v3`,
//! [`kvw_evidence::scenario::GatesPredicate`]) holds one row per scenario:
//! gate, expected, observed, pass / fail / not exercised and why, and each
//! worker's KV pool against the configured context. This module draws each
//! receipt as a plain table; a row links to its scenario's replay when the
//! bundle holds that scenario's receipt under the same fixes and with the
//! same event digest the row names, so a link always opens the very run the
//! row reports.

use std::collections::BTreeSet;

use kvw_evidence::scenario::{GatesPredicate, ScenarioStatus};
use leptos::prelude::*;

use crate::i18n::Lang;
use crate::scenario_page::{said_view, status_slug, status_text};
use kvw_words::scenario as words;

/// The receipt stem of scenario `name` run under `fixes`, as `kvw gates
/// --out` and `kvw bundle` name it.
pub fn scenario_stem(name: &str, fixes: &[kvw_evidence::Fix]) -> String {
    kvw_evidence::receipt_name::scenario_stem(name, kvw_evidence::FixSet::new(fixes))
}

/// One gates receipt of the site.
#[derive(Debug, Clone)]
pub struct GatesTable {
    pub stem: String,
    pub predicate: GatesPredicate,
}

#[component]
fn Table(
    table: GatesTable,
    /// (stem, trace digest) of every scenario receipt of the site.
    scenarios: BTreeSet<(String, String)>,
    lang: Lang,
) -> impl IntoView {
    let p = table.predicate;
    let set = kvw_evidence::FixSet::new(&p.fixes);
    let fixes = set.to_string();
    let fixes_shown = lang.fix_set(set);
    // "3 fail"; in Italian the participle agrees: "1 fallito", "3 falliti".
    let count = |s| {
        let n = p.rows.iter().filter(|r| r.status == s).count();
        let word = match (lang, s, n) {
            (Lang::En, _, _) | (Lang::It, _, 1) => status_text(s, lang),
            (Lang::It, ScenarioStatus::Pass, _) => "superati",
            (Lang::It, ScenarioStatus::Fail, _) => "falliti",
            (Lang::It, ScenarioStatus::NotExercised, _) => "non esercitati",
        };
        format!("{n} {word}")
    };
    let summary = format!(
        "{}, {}, {} — {} {}",
        count(ScenarioStatus::Pass),
        count(ScenarioStatus::Fail),
        count(ScenarioStatus::NotExercised),
        p.rows.len(),
        lang.pick("scenarios", "scenari"),
    );
    let rows = p
        .rows
        .iter()
        .map(|r| {
            let stem = scenario_stem(&r.scenario, &p.fixes);
            let linked = scenarios.contains(&(stem.clone(), r.trace_sha256.clone()));
            let name = r.scenario.clone();
            let cell = if linked {
                let href = format!("{stem}.html");
                view! { <a href=href>{name}</a> }.into_any()
            } else {
                view! { <span>{name}</span> }.into_any()
            };
            view! {
                <tr data-status=status_slug(r.status) data-scenario=r.scenario.clone()>
                    <td>{r.gate.clone()}</td>
                    <td>{cell}</td>
                    <td>{said_view(words::expected(&r.expected, lang))}</td>
                    <td>{said_view(words::observed(&r.observed, lang))}</td>
                    <td class=format!("result r-{} {}", status_slug(r.status), if r.as_recorded { "as-recorded" } else { "unexpected" })>
                        {status_text(r.status, lang)}
                        <small>{if r.as_recorded {
                            lang.pick("as the record predicts", "come prevede la fonte")
                        } else {
                            lang.pick("not what the record predicts", "non come prevede la fonte")
                        }}</small>
                    </td>
                    <td>{said_view(words::why(&r.why, lang))}</td>
                </tr>
            }
        })
        .collect_view();
    let capacity = p
        .capacity
        .iter()
        .map(|c| {
            let verdict = if c.reject_path_reachable {
                lang.pick(
                    "context > pool: the reject path is reachable",
                    "contesto > pool: il percorso di rifiuto è raggiungibile",
                )
            } else {
                lang.pick("the pool covers the context", "il pool copre il contesto")
            };
            view! {
                <tr>
                    <td>{c.config.clone()}</td>
                    <td>{c.worker.clone()}</td>
                    <td>{c.context_len}</td>
                    <td>{c.pool_tokens}</td>
                    <td>{c.max_req_input_len}</td>
                    <td>{verdict}</td>
                </tr>
            }
        })
        .collect_view();
    let title_id = format!("{}-title", table.stem);
    let heading = format!("{} {fixes_shown}", lang.pick("Fixes:", "Correzioni:"));
    let verdict = if p.all_pass {
        lang.pick("Every gate passes.", "Ogni gate è superato.")
    } else {
        lang.pick("Not every gate passes.", "Non tutti i gate sono superati.")
    };
    view! {
        // `data-kvw-receipt` names the receipt this part reports: if the
        // browser's check refuses that file, only this part is hidden.
        <section class="gates" id=table.stem.clone() data-fixes=fixes.clone() data-kvw-receipt=table.stem.clone()>
            <h2 id=title_id.clone()>{heading}</h2>
            <p class="when-refused">{lang.pick(
                "Hidden: the receipt of these results does not verify (see its warning above). The other results on this page verified.",
                "Nascosto: la ricevuta di questi risultati non supera la verifica (vedi l'avviso in alto). Gli altri risultati della pagina l'hanno superata.",
            )}</p>
            <p class="gates-summary"><strong>{verdict}</strong>" "{summary}</p>
            // A wide table scrolls inside its own region, which the
            // keyboard can focus and scroll.
            <div class="table-scroll" role="region" tabindex="0" aria-labelledby=title_id.clone()>
            <table class="gates-table">
                <thead><tr>
                    <th scope="col">{lang.pick("Gate", "Gate")}</th>
                    <th scope="col">{lang.pick("Scenario", "Scenario")}</th>
                    <th scope="col">{lang.pick("Expected", "Atteso")}</th>
                    <th scope="col">{lang.pick("Observed", "Osservato")}</th>
                    <th scope="col">{lang.pick("Result", "Esito")}</th>
                    <th scope="col">{lang.pick("Why", "Perché")}</th>
                </tr></thead>
                <tbody>{rows}</tbody>
            </table>
            </div>
            <details class="gates-capacity">
                <summary>{lang.pick("Pool against context, as each worker states them at start", "Pool e contesto, come ogni worker li dichiara all'avvio")}</summary>
                <table>
                    <thead><tr>
                        <th scope="col">{lang.pick("Configuration", "Configurazione")}</th>
                        <th scope="col">"Worker"</th>
                        <th scope="col">{lang.pick("Context", "Contesto")}</th>
                        <th scope="col">{lang.pick("Pool tokens", "Token del pool")}</th>
                        <th scope="col">{lang.pick("Max input", "Input massimo")}</th>
                        <th scope="col">{lang.pick("Reading", "Lettura")}</th>
                    </tr></thead>
                    <tbody>{capacity}</tbody>
                </table>
            </details>
        </section>
    }
}

/// Every gates receipt of the site, no fixes first.
#[component]
pub fn GatesView(
    tables: Vec<GatesTable>,
    scenarios: BTreeSet<(String, String)>,
    lang: Lang,
) -> impl IntoView {
    let mut tables = tables;
    tables.sort_by_key(|t| (t.predicate.fixes.len(), t.stem.clone()));
    let intro = lang.pick(
        "Every scenario run under a set of fixes, grouped by the four acceptance gates (pool / context, reject / admission, transfer / read, lifetime / ownership). A defense that was off is reported as not exercised, never as a pass. Each scenario links to the replay of its run.",
        "Ogni scenario eseguito con un insieme di correzioni, raggruppato per i quattro gate di accettazione (pool / contesto, rifiuto / ammissione, trasferimento / lettura, ciclo di vita / appartenenza). Una difesa spenta risulta non esercitata, mai superata. Ogni scenario rimanda alla riproduzione della sua esecuzione.",
    );
    view! {
        <article class="gates-page">
            <h1>{lang.pick("Acceptance gates", "Gate di accettazione")}</h1>
            <p>{intro}</p>
            {tables
                .into_iter()
                .map(|t| view! { <Table table=t scenarios=scenarios.clone() lang=lang/> })
                .collect_view()}
        </article>
    }
}
