//! The response the client received, with leaked canaries marked.

use kvw_evidence::Verdict;
use leptos::either::Either;
use leptos::prelude::*;

use crate::highlight::{segments, Segment};
use crate::i18n::Lang;

#[component]
pub fn ResponseView(verdict: Verdict, tenant: Option<String>, lang: Lang) -> impl IntoView {
    let ok = verdict.http_status == 200;
    let parts = segments(&verdict.response_text, &verdict.canaries_leaked)
        .into_iter()
        .map(|s| match s {
            Segment::Plain(t) => Either::Left(view! { <span>{t}</span> }),
            Segment::Canary(t) => Either::Right(view! { <mark class="canary">{t}</mark> }),
        })
        .collect_view();
    let leaked = verdict.canaries_leaked.join(", ");
    view! {
        <div class="response">
            <p class="label">{match tenant {
                Some(t) => match lang.spoken() {
                    Lang::En => format!("What tenant {t} received:"),
                    Lang::It => format!("Cosa ha ricevuto il tenant {t}:"),
                },
                None => lang.pick("What the client received:", "Cosa ha ricevuto il client:").to_string(),
            }}</p>
            <p class="http">
                <span class=if ok { "status s200" } else { "status s4xx" }>{format!("HTTP {}", verdict.http_status)}</span>
                " "
                <span class="latency">{format!("{} s", kvw_words::probe::seconds(verdict.latency_us))}</span>
            </p>
            <pre class="response-text" aria-label=lang.pick("Response text", "Testo della risposta")>{parts}</pre>
            {(!verdict.canaries_leaked.is_empty()).then(|| view! {
                <p class="callout leak">
                    <span aria-hidden="true">"⚠ "</span>
                    {lang.pick("Other tenants' canaries in this response (marked): ", "Canary di altri tenant in questa risposta (evidenziati): ")}
                    <strong>{leaked}</strong>
                </p>
            })}
        </div>
    }
}
