//! Two receipts side by side, with the first step where they part ways.
//!
//! The static page holds the comparison the site was built for (read
//! without scripts). With scripts, the page fetches both receipt files and
//! verifies them in the browser like any replay ([`ComparePage`] redrawn
//! from what verified), and a picker compares any two receipts of the site,
//! across scales and scenarios. A side that fails verification shows the
//! warning instead of the table.

use std::sync::Arc;

use kvw_evidence::{ProbePredicate, Step, WriterClass};
use leptos::either::{Either, EitherOf3};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::coverage::{bar_html, coverage, row_html, Coverage};
use crate::diverge::{first_divergence, same_step};
use crate::i18n::Lang;
use crate::page_data::{
    entry, fixes_label, no_fix, run_label, scale_label, CatalogEntry, PageData, Shown,
};
use crate::pool_runs;

/// Id of the `<script type="application/json">` naming the pair compared.
pub const COMPARE_PAIR_ID: &str = "kvw-compare";

/// The two receipts a compare page was built for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComparePair {
    pub left: String,
    pub right: String,
}

/// Everything a compare page is drawn from.
#[derive(Clone)]
pub struct CompareApp {
    pub data: PageData,
    pub catalog: Vec<CatalogEntry>,
    pub left: Shown,
    pub right: Shown,
    /// Whether this browser verified both sides (else the site builder did).
    pub browser_checked: bool,
}

/// Two selects over the catalog and a button: a plain GET form, read by the
/// page's script (`?a=STEM&b=STEM`). Runs are grouped by probe, scale and
/// how many switches are on, each named by its switches and outcome.
#[component]
fn Picker(catalog: Vec<CatalogEntry>, left: String, right: String, lang: Lang) -> impl IntoView {
    let mut groups: Vec<(String, Vec<&CatalogEntry>)> = Vec::new();
    for e in &catalog {
        let name = group_name(e, lang);
        match groups.iter_mut().find(|(g, _)| *g == name) {
            Some((_, list)) => list.push(e),
            None => groups.push((name, vec![e])),
        }
    }
    let select = |name: &'static str, label: &'static str, chosen: &str| {
        let id = format!("pick-{name}");
        let options = groups
            .iter()
            .map(|(group, list)| {
                let options = list
                    .iter()
                    .map(|e| {
                        let text = format!("{} — {}", fixes_label(e, lang), e.outcome(lang));
                        view! { <option value=e.stem.clone() selected=e.stem == chosen>{text}</option> }
                    })
                    .collect_view();
                view! { <optgroup label=group.clone()>{options}</optgroup> }
            })
            .collect_view();
        view! {
            <label for=id.clone()>{label}</label>
            <select id=id name=name>{options}</select>
        }
    };
    view! {
        <form class="picker js-only" method="get" action="compare.html" id="kvw-picker">
            {select("a", lang.pick("Run A", "Esecuzione A"), &left)}
            {select("b", lang.pick("Run B", "Esecuzione B"), &right)}
            <button type="submit">{lang.pick("Compare", "Confronta")}</button>
        </form>
    }
}

/// The picker's group of `e`: its probe (when not the incident's), scale
/// and number of switches on.
fn group_name(e: &CatalogEntry, lang: Lang) -> String {
    let scale = scale_label(e.scale, lang);
    let probe = if e.probe == "incident" {
        String::new()
    } else {
        format!("{} · ", e.probe)
    };
    let n = e.switches.len();
    let on = match (n, lang.spoken()) {
        (0, _) => no_fix(lang).to_string(),
        (1, Lang::En) => "one switch".to_string(),
        (1, Lang::It) => "una correzione".to_string(),
        (_, Lang::En) => format!("{n} switches"),
        (_, Lang::It) => format!("{n} correzioni"),
    };
    format!("{probe}{scale} · {on}")
}

/// The trust line of one side.
fn side_trust(shown: &Shown, checked: bool, lang: Lang) -> impl IntoView {
    match shown {
        Shown::Verified { stem, sha256, .. } => {
            let where_ = if checked {
                lang.pick("verified in this browser", "verificata in questo browser")
            } else {
                lang.pick(
                    "verified when the site was built",
                    "verificata alla costruzione del sito",
                )
            };
            let short = sha256.get(..16).unwrap_or(sha256).to_string();
            EitherOf3::A(view! {
                <li class="ok"><span aria-hidden="true">"✔ "</span><code>{format!("{stem}.json")}</code>" "{where_}" · sha256 "<code>{short}</code></li>
            })
        }
        Shown::Rejected { stem, reason } => EitherOf3::B(view! {
            <li class="bad"><span aria-hidden="true">"⚠ "</span><code>{format!("{stem}.json")}</code>" "{lang.pick("NOT VERIFIED: ", "NON VERIFICATA: ")}{reason.clone()}</li>
        }),
        Shown::Loading { stem } => EitherOf3::C(view! { <li><code>{stem.clone()}</code>"…"</li> }),
    }
}

/// A whole compare page's main content: picker, trust lines, comparison.
#[component]
pub fn ComparePage(app: CompareApp) -> impl IntoView {
    let lang = app.data.lang;
    let checked = app.browser_checked;
    let side = |shown: &Shown| {
        let predicate = shown.predicate()?.clone();
        let stem = shown.stem().to_string();
        Some(Side {
            label: run_label(entry(&app.catalog, &stem), &stem, lang),
            href: format!("{stem}.html"),
            stem,
            predicate,
        })
    };
    let body = match (side(&app.left), side(&app.right)) {
        (Some(l), Some(r)) => Either::Left(view! { <CompareView left=l right=r lang=lang/> }),
        _ => Either::Right(view! {
            <div class="tampered" role="alert" id="kvw-warning">
                <h2><span aria-hidden="true">"⚠ "</span>{lang.pick("Not compared: a receipt failed verification", "Nessun confronto: una ricevuta non ha superato la verifica")}</h2>
                <p><a href=format!("{}index.html", app.data.root)>{lang.pick("Back to the verified runs", "Torna alle esecuzioni verificate")}</a></p>
            </div>
        }),
    };
    let trust_css = if app.left.is_verified() && app.right.is_verified() {
        "trust-list ok"
    } else {
        "trust-list bad"
    };
    view! {
        <h1 id="compare-h">{lang.pick("Compare two runs", "Confronta due esecuzioni")}</h1>
        <Picker catalog=app.catalog.clone() left=app.left.stem().to_string() right=app.right.stem().to_string() lang=lang/>
        <ul class=trust_css id="kvw-trust">
            {side_trust(&app.left, checked, lang)}
            {side_trust(&app.right, checked, lang)}
        </ul>
        {body}
    }
}

/// One side of the comparison.
#[derive(Clone)]
pub struct Side {
    pub stem: String,
    /// The run in words (fixes and scale).
    pub label: String,
    pub href: String,
    pub predicate: Arc<ProbePredicate>,
}

#[component]
fn Cell(step: Option<Step>, label: String, lang: Lang) -> impl IntoView {
    let Some(step) = step else {
        return Either::Left(view! { <td data-label=label>"—"</td> });
    };
    let sentences = kvw_words::probe::step_sentences(&step, lang);
    let state = step.state.map(|s| {
        format!(
            "{}: finished()={} · {} {} → {} · {}",
            kvw_words::probe::door_name(s.door),
            if s.finished { "True" } else { "False" },
            lang.pick("prompt", "prompt"),
            s.original_prompt_len,
            s.origin_input_len,
            kvw_words::probe::decision(s.decision, lang)
        )
    });
    let pages = step.pages.map(|v| {
        let read = pool_runs::total(&v.read);
        let foreign = pool_runs::pages_of_class(&v, &v.read, WriterClass::OtherTenant);
        match lang.spoken() {
            Lang::En => format!(
                "pages: reserved {} · transferred {} · read {read} ({foreign} another tenant's)",
                pool_runs::total(&v.reserved),
                pool_runs::total(&v.transferred)
            ),
            Lang::It => format!(
                "pagine: prenotate {} · trasferite {} · lette {read} ({foreign} di un altro tenant)",
                pool_runs::total(&v.reserved),
                pool_runs::total(&v.transferred)
            ),
        }
    });
    Either::Right(view! {
        <td data-label=label>
            <ul class="facts">{sentences.into_iter().map(|t| view! { <li>{t}</li> }).collect_view()}</ul>
            {state.map(|s| view! { <p class="small"><code>{s}</code></p> })}
            {pages.map(|p| view! { <p class="small">{p}</p> })}
        </td>
    })
}

/// Both runs' coverage at their last step on one token axis, as HTML: for
/// each figure, run A's bar above run B's.
fn overlay_html(a: Coverage, b: Coverage, lang: Lang) -> String {
    let axis = a.axis().max(b.axis());
    let number = |tokens: u64, foreign: u64| match foreign {
        0 => tokens.to_string(),
        _ => format!(
            "{tokens} ({foreign} {})",
            lang.pick("another tenant's", "di altri tenant")
        ),
    };
    let rows: String = a
        .rows(lang)
        .into_iter()
        .zip(b.rows(lang))
        .map(|((label, at, af, css), (_, bt, bf, _))| {
            let bars = format!(
                "<span class=\"rb-pair\">{}{}</span>",
                bar_html(at, af, axis, css),
                bar_html(bt, bf, axis, css)
            );
            let words = format!("A {} · B {}", number(at, af), number(bt, bf));
            row_html(label, &bars, &words)
        })
        .collect();
    let caption = lang.pick(
        "Tokens of the probed prompt at the end of each run: A above, B below; hatched: read from another tenant's pages",
        "Token del prompt sondato alla fine di ogni esecuzione: A sopra, B sotto; a tratteggio: letti da pagine di altri tenant",
    );
    format!("<figcaption>{caption}</figcaption>{rows}")
}

#[component]
pub fn CompareView(left: Side, right: Side, lang: Lang) -> impl IntoView {
    let first = first_divergence(&left.predicate, &right.predicate);
    let banner = match first {
        Some(n) => format!(
            "{} {n}",
            lang.pick(
                "The runs first differ at step",
                "Le esecuzioni divergono per la prima volta al passo"
            )
        ),
        None => lang
            .pick(
                "The two runs match at every step.",
                "Le due esecuzioni coincidono in ogni passo.",
            )
            .to_string(),
    };
    let last = |p: &ProbePredicate| coverage(p).last().copied().unwrap_or_default();
    let (ca, cb) = (last(&left.predicate), last(&right.predicate));
    let overlay = (!ca.is_empty() || !cb.is_empty()).then(|| {
        view! { <figure class="ribbon overlay" id="kvw-overlay" inner_html=overlay_html(ca, cb, lang)></figure> }
    });
    let rows = (0..7usize)
        .map(|i| {
            let (a, b) = (left.predicate.steps.get(i).cloned(), right.predicate.steps.get(i).cloned());
            let n = (i + 1) as u8;
            let differs = match (&a, &b) {
                (Some(x), Some(y)) => !same_step(x, y),
                _ => true,
            };
            let name = lang.step_name(n);
            let css = if first == Some(n) { "diverge first" } else if differs { "diverge" } else { "" };
            view! {
                <tr class=css id=format!("cmp-step-{n}")>
                    <th scope="row">
                        {format!("{n}. {name}")}
                        {(first == Some(n)).then(|| view! { <span class="tag">{lang.pick(" first divergence", " prima divergenza")}</span> })}
                        {(differs && first != Some(n)).then(|| view! { <span class="tag">{lang.pick(" differs", " diverso")}</span> })}
                    </th>
                    <Cell step=a label=left.label.clone() lang=lang/>
                    <Cell step=b label=right.label.clone() lang=lang/>
                </tr>
            }
        })
        .collect_view();
    let verdict = |p: &ProbePredicate| {
        format!(
            "HTTP {} · {}",
            p.verdict.http_status,
            kvw_words::probe::outcome_line(p, lang)
        )
    };
    view! {
        <section class="compare" aria-label=lang.pick("Comparison", "Confronto")>
            <p class="callout" id="kvw-divergence">{banner}</p>
            {overlay}
            <div class="table-scroll">
                <table>
                    <thead><tr>
                        <th scope="col">{lang.pick("Step", "Passo")}</th>
                        <th scope="col">"A: "<a href=left.href.clone()>{left.label.clone()}</a></th>
                        <th scope="col">"B: "<a href=right.href.clone()>{right.label.clone()}</a></th>
                    </tr></thead>
                    <tbody>
                        {rows}
                        <tr class="verdict-row">
                            <th scope="row">{lang.pick("Verdict", "Esito")}</th>
                            <td data-label=left.label.clone()>{verdict(&left.predicate)}</td>
                            <td data-label=right.label.clone()>{verdict(&right.predicate)}</td>
                        </tr>
                    </tbody>
                </table>
            </div>
        </section>
    }
}
