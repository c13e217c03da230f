//! Two receipts side by side, with the first step where they part ways.
//!
//! Compare pages are static: both receipts were verified when the site was
//! built, and the view is a table a reader scans row by row, so there is
//! nothing for scripts to add.

use kvw_evidence::{ProbePredicate, Step, WriterClass};
use leptos::prelude::*;

use crate::diverge::{first_divergence, same_step};
use crate::i18n::Lang;
use crate::pages;

/// One side of the comparison.
#[derive(Clone)]
pub struct Side {
    pub stem: String,
    pub href: String,
    pub predicate: ProbePredicate,
}

#[component]
fn Cell(step: Option<Step>, label: String, lang: Lang) -> impl IntoView {
    let Some(step) = step else {
        return view! { <td data-label=label>"—"</td> }.into_any();
    };
    let sentences = kvw_evidence::render::step_sentences(&step, lang.render());
    let state = step.state.map(|s| {
        format!(
            "{}: finished()={} · {} {} → {} · {}",
            s.door,
            if s.finished { "True" } else { "False" },
            lang.pick("prompt", "prompt"),
            s.original_prompt_len,
            s.origin_input_len,
            s.decision
        )
    });
    let pages = step.pages.map(|v| {
        let read = pages::total(&v.read);
        let foreign = pages::pages_of_class(&v, &v.read, WriterClass::OtherTenant);
        match lang {
            Lang::En => format!(
                "pages: reserved {} · transferred {} · read {read} ({foreign} another tenant's)",
                pages::total(&v.reserved),
                pages::total(&v.transferred)
            ),
            Lang::It => format!(
                "pagine: riservate {} · trasferite {} · lette {read} ({foreign} di un altro tenant)",
                pages::total(&v.reserved),
                pages::total(&v.transferred)
            ),
        }
    });
    view! {
        <td data-label=label>
            <ul class="facts">{sentences.into_iter().map(|t| view! { <li>{t}</li> }).collect_view()}</ul>
            {state.map(|s| view! { <p class="small"><code>{s}</code></p> })}
            {pages.map(|p| view! { <p class="small">{p}</p> })}
        </td>
    }
    .into_any()
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
                    <Cell step=a label=left.stem.clone() lang=lang/>
                    <Cell step=b label=right.stem.clone() lang=lang/>
                </tr>
            }
        })
        .collect_view();
    let verdict = |p: &ProbePredicate| {
        format!(
            "HTTP {} · {}",
            p.verdict.http_status,
            kvw_evidence::render::outcome_line(p, lang.render())
        )
    };
    view! {
        <section class="compare" aria-labelledby="compare-h">
            <h1 id="compare-h">{lang.pick("Compare two runs", "Confronta due esecuzioni")}</h1>
            <p class="callout" id="kvw-divergence">{banner}</p>
            <div class="table-scroll">
                <table>
                    <thead><tr>
                        <th scope="col">{lang.pick("Step", "Passo")}</th>
                        <th scope="col"><a href=left.href.clone()><code>{left.stem.clone()}</code></a></th>
                        <th scope="col"><a href=right.href.clone()><code>{right.stem.clone()}</code></a></th>
                    </tr></thead>
                    <tbody>
                        {rows}
                        <tr class="verdict-row">
                            <th scope="row">{lang.pick("Verdict", "Esito")}</th>
                            <td data-label=left.stem.clone()>{verdict(&left.predicate)}</td>
                            <td data-label=right.stem.clone()>{verdict(&right.predicate)}</td>
                        </tr>
                    </tbody>
                </table>
            </div>
        </section>
    }
    .into_any()
}
