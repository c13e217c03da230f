//! Fix switches: each one is a real link to the receipt of the flipped
//! combination, so it works without scripts; once hydrated, a click fetches
//! and verifies that receipt and swaps it in place.

use leptos::prelude::*;

use super::actions::switch_to;
use super::ReplayCtx;
use crate::catalog::{baseline_for, switches_for, SwitchView};
use crate::i18n::Lang;

#[component]
fn SwitchLink(switch: SwitchView, lang: Lang) -> impl IntoView {
    let ctx = ReplayCtx::get();
    let state = if switch.on { "ON" } else { "OFF" };
    let css = if switch.on { "switch on" } else { "switch off" };
    let name = switch.name.clone();
    match switch.sibling {
        Some(stem) => {
            let href = ctx.data.with_value(|d| d.page_href(&stem));
            let label = format!(
                "{name}: {} — {}",
                if switch.on { lang.pick("on", "attivo") } else { lang.pick("off", "spento") },
                if switch.on { lang.pick("show the run without it", "mostra l'esecuzione senza") } else { lang.pick("show the run with it", "mostra l'esecuzione con") },
            );
            view! {
                <li>
                    <a class=css href=href data-switch=name.clone() aria-label=label
                        on:click=move |ev| { ev.prevent_default(); switch_to(ctx, stem.clone()); }>
                        <span class="knob" aria-hidden="true">{state}</span>" "<code>{name.clone()}</code>
                    </a>
                </li>
            }
            .into_any()
        }
        None => view! {
            <li>
                <span class=format!("{css} unavailable") data-switch=name.clone()>
                    <span class="knob" aria-hidden="true">{state}</span>" "<code>{name.clone()}</code>
                    <span class="why">{lang.pick(" (no receipt for this combination)", " (nessuna ricevuta per questa combinazione)")}</span>
                </span>
            </li>
        }
        .into_any(),
    }
}

#[component]
pub fn Switches(lang: Lang) -> impl IntoView {
    let ctx = ReplayCtx::get();
    let (switches, compare) = ctx.data.with_value(|d| {
        let stem = ctx.shown.with_untracked(|s| s.stem().to_string());
        let Some(entry) = d.entry(&stem) else {
            return (Vec::new(), None);
        };
        let compare = baseline_for(&d.catalog, entry)
            .filter(|b| b.stem != stem)
            .map(|_| format!("{}{}/compare-{stem}.html", d.root, d.lang.code()));
        (switches_for(&d.catalog, entry), compare)
    });
    if switches.is_empty() {
        return ().into_any();
    }
    view! {
        <section class="switches" aria-labelledby="switches-h">
            <h2 id="switches-h">{lang.pick("Fixes", "Correzioni")}</h2>
            <p class="hint">{lang.pick("Each switch opens the signed receipt of that combination.", "Ogni interruttore apre la ricevuta firmata di quella combinazione.")}</p>
            <ul>{switches.into_iter().map(|s| view! { <SwitchLink switch=s lang=lang/> }).collect_view()}</ul>
            {compare.map(|href| view! {
                <p><a href=href id="kvw-compare-link">{lang.pick("Compare this run with the run without fixes", "Confronta questa esecuzione con quella senza correzioni")}<span aria-hidden="true">" →"</span></a></p>
            })}
        </section>
    }
    .into_any()
}
