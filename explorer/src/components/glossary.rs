//! The handful of words a reader needs, defined once and linked from every step.

use leptos::prelude::*;

use crate::i18n::Lang;

/// Id, term, definition (English, Italian). Ids are `gloss-<id>`. A term
/// is the word the pages use, the same in both languages except where
/// Italian has its own (`page`: `pagina`).
const TERMS: [(&str, &str, &str, &str); 8] = [
    (
        "tenant",
        "tenant",
        "A customer of the inference service. Tenants share the GPUs, so one tenant's cached data must never reach another's answer.",
        "Un cliente del servizio di inferenza. I tenant condividono le GPU: i dati in cache di uno non devono mai finire nella risposta di un altro.",
    ),
    (
        "canary",
        "canary",
        "A unique marker string planted in each tenant's prompt. If it shows up in someone else's answer, their data leaked.",
        "Una stringa marcatrice unica inserita nel prompt di ogni tenant. Se compare nella risposta di un altro, i suoi dati sono trapelati.",
    ),
    (
        "page",
        "page|pagina",
        "A fixed-size block of the KV cache (the model's memory of a prompt). Pools hand pages out and take them back; a freed page keeps its old bytes.",
        "Un blocco di dimensione fissa della KV cache (la memoria del modello su un prompt). I pool assegnano pagine e le riprendono; una pagina liberata conserva i vecchi byte.",
    ),
    (
        "pd",
        "prefill / decode",
        "The two halves of serving a request, on separate machines: prefill reads the prompt and fills KV pages, decode receives those pages and writes the answer token by token.",
        "Le due metà del servizio di una richiesta, su macchine separate: il prefill legge il prompt e riempie le pagine KV, il decode riceve quelle pagine e scrive la risposta token per token.",
    ),
    (
        "door",
        "door|ingresso",
        "Where a queue admits a request: prefill's bootstrap queue and decode's prealloc queue each check it there, and a request let through gets a bootstrap room, buffers and pages.",
        "Il punto in cui una coda ammette una richiesta: la coda di bootstrap di prefill e la coda di prealloc di decode la controllano lì, e una richiesta lasciata passare riceve una room di bootstrap, buffer e pagine.",
    ),
    (
        "reserve",
        "reserve|prenotare",
        "Decode sets aside pages for a request before any KV arrives (_pre_alloc), for the prompt as decode counts it; the transfer then writes into them.",
        "Decode mette da parte le pagine di una richiesta prima che arrivi la KV (_pre_alloc), per il prompt come lo conta decode; il trasferimento poi le scrive.",
    ),
    (
        "bootstrap",
        "bootstrap",
        "The handshake that pairs a request's prefill and decode sides before any KV is transferred.",
        "Lo scambio iniziale che accoppia il lato prefill e il lato decode di una richiesta prima di trasferire la KV.",
    ),
    (
        "finished",
        "to_finish / finished()",
        "SGLang records a rejection in to_finish, but the admission check finished() reads finished_reason, which is set later: in between, a rejected request looks alive.",
        "SGLang registra un rifiuto in to_finish, ma il controllo di ammissione finished() legge finished_reason, impostato dopo: nel frattempo una richiesta respinta sembra viva.",
    ),
];

/// A term in `lang`: `english|italian` where the two differ.
fn term_in(term: &'static str, lang: Lang) -> &'static str {
    match term.split_once('|') {
        Some((en, it)) => lang.pick(en, it),
        None => term,
    }
}

/// The glossary as a definition list (`#glossary`).
#[component]
pub fn Glossary(lang: Lang) -> impl IntoView {
    view! {
        <section class="glossary" id="glossary" aria-labelledby="glossary-h">
            <h2 id="glossary-h">{lang.pick("Glossary", "Glossario")}</h2>
            <dl>
                {TERMS.iter().map(|(id, term, en, it)| view! {
                    <dt id=format!("gloss-{id}")>{term_in(term, lang)}</dt>
                    <dd>{lang.pick(en, it)}</dd>
                }).collect_view()}
            </dl>
        </section>
    }
}
