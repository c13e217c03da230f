//! Fix switches: each one is a real link to the receipt of the flipped
//! combination, so it works without scripts; once hydrated, a click fetches
//! and verifies that receipt and swaps it in place.
//!
//! Each switch says what it is (upstream pull request and release, vendor
//! prototype, our own defense, or configuration, from
//! [`crate::switch_info`]), what it changes in one line, and what flipping it
//! does: the outcome of the sibling receipt, read from the catalog. A
//! combination the bundle never ran says so instead of guessing.

use leptos::either::Either;
use leptos::prelude::*;

use super::actions::switch_to;
use super::ReplayCtx;
use crate::catalog::{baseline_for, switches_for, SwitchView};
use crate::i18n::Lang;
use crate::page_data::CatalogEntry;
use crate::switch_info::{info, origin_words, pr_url, Origin};

/// The outcome of a catalog entry in words (it names the HTTP status).
pub fn outcome_preview(entry: &CatalogEntry, lang: Lang) -> String {
    entry.outcome(lang).to_string()
}

#[component]
fn Origin(name: String, lang: Lang) -> impl IntoView {
    let i = info(&name)?;
    let prs = match i.origin {
        Origin::Upstream { prs, .. } => prs.to_vec(),
        _ => Vec::new(),
    };
    Some(view! {
        <span class="origin">
            {prs.into_iter().map(|pr| view! { <a href=pr_url(pr) class="pr">{format!("PR #{pr}")}</a>" " }).collect_view()}
            {origin_words(i.origin, lang)}
        </span>
    })
}

#[component]
fn SwitchItem(switch: SwitchView, lang: Lang) -> impl IntoView {
    let ctx = ReplayCtx::get();
    let state = if switch.on {
        lang.pick("ON", "ACCESA")
    } else {
        lang.pick("OFF", "SPENTA")
    };
    let css = if switch.on { "switch on" } else { "switch off" };
    let name = switch.name.clone();
    let what = info(&name).map(|i| i.what(lang)).unwrap_or_default();
    let verb = if switch.on {
        lang.pick("Turning it off: ", "Spegnendola: ")
    } else {
        lang.pick("Turning it on: ", "Accendendola: ")
    };
    let sibling = switch.sibling.as_deref().and_then(|s| ctx.entry(s));
    let control = match switch.sibling.clone() {
        Some(stem) => {
            let href = ctx.data.with_value(|d| d.page_href(&stem));
            let action = if switch.on {
                lang.pick(
                    ": show the run without it",
                    ": mostra l'esecuzione senza questa correzione",
                )
            } else {
                lang.pick(
                    ": show the run with it",
                    ": mostra l'esecuzione con questa correzione",
                )
            };
            Either::Left(view! {
                <a class=css href=href data-switch=name.clone()
                    on:click=move |ev| { ev.prevent_default(); switch_to(ctx, stem.clone()); }>
                    <span class="knob">{state}</span>" "<code>{name.clone()}</code><span class="sr-only">{action}</span>
                </a>
            })
        }
        None => Either::Right(view! {
            <span class=format!("{css} unavailable") data-switch=name.clone()>
                <span class="knob" aria-hidden="true">{state}</span>" "<code>{name.clone()}</code>
            </span>
        }),
    };
    let preview = match sibling {
        Some(e) => Either::Left(
            view! { <p class="preview">{verb}<strong>{outcome_preview(&e, lang)}</strong></p> },
        ),
        None => Either::Right(view! {
            <p class="preview none">{lang.pick(
                "No receipt for this combination: the bundle did not run it, so there is no signed outcome to show. Turn another switch off first.",
                "Nessuna ricevuta per questa combinazione: il bundle non l'ha eseguita, quindi non c'è un esito firmato da mostrare. Spegni prima un altro interruttore.",
            )}</p>
        }),
    };
    view! {
        <li class="switch-item">
            {control}
            " "<Origin name=name.clone() lang=lang/>
            <p class="what">{what}</p>
            {preview}
        </li>
    }
}

#[component]
pub fn Switches(lang: Lang) -> impl IntoView {
    let ctx = ReplayCtx::get();
    let stem = ctx.shown.with_untracked(|s| s.stem().to_string());
    let (switches, compare) = ctx.catalog.with_value(|catalog| {
        let Some(entry) = crate::page_data::entry(catalog, &stem) else {
            return (Vec::new(), None);
        };
        let compare = ctx.data.with_value(|d| {
            let base = baseline_for(catalog, entry).filter(|b| b.stem != stem);
            base.map(|_| format!("{}{}/compare-{stem}.html", d.root, d.lang.code()))
        });
        (switches_for(catalog, entry), compare)
    });
    if switches.is_empty() {
        return None;
    }
    Some(view! {
        <section class="switches" aria-labelledby="switches-h">
            <h2 id="switches-h">{lang.pick("Fixes: which one stops it?", "Correzioni: quale la ferma?")}</h2>
            <p class="hint">{lang.pick("Each switch opens the signed receipt of that combination.", "Ogni interruttore apre la ricevuta firmata di quella combinazione.")}</p>
            <ul>{switches.into_iter().map(|s| view! { <SwitchItem switch=s lang=lang/> }).collect_view()}</ul>
            {compare.map(|href| view! {
                <p><a href=href id="kvw-compare-link">{lang.pick("Compare this run with the run without fixes", "Confronta questa esecuzione con quella senza correzioni")}<span aria-hidden="true">" →"</span></a></p>
            })}
        </section>
    })
}
