//! Links from a step to pinned upstream lines and the engine's own source.

use kvw_evidence::{SourceOrigin, SourceRef};
use leptos::prelude::*;

use crate::i18n::Lang;
use crate::links::{source_label, source_url};

#[component]
pub fn SourceLinks(
    sources: Vec<SourceRef>,
    engine_base: String,
    engine_commit: String,
    lang: Lang,
) -> impl IntoView {
    if sources.is_empty() {
        return None;
    }
    Some(view! {
        <div class="sources">
            <h3 class="sub">{lang.pick("Source lines", "Righe di codice")}</h3>
            <ul>
                {sources.into_iter().map(|s| {
                    let href = source_url(&s, &engine_base, &engine_commit);
                    let origin = match s.origin {
                        SourceOrigin::Upstream => "SGLang",
                        SourceOrigin::Engine => "kvwitness",
                    };
                    view! {
                        <li>
                            <span class="origin">{origin}</span>" "
                            <a href=href><code>{source_label(&s)}</code></a>
                            // The label is the receipt's own English words.
                            " — "<span lang=(lang != Lang::En).then_some("en")>{s.label.clone()}</span>
                        </li>
                    }
                }).collect_view()}
            </ul>
        </div>
    })
}
