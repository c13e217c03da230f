//! Beside steps 2 and 5: what the real SGLang releases did at that door.
//!
//! The differential (`kvw upstream run`) drives each release's own admission
//! code with the incident's over-long request; the bundle carries its
//! receipts and the site builder lists their decisions in the page data
//! ([`crate::page_data::UpstreamDoor`]). Each release links to the page of
//! the receipt that records it. A step with no such receipt draws nothing.

use leptos::prelude::*;

use super::provenance::ProvenanceBadge;
use super::ReplayCtx;
use crate::i18n::Lang;
use kvw_evidence::Provenance;

/// A door decision in the reader's language; an unknown one as written.
fn decided(door: &str, lang: Lang) -> String {
    match door {
        "admit" => lang.pick("admitted", "ammessa").to_string(),
        "retire" => lang.pick("retired", "ritirata").to_string(),
        "refuse" => lang.pick("refused", "rifiutata").to_string(),
        other => other.to_string(),
    }
}

#[component]
pub fn UpstreamDoors(step: u8, lang: Lang) -> impl IntoView {
    let ctx = ReplayCtx::get();
    let (doors, root) = ctx.data.with_value(|d| {
        let doors: Vec<_> = d
            .upstream_doors
            .iter()
            .filter(|u| u.step == step)
            .cloned()
            .collect();
        (doors, d.root.clone())
    });
    if doors.is_empty() {
        return None;
    }
    let items = doors
        .into_iter()
        .map(|u| {
            let href = crate::page_data::page_href(&root, lang, &u.stem);
            view! {
                <li data-release=u.release.clone() data-door=u.door.clone()>
                    <a href=href>{format!("SGLang {}", u.release)}</a>": "{decided(&u.door, lang)}
                </li>
            }
        })
        .collect_view();
    Some(view! {
        <aside class="upstream-doors" aria-label=lang.pick("What real SGLang releases did", "Cosa hanno fatto le release reali di SGLang")>
            <p class="label">
                <ProvenanceBadge provenance=Provenance::UpstreamRun lang=lang/>" "
                {lang.pick(
                    "The same over-long request at this door, in the released code:",
                    "La stessa richiesta troppo lunga a questo ingresso, nel codice pubblicato:",
                )}
            </p>
            <ul>{items}</ul>
        </aside>
    })
}
