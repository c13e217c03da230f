//! Links from a step to pinned upstream lines and the engine's own source.

use kvw_evidence::{SourceOrigin, SourceRef};
use kvw_words::source::{source_label as label_in, SourceLabel};
use leptos::either::Either;
use leptos::prelude::*;

use crate::i18n::Lang;
use crate::links::{source_label, source_url, web_href};

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
                    // Code reads the same in every language; a label the
                    // renderer does not know stays the receipt's English.
                    let (code, text, english) = match label_in(&s.label, lang) {
                        SourceLabel::Code(code) => (true, code, false),
                        SourceLabel::Words(words) => (false, words, false),
                        SourceLabel::English(text) => (false, text, true),
                    };
                    let text = text.to_string();
                    let label = if code {
                        Either::Left(view! { <code>{text}</code> })
                    } else {
                        Either::Right(view! { <span lang=english.then_some("en")>{text}</span> })
                    };
                    let place = view! { <code>{source_label(&s)}</code> };
                    let place = match web_href(&href) {
                        Some(href) => Either::Left(view! { <a href=href.to_string()>{place}</a> }),
                        None => Either::Right(place),
                    };
                    view! {
                        <li>
                            <span class="origin">{origin}</span>" "
                            {place}
                            " — "{label}
                        </li>
                    }
                }).collect_view()}
            </ul>
        </div>
    })
}
