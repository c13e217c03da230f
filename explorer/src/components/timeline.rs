//! The disclosed timeline as an ordered list.

use leptos::prelude::*;

use crate::i18n::Lang;
use crate::timeline::{unzoned_note, TIMELINE};

#[component]
pub fn TimelineView(lang: Lang) -> impl IntoView {
    view! {
        <section class="timeline" aria-labelledby="timeline-h">
            <h2 id="timeline-h">{lang.pick("Timeline (public record)", "Cronologia (fonti pubbliche)")}</h2>
            <ol>
                {TIMELINE.iter().map(|m| view! {
                    <li><time datetime=m.date>{m.when()}</time>" "<span>{m.text(lang)}</span></li>
                }).collect_view()}
            </ol>
            <p class="note">{unzoned_note(lang)}</p>
        </section>
    }
}
